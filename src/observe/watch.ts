/**
 * `locker.watch()`: the changes of the locks under a prefix, as an async iterator. A
 * backend that is notified by its engine implements `Backend.watch`; for every other one
 * the core lists every page under the prefix each `everyMs` and reports the difference
 * between two listings (docs/observability.md, "Watching"): a change is seen up to
 * `everyMs` plus one listing late, and a hold that began and ended between two listings
 * is not seen at all.
 */
import type { Backend, WatchChange } from '../backend.js';
import { UnsupportedError } from '../errors.js';
import { sleep } from '../util/time.js';
import { decodeIdentity } from './identity.js';
import { diff, snapshot, type Seen, type WatchEvent } from './diff.js';
import { watchNotified } from './notified.js';

export type { WatchEvent } from './diff.js';

/** Options of `locker.watch()`. */
export interface WatchOptions {
  /** Only lock ids that start with this. @default '' */
  readonly prefix?: string;
  /** Ends the iteration (quietly). Closing the locker ends it too. */
  readonly signal?: AbortSignal;
  /** Polling backends: how often to list (ms). @default 1000 */
  readonly everyMs?: number;
}

/** Default polling period of the generic watch. */
export const DEFAULT_WATCH_EVERY_MS = 1_000;

/** The changes under `prefix` until `signal` aborts (then the iteration ends without an error). */
export async function* watchLocks(backend: Backend, prefix: string, everyMs: number, signal: AbortSignal): AsyncGenerator<WatchEvent> {
  if (backend.watch) {
    for await (const c of backend.watch({ prefix, signal })) yield decodeChange(c);
    return;
  }
  if (backend.changes) {
    yield* watchNotified(backend, prefix, signal);
    return;
  }
  if (!backend.list) throw new UnsupportedError(backend.name, 'watching locks');
  let previous: Map<string, Seen> | undefined;
  while (!signal.aborted) {
    let current: Map<string, Seen>;
    try {
      current = await snapshot(backend, prefix, signal);
    } catch (err) {
      if (signal.aborted) return;
      throw err;
    }
    for (const e of diff(previous, current, Date.now())) yield e;
    previous = current;
    try {
      await sleep(everyMs, signal);
    } catch {
      return;
    }
  }
}

function decodeChange(c: WatchChange): WatchEvent {
  const { identity, ...rest } = c;
  const who = decodeIdentity(identity);
  return { ...rest, ...(who ? { identity: who } : {}) };
}

/**
 * `locker.watch()`: the changes of the locks under a prefix, as an async iterator. A
 * backend that is notified by its engine implements `Backend.watch`; for every other one
 * the core lists every page under the prefix each `everyMs` and reports the difference
 * between two listings (docs/observability.md, "Watching"): a change is seen up to
 * `everyMs` plus one listing late, and a hold that began and ended between two listings
 * is not seen at all.
 */
import type { Backend, HolderState, LockKind, LockState, WaiterState, WatchChange, WatchChangeType } from '../backend.js';
import { UnsupportedError } from '../errors.js';
import { sleep } from '../util/time.js';
import { decodeIdentity, type Identity } from './identity.js';
import { MAX_LIST_LIMIT } from './list.js';

/** Options of `locker.watch()`. */
export interface WatchOptions {
  /** Only lock ids that start with this. @default '' */
  readonly prefix?: string;
  /** Ends the iteration (quietly). Closing the locker ends it too. */
  readonly signal?: AbortSignal;
  /** Polling backends: how often to list (ms). @default 1000 */
  readonly everyMs?: number;
}

/** One change `locker.watch()` yields. */
export interface WatchEvent {
  /**
   * `acquired` a hold appeared; `released` it ended before its lease end; `expired` it
   * ended at or after its lease end; `lost` it was ended by someone else (notifying
   * backends only); `waiting` a waiter joined a queue; `abandoned` a waiter left without
   * holding (timeout, abort, crash).
   */
  readonly type: WatchChangeType;
  readonly lockId: string;
  readonly kind: LockKind;
  readonly ownerId: string;
  /** The holder's or waiter's identity, when stored. */
  readonly identity?: Identity;
  /** The hold's fencing token (hold changes only). */
  readonly token?: bigint;
  /** When it happened or was seen, ms since the epoch. */
  readonly at: number;
  /** True for the holds and waiters that already existed when the watch began (reported once, first). */
  readonly initial?: boolean;
}

/** Default polling period of the generic watch. */
export const DEFAULT_WATCH_EVERY_MS = 1_000;

type Seen =
  | { readonly hold: true; readonly lockId: string; readonly h: HolderState }
  | { readonly hold: false; readonly lockId: string; readonly w: WaiterState };

/** The changes under `prefix` until `signal` aborts (then the iteration ends without an error). */
export async function* watchLocks(backend: Backend, prefix: string, everyMs: number, signal: AbortSignal): AsyncGenerator<WatchEvent> {
  if (backend.watch) {
    for await (const c of backend.watch({ prefix, signal })) yield decodeChange(c);
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

/** Every hold and waiter under `prefix`, page by page. */
async function snapshot(backend: Backend, prefix: string, signal: AbortSignal): Promise<Map<string, Seen>> {
  const list = backend.list?.bind(backend);
  const seen = new Map<string, Seen>();
  if (!list) return seen;
  let cursor: string | undefined;
  do {
    const page = await list({ prefix, limit: MAX_LIST_LIMIT, cursor, signal });
    for (const s of page.locks) add(seen, s);
    cursor = page.cursor;
  } while (cursor !== undefined && !signal.aborted);
  return seen;
}

function add(seen: Map<string, Seen>, s: LockState): void {
  for (const h of s.holders) seen.set(`h\0${s.lockId}\0${h.ownerId}\0${h.token}`, { hold: true, lockId: s.lockId, h });
  for (const w of s.queue ?? []) seen.set(`w\0${s.lockId}\0${w.ownerId}\0${w.kind}`, { hold: false, lockId: s.lockId, w });
}

/** What changed from `before` to `after` (`before` undefined: everything is initial). */
export function diff(before: Map<string, Seen> | undefined, after: Map<string, Seen>, now: number): WatchEvent[] {
  const out: WatchEvent[] = [];
  const initial = before === undefined ? { initial: true } : {};
  for (const [key, s] of after) {
    if (before?.has(key)) continue;
    out.push(
      s.hold
        ? holdEvent('acquired', s.lockId, s.h, s.h.acquiredAt ?? now, initial)
        : waitEvent('waiting', s.lockId, s.w, s.w.since ?? now, initial),
    );
  }
  if (!before) return out;
  const holding = new Set<string>();
  for (const s of after.values()) if (s.hold) holding.add(`${s.lockId}\0${s.h.ownerId}`);
  for (const [key, s] of before) {
    if (after.has(key)) continue;
    if (s.hold) {
      const ended = s.h.leaseEndsAt !== undefined && s.h.leaseEndsAt <= now;
      out.push(holdEvent(ended ? 'expired' : 'released', s.lockId, s.h, now, {}));
    } else if (!holding.has(`${s.lockId}\0${s.w.ownerId}`)) {
      out.push(waitEvent('abandoned', s.lockId, s.w, now, {}));
    }
  }
  return out;
}

function holdEvent(type: WatchChangeType, lockId: string, h: HolderState, at: number, extra: object): WatchEvent {
  const identity = decodeIdentity(h.identity);
  return { type, lockId, kind: h.kind, ownerId: h.ownerId, ...(identity ? { identity } : {}), token: h.token, at, ...extra };
}

function waitEvent(type: WatchChangeType, lockId: string, w: WaiterState, at: number, extra: object): WatchEvent {
  const identity = decodeIdentity(w.identity);
  return { type, lockId, kind: w.kind, ownerId: w.ownerId, ...(identity ? { identity } : {}), at, ...extra };
}

function decodeChange(c: WatchChange): WatchEvent {
  const { identity, ...rest } = c;
  const who = decodeIdentity(identity);
  return { ...rest, ...(who ? { identity: who } : {}) };
}

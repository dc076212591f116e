/**
 * `locker.watch()` on a backend that is notified of changed locks (`Backend.changes`): list
 * once, then inspect each lock the engine names and report the difference; re-inspect a hold
 * when its lease end passes (an expiry writes nothing an engine could announce); re-list on a
 * resubscription and every {@link RESYNC_MS} as a safety net (docs/observability.md, "Watching").
 */
import type { Backend, LockState } from '../backend.js';
import { diff, snapshot, stateEntries, type Seen, type WatchEvent } from './diff.js';

/** How often a notified watch lists everything again, in case a notification was lost. */
export const RESYNC_MS = 30_000;

/** Notified lock ids between two turns of the watch loop, and a way to wait for them. */
class Inbox {
  readonly ids = new Set<string>();
  resync = false;
  failure: unknown;
  done = false;
  #wake: (() => void) | undefined;

  push(id: string | null): void {
    if (id === null) this.resync = true;
    else this.ids.add(id);
    this.#wake?.();
  }

  end(failure?: unknown): void {
    this.done = true;
    this.failure = failure;
    this.#wake?.();
  }

  /** Resolves when something arrived, the feed ended, `signal` aborted, or `ms` passed. */
  async next(ms: number, signal: AbortSignal): Promise<void> {
    if (this.ids.size > 0 || this.resync || this.done || signal.aborted) return;
    await new Promise<void>((resolve) => {
      const timer = setTimeout(finish, Math.max(0, Math.min(ms, RESYNC_MS)));
      function finish(): void {
        clearTimeout(timer);
        signal.removeEventListener('abort', finish);
        resolve();
      }
      signal.addEventListener('abort', finish, { once: true });
      this.#wake = finish;
    });
    this.#wake = undefined;
  }
}

/** Feed `inbox` from the backend's change stream until it ends or `signal` aborts. */
function pump(changes: AsyncIterable<string | null>, inbox: Inbox, signal: AbortSignal): void {
  void (async () => {
    try {
      for await (const id of changes) inbox.push(id);
      inbox.end();
    } catch (err) {
      inbox.end(signal.aborted ? undefined : err);
    }
  })();
}

/** How long a lock whose lease end passed waits before it is inspected again (a clock apart, a lock delay). */
const RECHECK_MS = 1_000;

/**
 * The locks of `view` whose holds' lease end passed and were not inspected for that in the
 * last {@link RECHECK_MS}, and the delay until the next such moment (Infinity: none).
 */
function leaseEnds(view: ReadonlyMap<string, Seen>, checked: Map<string, number>, now: number): { ms: number; due: string[] } {
  let ms = Infinity;
  const due = new Set<string>();
  for (const s of view.values()) {
    if (!s.hold || s.h.leaseEndsAt === undefined) continue;
    const at = Math.max(s.h.leaseEndsAt, (checked.get(s.lockId) ?? -Infinity) + RECHECK_MS);
    if (at <= now) due.add(s.lockId);
    else ms = Math.min(ms, at - now);
  }
  for (const id of due) checked.set(id, now);
  for (const id of checked.keys()) if (![...view.values()].some((s) => s.lockId === id)) checked.delete(id);
  return { ms, due: [...due] };
}

/** Inspect `ids` and fold them into `view`; returns the changes. */
async function refresh(backend: Backend, ids: Iterable<string>, view: Map<string, Seen>): Promise<WatchEvent[]> {
  const out: WatchEvent[] = [];
  for (const lockId of new Set(ids)) {
    const state: LockState = await backend.inspect(lockId);
    const before = new Map([...view].filter(([, s]) => s.lockId === lockId));
    const after = stateEntries(state);
    out.push(...diff(before, after, Date.now()));
    for (const key of before.keys()) view.delete(key);
    for (const [key, s] of after) view.set(key, s);
  }
  return out;
}

/** The changes under `prefix` by notification, until `signal` aborts. */
export async function* watchNotified(backend: Backend, prefix: string, signal: AbortSignal): AsyncGenerator<WatchEvent> {
  const changes = backend.changes?.({ prefix, signal });
  if (!changes) return;
  const inbox = new Inbox();
  pump(changes, inbox, signal);
  // Changes from the subscription on are reported: wait for it before the first listing. Ids
  // announced before it (a feed of several subscriptions may pass on an event of one already in
  // place) are dropped: the first listing comes after them. Left in the inbox, they would make
  // `next()` return at once and this loop spin on microtasks, starving the very I/O that
  // brings the `null`.
  while (!inbox.resync && !inbox.done && !signal.aborted) {
    inbox.ids.clear();
    await inbox.next(RESYNC_MS, signal);
  }
  const checked = new Map<string, number>();
  let view = new Map<string, Seen>();
  let first = true;
  let lastSync = 0;
  while (!signal.aborted) {
    if (inbox.failure !== undefined) throw inbox.failure;
    if (inbox.done && !first) return;
    const now = Date.now();
    if (first || inbox.resync || now - lastSync >= RESYNC_MS) {
      inbox.resync = false;
      inbox.ids.clear();
      const current = await snapshot(backend, prefix, signal);
      yield* diff(first ? undefined : view, current, Date.now());
      view = current;
      first = false;
      lastSync = Date.now();
    }
    const ends = leaseEnds(view, checked, Date.now());
    const ids = [...inbox.ids, ...ends.due];
    inbox.ids.clear();
    if (ids.length > 0) {
      yield* await refresh(backend, ids, view);
      continue;
    }
    await inbox.next(Math.min(ends.ms + 5, RESYNC_MS - (Date.now() - lastSync)), signal);
  }
}

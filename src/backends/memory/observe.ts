/**
 * What the memory backend shows of its table: the state of one entry (holders with their
 * identity and times, the queue in order) and keyset pages over the table. Times are
 * reported on the epoch clock, converted from the monotonic clock the table runs on.
 * docs/observability.md.
 */
import { performance } from 'node:perf_hooks';
import type { HolderState, LockState, WaiterState } from '../kit.js';
import type { Entry } from './store.js';

/** The state of `e` (or of an id without an entry) as `inspect` and `list` report it. */
export function entryState(lockId: string, e: Entry | undefined, now = performance.now()): LockState {
  if (!e) return { lockId, holders: [], waiters: 0, queue: [] };
  const epoch = Date.now();
  const holders: HolderState[] = e.holders.map((h) => ({
    ownerId: h.ownerId,
    kind: h.kind,
    token: h.token,
    expiresInMs: Math.max(0, Math.round(h.expiresAt - now)),
    count: h.count,
    ...(h.weight === 1 ? {} : { weight: h.weight }),
    identity: h.identity,
    acquiredAt: h.acquiredAt,
    leaseEndsAt: Math.round(epoch + (h.expiresAt - now)),
  }));
  const queue: WaiterState[] = e.queue.map((w) => ({
    ownerId: w.ownerId,
    kind: w.kind,
    fair: w.fair,
    identity: w.identity,
    since: w.since,
  }));
  const last = e.holders.reduce((m, h) => (h.token > m ? h.token : m), 0n);
  return { lockId, holders, waiters: e.queue.length, queue, ...(last > 0n ? { lastToken: last } : {}) };
}

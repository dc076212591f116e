/**
 * What `inspect()` and `list()` show of a state file: its live holders and waiters, with
 * their identities and times on the engine's clock (ms since the epoch). Leases live on
 * the monotonic clock (docs/backends/file.md, "Time"), so each time is converted when it
 * is read, from one pair of clock readings: durations between them stay exact even after a
 * wall-clock step.
 */
import type { HolderState, LockState, WaiterState } from '../../backend.js';
import { monotonicMs, processAlive } from './layout.js';
import { purge, type FileState } from './state.js';

/** The monotonic and the wall clock read together. */
export interface Clocks {
  readonly mono: number;
  readonly epoch: number;
}

/** Both clocks, now. */
export function clocksNow(): Clocks {
  return { mono: monotonicMs(), epoch: Date.now() };
}

/** A monotonic time as ms since the epoch. */
function toEpoch(c: Clocks, at: number): number {
  return Math.round(c.epoch + (at - c.mono));
}

/**
 * The lock as its state shows it at `c` (holders whose lease and lock delay ended, and
 * waiters that stopped attempting or whose process is gone, are left out). Changes `s`.
 */
export function viewOf(s: FileState, c: Clocks): LockState {
  purge(s, c.mono, processAlive);
  const holders = s.holders.map((h): HolderState => ({
    ownerId: h.ownerId,
    kind: h.kind,
    token: h.token,
    expiresInMs: Math.max(0, Math.round(h.expiresAt - c.mono)),
    count: h.count,
    ...(h.weight === undefined ? {} : { weight: h.weight }),
    leaseEndsAt: toEpoch(c, h.expiresAt),
    ...(h.identity === undefined ? {} : { identity: h.identity }),
    ...(h.acquiredAt === undefined ? {} : { acquiredAt: toEpoch(c, h.acquiredAt) }),
  }));
  const queue = s.queue.map((w): WaiterState => ({
    ownerId: w.ownerId,
    kind: w.kind,
    fair: w.fair,
    ...(w.identity === undefined ? {} : { identity: w.identity }),
    ...(w.since === undefined ? {} : { since: toEpoch(c, w.since) }),
  }));
  return { lockId: s.lockId, holders, waiters: queue.length, queue, ...(s.last > 0n ? { lastToken: s.last } : {}) };
}

/**
 * Several semaphore permits at once, and Redlock "slot" semaphores, over the public Locker
 * API. Why the designs are deadlock-free: docs/migrating/redis-semaphore.md, "MultiSemaphore".
 */
import type { Lock as Hold } from '../lock.js';
import type { Locker, Semaphore } from '../locker.js';

/** The wait left to one acquisition. */
export interface Budget {
  readonly waitMs: number;
  /** `performance.now()` deadline. */
  readonly deadline: number;
  readonly signal?: AbortSignal;
}

/** Lease settings of each hold. */
export interface HoldSettings {
  readonly ttlMs: number;
  readonly autoExtend: false;
  readonly owner?: string;
}

/** Longest single notification wait on one slot before the other slots are tried again. */
const SLOT_WAIT_MS = 100;

/** The ms left of `budget`'s wait (0 once its deadline passed). */
export function waitLeft(budget: Budget): number {
  return Math.max(0, Math.ceil(budget.deadline - performance.now()));
}

/**
 * One complete attempt first, then the wait that is left: as in redis-semaphore, a short
 * `acquireTimeout` never cuts the first attempt (a cold connection) short.
 */
export async function firstThenWait<T>(budget: Budget, take: (waitMs: number) => Promise<T | null>): Promise<T | null> {
  const first = await take(0);
  const remaining = waitLeft(budget);
  return first !== null || remaining <= 0 ? first : take(remaining);
}

function withSignal(budget: Budget): { signal?: AbortSignal } {
  return budget.signal ? { signal: budget.signal } : {};
}

/**
 * `n` permits of the semaphore `lockId` (size `limit`), all-or-nothing. One permit is a plain
 * acquisition; so are several on a backend that takes them in one hold (`weightedPermits`:
 * one hold of weight `n`). Elsewhere the acquirer first takes the gate mutex `<lockId>:multi`,
 * so at most one acquirer at a time holds part of a set while it waits for the rest — and
 * every holder it waits for holds without waiting, so it always ends: no cycle, no deadlock.
 */
export async function acquirePermits(
  locker: Locker,
  lockId: string,
  limit: number,
  n: number,
  settings: HoldSettings,
  budget: Budget,
): Promise<Hold[] | null> {
  const semaphore = locker.semaphore(lockId, { permits: limit });
  if (n === 1) {
    const hold = await firstThenWait(budget, (waitMs) => semaphore.tryAcquire({ ...settings, waitMs, ...withSignal(budget) }));
    return hold && [hold];
  }
  if (n > limit) return null;
  if ((await locker.backend()).capabilities.weightedPermits === true) {
    const hold = await firstThenWait(budget, (waitMs) => semaphore.tryAcquire({ ...settings, permits: n, waitMs, ...withSignal(budget) }));
    return hold && [hold];
  }
  return acquireGated(locker, semaphore, lockId, n, settings, budget);
}

/** {@link acquirePermits} of several permits one by one, behind the gate mutex `<lockId>:multi`. */
async function acquireGated(
  locker: Locker,
  semaphore: Semaphore,
  lockId: string,
  n: number,
  settings: HoldSettings,
  budget: Budget,
): Promise<Hold[] | null> {
  const gate = await firstThenWait(budget, (waitMs) =>
    locker.tryLock(`${lockId}:multi`, { ttlMs: settings.ttlMs, waitMs, ...withSignal(budget) }),
  );
  if (gate === null) return null;
  const holds: Hold[] = [];
  // The permits taken first are not renewed by their owner yet: keep them while the rest is awaited.
  const keep = setInterval(
    () => holds.forEach((h) => void h.extend(settings.ttlMs).catch(() => undefined)),
    Math.max(1, Math.floor(settings.ttlMs / 3)),
  );
  keep.unref();
  try {
    for (let i = 0; i < n; i++) {
      const owner = settings.owner === undefined ? {} : { owner: `${settings.owner}:${i}` };
      const hold = await firstThenWait(budget, (waitMs) => semaphore.tryAcquire({ ...settings, ...owner, waitMs, ...withSignal(budget) }));
      if (hold === null) break;
      holds.push(hold);
    }
  } catch (err) {
    await releaseAll(holds);
    throw err;
  } finally {
    clearInterval(keep);
    await gate.release();
  }
  if (holds.length === n) return holds;
  await releaseAll(holds);
  return null;
}

/**
 * One permit of a semaphore made of `limit` slot mutexes `<lockId>:<i>` (for backends with
 * mutexes only): sweep the slots from a random one; when all are taken, wait for a release
 * notification of one slot for a short while, then sweep again, until the budget ends.
 */
export async function acquireSlot(
  locker: Locker,
  lockId: string,
  limit: number,
  settings: HoldSettings,
  budget: Budget,
  retryInterval: number,
): Promise<Hold | null> {
  for (;;) {
    const first = Math.floor(Math.random() * limit);
    for (let k = 0; k < limit; k++) {
      const hold = await locker.tryLock(`${lockId}:${(first + k) % limit}`, { ...settings, waitMs: 0, ...withSignal(budget) });
      if (hold) return hold;
    }
    const remaining = waitLeft(budget);
    if (remaining <= 0) return null;
    const wait = Math.min(remaining, Math.max(retryInterval, SLOT_WAIT_MS));
    const hold = await locker.tryLock(`${lockId}:${first}`, { ...settings, waitMs: wait, ...withSignal(budget) });
    if (hold) return hold;
  }
}

async function releaseAll(holds: readonly Hold[]): Promise<void> {
  await Promise.allSettled(holds.map((h) => h.release()));
}

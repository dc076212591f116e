/**
 * The benchmark matrix every backend is measured with (`locksmith bench --backend URL`, and
 * the per-engine scripts in `bench/` that add their peers): uncontended latency, hand-off
 * latency, one hot lock at several contender counts, many keys, many idle waiters. See
 * docs/benchmarks.md. Figures are for comparison within one run on one machine.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { performance } from 'node:perf_hooks';
import type { Locker } from '../locker.js';
import type { LockerOptions } from '../options.js';
import { jainIndex, longestStreak, percentiles, type Percentiles } from './stats.js';

/** Makes a fresh client of the backend under test. */
export type LockerFactory = (options?: Partial<LockerOptions>) => Locker;

const unique = (label: string): string => `bench:${label}:${Date.now().toString(36)}:${Math.random().toString(36).slice(2, 8)}`;

/** Uncontended acquire+release latency. */
export async function benchUncontended(make: LockerFactory, iterations: number, fair = false): Promise<Percentiles> {
  const locker = make();
  const lockId = unique('unc');
  try {
    const samples: number[] = [];
    for (let i = 0; i < iterations; i++) {
      const t0 = performance.now();
      const lock = await locker.lock(lockId, { fair });
      await lock.release();
      samples.push(performance.now() - t0);
    }
    return percentiles(samples);
  } finally {
    await locker.close();
  }
}

/** Resolve when `locker` announces that it waits for `lockId`. */
function queued(locker: Locker, lockId: string): Promise<void> {
  return new Promise<void>((resolve) => {
    const on = (e: { lockId: string }): void => {
      if (e.lockId !== lockId) return;
      locker.off('waiting', on);
      resolve();
    };
    locker.on('waiting', on);
  });
}

/** Hand-off latency: A holds, B waits (queued), A releases at t0, B holds at t1; t1 − t0. */
export async function benchHandoff(make: LockerFactory, iterations: number, fair = false): Promise<Percentiles> {
  const a = make();
  const b = make();
  const lockId = unique('handoff');
  try {
    const samples: number[] = [];
    for (let i = 0; i < iterations; i++) {
      const held = await a.lock(lockId, { fair });
      const waiting = queued(b, lockId);
      let t1 = 0;
      const next = b.lock(lockId, { fair }).then((l) => {
        t1 = performance.now();
        return l;
      });
      await waiting;
      // Let the waiter settle into its wait (subscribe / watch) before the release.
      await sleep(5);
      const t0 = performance.now();
      await held.release();
      const got = await next;
      samples.push(t1 - t0);
      await got.release();
    }
    return percentiles(samples);
  } finally {
    await Promise.all([a.close(), b.close()]);
  }
}

/** Result of {@link benchHot}. */
export interface HotResult {
  readonly contenders: number;
  readonly ops: number;
  readonly opsPerSec: number;
  readonly jain: number;
  readonly longestStreak: number;
  /** The longest any contender waited for one grant (ms). */
  readonly longestWaitMs: number;
}

/** One hot lock, `contenders` clients looping lock → critical section → release for `durationMs`. */
export async function benchHot(
  make: LockerFactory,
  contenders: number,
  durationMs: number,
  criticalMs: number,
  fair = false,
): Promise<HotResult> {
  const lockers = Array.from({ length: contenders }, () => make());
  const lockId = unique('hot');
  const counts = new Array<number>(contenders).fill(0);
  const sequence: number[] = [];
  let longestWaitMs = 0;
  const t0 = performance.now();
  const stopAt = t0 + durationMs;
  try {
    await Promise.all(
      lockers.map(async (locker, who) => {
        while (performance.now() < stopAt) {
          const asked = performance.now();
          const lock = await locker.tryLock(lockId, { waitMs: Math.max(1, stopAt - asked), fair });
          if (!lock) break;
          longestWaitMs = Math.max(longestWaitMs, performance.now() - asked);
          sequence.push(who);
          counts[who] = (counts[who] ?? 0) + 1;
          if (criticalMs > 0) await sleep(criticalMs);
          await lock.release();
        }
      }),
    );
  } finally {
    await Promise.all(lockers.map((l) => l.close()));
  }
  const elapsed = (performance.now() - t0) / 1000;
  return {
    contenders,
    ops: sequence.length,
    opsPerSec: sequence.length / elapsed,
    jain: jainIndex(counts),
    longestStreak: longestStreak(sequence),
    longestWaitMs,
  };
}

/** Result of {@link benchKeys}. */
export interface KeysResult {
  readonly keys: number;
  /** Distinct locks acquired per second (all held at the end). */
  readonly acquiresPerSec: number;
  /** Releases per second. */
  readonly releasesPerSec: number;
}

/** Acquire `keys` distinct locks from one client (64 in flight), hold them all, release them all. */
export async function benchKeys(make: LockerFactory, keys: number): Promise<KeysResult> {
  const locker = make();
  const base = unique('keys');
  const inFlight = 64;
  try {
    const held: Awaited<ReturnType<Locker['lock']>>[] = [];
    let next = 0;
    const t0 = performance.now();
    await Promise.all(
      Array.from({ length: Math.min(inFlight, keys) }, async () => {
        while (next < keys) {
          const i = next++;
          held.push(await locker.lock(`${base}:${i}`));
        }
      }),
    );
    const t1 = performance.now();
    let r = 0;
    await Promise.all(
      Array.from({ length: Math.min(inFlight, keys) }, async () => {
        while (r < held.length) {
          const lock = held[r++];
          await lock?.release();
        }
      }),
    );
    const t2 = performance.now();
    return { keys, acquiresPerSec: keys / ((t1 - t0) / 1000), releasesPerSec: keys / ((t2 - t1) / 1000) };
  } finally {
    await locker.close();
  }
}

/** Counts something on the server (commands processed, queries…): the per-engine scripts pass one. */
export type ServerProbe = () => Promise<number>;

/** Result of {@link benchWaiters}. */
export interface WaitersResult {
  readonly waiters: number;
  /** Server operations per second while everybody waits and nothing changes (when a probe was given). */
  readonly idleOpsPerSec: number | undefined;
  /** Client heap per waiter (bytes), measured after the waiters settled. */
  readonly heapPerWaiterBytes: number;
  /** Time for all of them to get the lock once, one after the other (ms). */
  readonly drainMs: number;
}

/** `waiters` queued on one held lock (from ⌈waiters/100⌉ clients): idle cost, then the drain. */
export async function benchWaiters(make: LockerFactory, waiters: number, idleMs: number, probe?: ServerProbe): Promise<WaitersResult> {
  const holder = make();
  const clients = Array.from({ length: Math.ceil(waiters / 100) }, () => make());
  const lockId = unique('waiters');
  try {
    const held = await holder.lock(lockId);
    const heapBefore = process.memoryUsage().heapUsed;
    let announced = 0;
    for (const c of clients) c.on('waiting', (e) => void (e.lockId === lockId && (announced += 1)));
    const done = clients.flatMap((c, k) =>
      Array.from({ length: Math.ceil((waiters - k) / clients.length) }, () =>
        c.lock(lockId, { timeoutMs: 600_000 }).then((l) => l.release()),
      ),
    );
    while (announced < waiters) await sleep(20);
    await sleep(Math.min(1_000, idleMs));
    const heapPerWaiterBytes = Math.max(0, (process.memoryUsage().heapUsed - heapBefore) / waiters);
    const before = probe ? await probe() : 0;
    const t0 = performance.now();
    await sleep(idleMs);
    const idleOpsPerSec = probe ? ((await probe()) - before) / ((performance.now() - t0) / 1000) : undefined;
    const drainStart = performance.now();
    await held.release();
    await Promise.all(done);
    return { waiters, idleOpsPerSec, heapPerWaiterBytes, drainMs: performance.now() - drainStart };
  } finally {
    await Promise.all([holder, ...clients].map((l) => l.close()));
  }
}

/**
 * Generic lock benchmarks (SPEC §7) against any backend URL, used by `locksmith bench`.
 * Figures: uncontended acquire+release latency, hand-off latency (holder releases → the
 * waiting client holds), one hot lock with N contenders (ops/s, Jain fairness index over
 * contenders, longest streak of one contender).
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { performance } from 'node:perf_hooks';
import type { Locker } from '../locker.js';
import type { LockerOptions } from '../options.js';

/** p50/p99 etc. of a sample, in ms. */
export interface Percentiles {
  readonly n: number;
  readonly p50: number;
  readonly p99: number;
  readonly mean: number;
}

/** Percentiles of `samples` (ms). */
export function percentiles(samples: readonly number[]): Percentiles {
  const s = [...samples].sort((a, b) => a - b);
  const at = (q: number): number => s[Math.min(s.length - 1, Math.max(0, Math.ceil(q * s.length) - 1))] ?? Number.NaN;
  const mean = s.reduce((a, b) => a + b, 0) / (s.length || 1);
  return { n: s.length, p50: at(0.5), p99: at(0.99), mean };
}

/** Jain's fairness index of per-contender counts: 1 = perfectly even, 1/n = one took all. */
export function jainIndex(counts: readonly number[]): number {
  const sum = counts.reduce((a, b) => a + b, 0);
  const sq = counts.reduce((a, b) => a + b * b, 0);
  return sq === 0 ? 1 : (sum * sum) / (counts.length * sq);
}

/** Longest run of consecutive grants to the same contender in a grant sequence. */
export function longestStreak(sequence: readonly number[]): number {
  let best = 0;
  let run = 0;
  let prev: number | undefined;
  for (const who of sequence) {
    run = who === prev ? run + 1 : 1;
    prev = who;
    best = Math.max(best, run);
  }
  return best;
}

/** Makes a fresh client of the backend under test. */
export type LockerFactory = (options?: Partial<LockerOptions>) => Locker;

/** Uncontended acquire+release latency. */
export async function benchUncontended(make: LockerFactory, iterations: number, lockId = `bench:unc:${Date.now()}`): Promise<Percentiles> {
  const locker = make();
  try {
    const samples: number[] = [];
    for (let i = 0; i < iterations; i++) {
      const t0 = performance.now();
      const lock = await locker.lock(lockId);
      await lock.release();
      samples.push(performance.now() - t0);
    }
    return percentiles(samples);
  } finally {
    await locker.close();
  }
}

/**
 * Hand-off latency: A holds, B waits (queued), A releases at t0, B holds at t1; t1 − t0.
 */
export async function benchHandoff(
  make: LockerFactory,
  iterations: number,
  fair = false,
  lockId = `bench:handoff:${Date.now()}`,
): Promise<Percentiles> {
  const a = make();
  const b = make();
  try {
    const samples: number[] = [];
    for (let i = 0; i < iterations; i++) {
      const held = await a.lock(lockId, { fair });
      const queued = new Promise<void>((resolve) => {
        const on = (e: { lockId: string }): void => {
          if (e.lockId !== lockId) return;
          b.off('waiting', on);
          resolve();
        };
        b.on('waiting', on);
      });
      let t1 = 0;
      const next = b.lock(lockId, { fair }).then((l) => {
        t1 = performance.now();
        return l;
      });
      await queued;
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
}

/** One hot lock, `contenders` clients looping lock → critical section → release for `durationMs`. */
export async function benchHot(
  make: LockerFactory,
  contenders: number,
  durationMs: number,
  criticalMs: number,
  fair = false,
  lockId = `bench:hot:${Date.now()}`,
): Promise<HotResult> {
  const lockers = Array.from({ length: contenders }, () => make());
  const counts = new Array<number>(contenders).fill(0);
  const sequence: number[] = [];
  const stopAt = performance.now() + durationMs;
  const t0 = performance.now();
  try {
    await Promise.all(
      lockers.map(async (locker, who) => {
        while (performance.now() < stopAt) {
          const lock = await locker.tryLock(lockId, { waitMs: Math.max(1, stopAt - performance.now()), fair });
          if (!lock) break;
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
  };
}

/**
 * The benchmark matrix every backend is measured with (`locksmith bench --backend URL`, and
 * the per-engine scripts in `bench/` that add their peers): uncontended latency, hand-off
 * latency, one hot lock at several contender counts, many keys, many idle waiters. Each row
 * runs over a {@link Contender}, so locksmith and its peers are measured by the same code in
 * the same run. See docs/benchmarks.md. Figures are for comparison within one run.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { performance } from 'node:perf_hooks';
import { setMaxListeners } from 'node:events';
import { contenderOf, type BenchClient, type BenchHold, type BenchSource, type Contender } from './client.js';
import { jainIndex, longestStreak, percentiles, type Percentiles } from './stats.js';

const unique = (label: string): string => `bench:${label}:${Date.now().toString(36)}:${Math.random().toString(36).slice(2, 8)}`;

/** Open clients, warm each (connections, scripts, sessions) on a lock of its own. */
async function warmClients(c: Contender, n: number): Promise<BenchClient[]> {
  const clients = await Promise.all(Array.from({ length: n }, () => c.client()));
  const warm = unique('warm');
  await Promise.all(clients.map(async (client, i) => void (await (await client.acquire(`${warm}:${i}`)).release())));
  return clients;
}

const closeAll = (clients: readonly BenchClient[]): Promise<unknown> => Promise.allSettled(clients.map((c) => c.close()));

/**
 * Unmeasured cycles before the uncontended samples: up to this many, or this long, whichever
 * ends first (and at least `iterations / 10`, at most 50). A library is used warm in a
 * long-running process; a few dozen cycles leave the JIT half done, and the figure would
 * then say more about code size than about the cost of a lock.
 */
const STEADY = { cycles: 1_000, ms: 1_000 };

/** Uncontended acquire+release latency in the steady state (after the unmeasured cycles of {@link STEADY}). */
export async function benchUncontended(source: BenchSource, iterations: number, fair = false): Promise<Percentiles> {
  const [client] = await warmClients(contenderOf(source, fair), 1);
  if (!client) throw new Error('no client');
  const lockId = unique('unc');
  try {
    const minimum = Math.min(50, Math.floor(iterations / 10));
    const warmEnd = performance.now() + STEADY.ms;
    for (let i = 0; i < STEADY.cycles && (i < minimum || performance.now() < warmEnd); i++) {
      await (await client.acquire(lockId)).release();
    }
    const samples: number[] = [];
    for (let i = 0; i < iterations; i++) {
      const t0 = performance.now();
      await (await client.acquire(lockId)).release();
      samples.push(performance.now() - t0);
    }
    return percentiles(samples);
  } finally {
    await client.close();
  }
}

/** Hand-off settings (the row's defaults fit every library measured so far). */
export interface HandoffOptions {
  /** After the waiter reported it queued, wait this long before the release (ms). @default 5 */
  readonly settleMs?: number;
  /** For a contender that cannot report queueing: the waiter is assumed queued after this (ms). @default 30 */
  readonly unreportedSettleMs?: number;
  /**
   * ...plus a random delay up to this (ms), drawn per sample. A waiter that polls (every 10 ms
   * for redis-semaphore) would otherwise always be released at the same phase of its poll —
   * right before a retry when the settle is a multiple of the poll — and its figure would
   * measure that alignment, not the library. @default 20
   */
  readonly unreportedJitterMs?: number;
  /** Stop sampling after this long (a polling peer takes ~0.2 s per sample) (ms). @default 30000 */
  readonly budgetMs?: number;
}

/** Result of {@link benchHandoff}: the latencies and how the waiter was known to be queued. */
export interface HandoffResult extends Percentiles {
  /** `event`: the client reported it; `delay`: assumed after `settleMs`. */
  readonly queuedBy: 'event' | 'delay';
  /** The delay between "queued" and the release (ms). */
  readonly settleMs: number;
  /** Plus a random delay up to this (ms); 0 when the waiter reported queueing. */
  readonly jitterMs: number;
}

/** Hand-off latency: A holds, B waits (queued), A releases at t0, B holds at t1; t1 − t0. */
export async function benchHandoff(source: BenchSource, iterations: number, fair = false, o: HandoffOptions = {}): Promise<HandoffResult> {
  const c = contenderOf(source, fair);
  const [a, b] = await warmClients(c, 2);
  if (!a || !b) throw new Error('no client');
  const lockId = unique('handoff');
  const settleMs = c.reportsQueued ? (o.settleMs ?? 5) : (o.unreportedSettleMs ?? 30);
  const jitterMs = c.reportsQueued ? 0 : (o.unreportedJitterMs ?? 20);
  const stopAt = performance.now() + (o.budgetMs ?? 30_000);
  try {
    const samples: number[] = [];
    for (let i = 0; i < iterations && (i === 0 || performance.now() < stopAt); i++) {
      const held = await a.acquire(lockId);
      let t1 = 0;
      let onQueued: () => void = () => undefined;
      const queued = new Promise<void>((resolve) => (onQueued = resolve));
      const next = b.acquire(lockId, c.reportsQueued ? { onQueued } : {}).then((h) => {
        t1 = performance.now();
        return h;
      });
      // (A grant without a queued report would be a broken lock: do not hang on it.)
      if (c.reportsQueued) await Promise.race([queued, next]);
      // Let the waiter settle into its wait (subscribe / watch / sleep between polls).
      await sleep(settleMs + Math.random() * jitterMs);
      const t0 = performance.now();
      await held.release();
      const got = await next;
      samples.push(t1 - t0);
      await got.release();
    }
    return { ...percentiles(samples), queuedBy: c.reportsQueued ? 'event' : 'delay', settleMs, jitterMs };
  } finally {
    await closeAll([a, b]);
  }
}

/** Result of {@link benchHot}. */
export interface HotResult {
  readonly contenders: number;
  /** Grants within the row's duration. */
  readonly ops: number;
  readonly opsPerSec: number;
  readonly jain: number;
  readonly longestStreak: number;
  /** The longest any contender waited for one grant within the row (ms; a wait still open at the end counts up to the end). */
  readonly longestWaitMs: number;
  /** Grants that began while another client held the lock (0 for a correct lock). */
  readonly overlaps: number;
}

/** One hot lock, `contenders` clients looping lock → critical section → release for `durationMs`. */
export async function benchHot(
  source: BenchSource,
  contenders: number,
  durationMs: number,
  criticalMs: number,
  fair = false,
): Promise<HotResult> {
  const clients = await warmClients(contenderOf(source, fair), contenders);
  const lockId = unique('hot');
  const counts = new Array<number>(contenders).fill(0);
  const sequence: number[] = [];
  const stop = new AbortController();
  setMaxListeners(contenders + 10, stop.signal);
  let longestWaitMs = 0;
  let inside = 0;
  let overlaps = 0;
  const t0 = performance.now();
  const stopAt = t0 + durationMs;
  const timer = setTimeout(() => stop.abort(new Error('row over')), durationMs);
  const loop = async (client: BenchClient, who: number): Promise<void> => {
    while (performance.now() < stopAt) {
      const asked = performance.now();
      let hold: BenchHold;
      try {
        hold = await client.acquire(lockId, { signal: stop.signal });
      } catch (err) {
        if (!stop.signal.aborted) throw err;
        // Still waiting when the row ended: a starved contender's wait counts too.
        longestWaitMs = Math.max(longestWaitMs, stopAt - asked);
        return;
      }
      const got = performance.now();
      if (++inside > 1) overlaps += 1;
      longestWaitMs = Math.max(longestWaitMs, Math.min(got, stopAt) - asked);
      if (got <= stopAt) {
        sequence.push(who);
        counts[who] = (counts[who] ?? 0) + 1;
      }
      if (criticalMs > 0) await sleep(criticalMs);
      inside -= 1;
      await hold.release();
    }
  };
  try {
    await Promise.all(clients.map(loop));
  } finally {
    clearTimeout(timer);
    await closeAll(clients);
  }
  return {
    contenders,
    ops: sequence.length,
    opsPerSec: sequence.length / (durationMs / 1000),
    jain: jainIndex(counts),
    longestStreak: longestStreak(sequence),
    longestWaitMs,
    overlaps,
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

/** Run `work(i)` for i in [0, n) with `width` in flight. */
async function inFlight(n: number, width: number, work: (i: number) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(width, n) }, async () => {
      while (next < n) await work(next++);
    }),
  );
}

/** Acquire `keys` distinct locks from one client (64 in flight), hold them all, release them all. */
export async function benchKeys(source: BenchSource, keys: number, fair = false): Promise<KeysResult> {
  const [client] = await warmClients(contenderOf(source, fair), 1);
  if (!client) throw new Error('no client');
  const base = unique('keys');
  try {
    const held: BenchHold[] = [];
    const t0 = performance.now();
    await inFlight(keys, 64, async (i) => void held.push(await client.acquire(`${base}:${i}`)));
    const t1 = performance.now();
    await inFlight(held.length, 64, async (i) => held[i]?.release());
    const t2 = performance.now();
    return { keys, acquiresPerSec: keys / ((t1 - t0) / 1000), releasesPerSec: keys / ((t2 - t1) / 1000) };
  } finally {
    await client.close();
  }
}

export { benchWaiters, type ServerProbe, type WaitersOptions, type WaitersResult } from './waiters.js';

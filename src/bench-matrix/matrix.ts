/**
 * The benchmark matrix every backend is measured with (`locksmith bench --backend URL`, and
 * the per-engine scripts in `bench/` that add their peers): one hot lock at several contender
 * counts, many keys, many idle waiters (the latency rows, uncontended and hand-off, are in
 * latency.ts). Each row
 * runs over a {@link Contender}, so locksmith and its peers are measured by the same code in
 * the same run. See docs/benchmarks.md. Figures are for comparison within one run.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { performance } from 'node:perf_hooks';
import { setMaxListeners } from 'node:events';
import { contenderOf, type BenchClient, type BenchHold, type BenchSource, type Contender } from './client.js';
import { jainIndex, longestStreak } from './stats.js';

const unique = (label: string): string => `bench:${label}:${Date.now().toString(36)}:${Math.random().toString(36).slice(2, 8)}`;

/** Open clients, warm each (connections, scripts, sessions) on a lock of its own. */
async function warmClients(c: Contender, n: number): Promise<BenchClient[]> {
  const clients = await Promise.all(Array.from({ length: n }, () => c.client()));
  const warm = unique('warm');
  await Promise.all(clients.map(async (client, i) => void (await (await client.acquire(`${warm}:${i}`)).release())));
  return clients;
}

const closeAll = (clients: readonly BenchClient[]): Promise<unknown> => Promise.allSettled(clients.map((c) => c.close()));

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

/** What one slice of a hot-lock row counted, before it is summed into a {@link HotResult}. */
export interface HotSlice {
  /** Grants per client (index = the client's place in the list). */
  readonly counts: readonly number[];
  readonly ops: number;
  readonly longestStreak: number;
  readonly longestWaitMs: number;
  readonly overlaps: number;
}

/** `clients` loop lock → critical section → release on `lockId` for `durationMs`. */
export async function hotSlice(clients: readonly BenchClient[], lockId: string, durationMs: number, criticalMs: number): Promise<HotSlice> {
  const counts = new Array<number>(clients.length).fill(0);
  const sequence: number[] = [];
  const stop = new AbortController();
  setMaxListeners(clients.length + 10, stop.signal);
  let longestWaitMs = 0;
  let inside = 0;
  let overlaps = 0;
  const stopAt = performance.now() + durationMs;
  const timer = setTimeout(() => stop.abort(new Error('row over')), durationMs);
  const loop = async (client: BenchClient, who: number): Promise<void> => {
    while (performance.now() < stopAt) {
      const asked = performance.now();
      let hold: BenchHold;
      try {
        hold = await client.acquire(lockId, { signal: stop.signal });
      } catch (err) {
        if (!stop.signal.aborted) throw err;
        // Still waiting when the slice ended: a starved contender's wait counts too.
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
  }
  return { counts, ops: sequence.length, longestStreak: longestStreak(sequence), longestWaitMs, overlaps };
}

/** Sum the slices of one contender's row (same clients in every slice) into its result. */
export function sumSlices(contenders: number, slices: readonly HotSlice[], durationMs: number): HotResult {
  const counts = new Array<number>(contenders).fill(0);
  for (const s of slices) s.counts.forEach((n, i) => (counts[i] = (counts[i] ?? 0) + n));
  const ops = slices.reduce((a, s) => a + s.ops, 0);
  return {
    contenders,
    ops,
    opsPerSec: ops / (durationMs / 1000),
    jain: jainIndex(counts),
    longestStreak: Math.max(0, ...slices.map((s) => s.longestStreak)),
    longestWaitMs: Math.max(0, ...slices.map((s) => s.longestWaitMs)),
    overlaps: slices.reduce((a, s) => a + s.overlaps, 0),
  };
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
  try {
    return sumSlices(contenders, [await hotSlice(clients, unique('hot'), durationMs, criticalMs)], durationMs);
  } finally {
    await closeAll(clients);
  }
}

/**
 * The hot-lock row of several libraries in alternating rounds (docs/benchmarks.md, "What each
 * row measures"): every library's clients are opened and warmed first, then each round gives
 * each library a slice of `durationMs / rounds` on its own lock, the order rotated every
 * round, so that a change in the machine's load hits every library alike. Streak and longest
 * wait are the worst slice's (a wait is cut at its slice's end); Jain is over the summed counts.
 */
export async function benchHotRounds(
  sources: readonly Contender[],
  contenders: number,
  durationMs: number,
  criticalMs: number,
  rounds: number,
): Promise<Map<string, HotResult>> {
  const n = Math.max(1, Math.floor(rounds));
  const opened: BenchClient[][] = [];
  try {
    for (const c of sources) opened.push(await warmClients(c, contenders));
    const slices = sources.map((): HotSlice[] => []);
    const ids = sources.map(() => unique('hot'));
    for (let r = 0; r < n; r++) {
      for (let j = 0; j < sources.length; j++) {
        const i = (j + r) % sources.length;
        const clients = opened[i];
        if (clients) slices[i]?.push(await hotSlice(clients, ids[i] ?? unique('hot'), durationMs / n, criticalMs));
      }
    }
    return new Map(sources.map((c, i) => [c.name, sumSlices(contenders, slices[i] ?? [], durationMs)]));
  } finally {
    await Promise.allSettled(opened.map(closeAll));
  }
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

export { benchHandoff, benchLatencies, benchUncontended, type HandoffOptions, type HandoffResult } from './latency.js';
export { benchWaiters, type ServerProbe, type WaitersOptions, type WaitersResult } from './waiters.js';

/**
 * `npm run bench:cassandra` — seed 000's claim made measurable: the fair queue lock keeps
 * its throughput as contenders grow, the old shadow-table lock does not.
 *
 * One hot lockId, 2 / 8 / 32 contenders (each its own locker, i.e. its own connections, as
 * separate processes would be), a 10 ms critical section, both algorithms, on one real
 * Cassandra node started by the harness. Per run: acquisitions/s, Jain fairness index over
 * the per-contender counts, the longest streak of one contender, and (the seed authors'
 * best metric) the share of wall time with more than one holder (overlap), exactly one
 * (owning), and none while someone waits (fighting); the median and longest wait of one
 * acquisition.
 *
 * Environment: BENCH_SECONDS (default 15 per run), BENCH_CONTENDERS (default "2,8,32").
 */
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { cpus, totalmem } from 'node:os';
import { createLocker, type Locker } from '../src/index.js';
import { startCassandra } from '../scripts/servers/cassandra.js';
import { jainIndex, longestStreak } from '../src/cli/bench.js';

interface RunResult {
  readonly algorithm: string;
  readonly contenders: number;
  readonly acquisitions: number;
  readonly perSecond: number;
  readonly jain: number;
  readonly longestStreak: number;
  readonly overlap: number;
  readonly owning: number;
  readonly fighting: number;
  /** Median and longest time one contender waited for one acquisition, ms. */
  readonly waitP50: number;
  readonly waitMax: number;
}

interface Interval {
  readonly who: number;
  readonly start: number;
  readonly end: number;
}

/** Sweep the holding and waiting intervals: time with >1 holder, exactly 1, 0 while some wait. */
function shares(holds: readonly Interval[], waits: readonly Interval[], from: number, to: number) {
  type Ev = { t: number; dh: number; dw: number };
  const ev: Ev[] = [];
  for (const h of holds) ev.push({ t: h.start, dh: 1, dw: 0 }, { t: h.end, dh: -1, dw: 0 });
  for (const w of waits) ev.push({ t: w.start, dh: 0, dw: 1 }, { t: w.end, dh: 0, dw: -1 });
  // At equal times close before open, so back-to-back intervals do not count as overlap.
  ev.sort((a, b) => a.t - b.t || a.dh + a.dw - (b.dh + b.dw));
  let holders = 0;
  let waiting = 0;
  let prev = from;
  let overlap = 0;
  let owning = 0;
  let fighting = 0;
  for (const e of ev) {
    const t = Math.min(Math.max(e.t, from), to);
    const dt = t - prev;
    if (dt > 0) {
      if (holders > 1) overlap += dt;
      else if (holders === 1) owning += dt;
      else if (waiting > 0) fighting += dt;
    }
    prev = t;
    holders += e.dh;
    waiting += e.dw;
  }
  const total = to - from;
  return { overlap: overlap / total, owning: owning / total, fighting: fighting / total };
}

async function run(baseUrl: string, algorithm: 'fair' | 'shadow', contenders: number, seconds: number): Promise<RunResult> {
  const lockId = `bench-${algorithm}-${contenders}-${Date.now()}`;
  const lockers: Locker[] = Array.from({ length: contenders }, () =>
    createLocker(`${baseUrl}?create=true&algorithm=${algorithm}`, { ttlMs: 5_000 }),
  );
  // Connect every client before the clock starts.
  await Promise.all(lockers.map((l) => l.inspect(lockId)));
  const holds: Interval[] = [];
  const waits: Interval[] = [];
  const order: number[] = [];
  const counts = new Array<number>(contenders).fill(0);
  const start = performance.now();
  const stopAt = start + seconds * 1000;
  await Promise.all(
    lockers.map(async (l, who) => {
      while (performance.now() < stopAt) {
        const askedAt = performance.now();
        const lock = await l.lock(lockId, { fair: algorithm === 'fair', timeoutMs: 120_000 });
        const got = performance.now();
        waits.push({ who, start: askedAt, end: got });
        order.push(who);
        counts[who]! += 1;
        await sleep(10);
        const end = performance.now();
        holds.push({ who, start: got, end });
        await lock.release();
      }
    }),
  );
  const end = performance.now();
  await Promise.allSettled(lockers.map((l) => l.close()));
  const s = shares(holds, waits, start, Math.min(end, stopAt));
  const waited = waits.map((w) => w.end - w.start).sort((a, b) => a - b);
  return {
    algorithm,
    contenders,
    acquisitions: order.length,
    perSecond: order.length / ((end - start) / 1000),
    jain: jainIndex(counts),
    longestStreak: longestStreak(order),
    ...s,
    waitP50: waited[Math.floor(waited.length / 2)] ?? 0,
    waitMax: waited[waited.length - 1] ?? 0,
  };
}

const pct = (x: number): string => `${(x * 100).toFixed(1)} %`;

async function main(): Promise<void> {
  const seconds = Number(process.env.BENCH_SECONDS ?? '15');
  const sizes = (process.env.BENCH_CONTENDERS ?? '2,8,32').split(',').map(Number);
  const server = await startCassandra({ nodes: 1 });
  const results: RunResult[] = [];
  try {
    // A short warm-up so the JIT and the schema do not count against the first run.
    await run(server.url, 'fair', 2, 3);
    for (const algorithm of ['fair', 'shadow'] as const) {
      for (const n of sizes) {
        const r = await run(server.url, algorithm, n, seconds);
        results.push(r);
        console.error(`${algorithm} ×${n}: ${r.perSecond.toFixed(1)}/s`);
      }
    }
  } finally {
    await server.stop();
  }
  const get = (a: string, n: number): RunResult | undefined => results.find((r) => r.algorithm === a && r.contenders === n);
  console.log(`\nCassandra 5.0 (1 node, QUORUM), one hot lockId, 10 ms critical section, ${seconds} s per run`);
  console.log(
    `machine: ${cpus().length} × ${cpus()[0]?.model ?? '?'}, ${(totalmem() / 2 ** 30).toFixed(0)} GiB, node ${process.version}\n`,
  );
  console.log(
    '| algorithm | contenders | acquisitions/s | Jain | longest streak | overlap | one owner | none while waiting | wait p50 | wait max |',
  );
  console.log('|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|');
  for (const r of results) {
    console.log(
      `| ${r.algorithm} | ${r.contenders} | ${r.perSecond.toFixed(1)} | ${r.jain.toFixed(3)} | ${r.longestStreak} | ${pct(r.overlap)} | ${pct(r.owning)} | ${pct(r.fighting)} | ${r.waitP50.toFixed(0)} ms | ${r.waitMax.toFixed(0)} ms |`,
    );
  }
  const hi = Math.max(...sizes);
  const lo = Math.min(...sizes);
  const f2 = get('fair', lo);
  const f32 = get('fair', hi);
  const s32 = get('shadow', hi);
  if (f2 && f32 && s32) {
    console.log(`\nfair ×${hi} / fair ×${lo} throughput: ${(f32.perSecond / f2.perSecond).toFixed(2)} (target ≥ 0.7)`);
    console.log(`fair ×${hi} / shadow ×${hi} throughput: ${(f32.perSecond / Math.max(s32.perSecond, 1e-9)).toFixed(2)} (target ≥ 5)`);
    console.log(`fair ×${hi} Jain: ${f32.jain.toFixed(3)} (target ≥ 0.99); overlap ${pct(f32.overlap)} (target 0)`);
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exitCode = 1;
});

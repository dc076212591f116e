/**
 * `npm run bench:redlock` — locksmith's Redlock backend on 5 independent redis-servers next to
 * node-redlock on the same 5, and locksmith's single-node Redis backend (on the first of them)
 * for the ratio, in one run. Figures per library: uncontended acquire+release (p50/p99, the
 * libraries in alternating rounds, next to a bare 5-master fan-out without any library),
 * hand-off (release → the waiting client holds, p50/p99), one hot lock with 16 contenders
 * (each its own connections) and a 2 ms critical section: ops/s, Jain fairness, longest streak.
 *
 * Prints a table, the ratios the targets are about, and one JSON line per library.
 * Environment knobs: BENCH_HOT_SECONDS (default 10), BENCH_UNCONTENDED (2000),
 * BENCH_HANDOFFS (200), BENCH_ONLY (run only the libraries whose name contains it),
 * BENCH_REDLOCK_QUERY (URL parameters for locksmith's redlock, e.g. `retryJitterMs=20`).
 * `BEFORE=<another checkout>` adds locksmith's redlock on that checkout's code (its
 * `src/index.ts`), in the same alternating rounds, for a before/after in one run.
 */
import { cpus } from 'node:os';
import { performance } from 'node:perf_hooks';
import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import Redlock from 'redlock';
import { createLocker, type Locker } from '../src/index.js';
import { startRedlock } from '../scripts/servers/redlock.js';
import { jainIndex, longestStreak } from '../src/bench-matrix/index.js';

const HOT_SECONDS = Number(process.env.BENCH_HOT_SECONDS ?? 10);
const UNCONTENDED = Number(process.env.BENCH_UNCONTENDED ?? 2_000);
const HANDOFFS = Number(process.env.BENCH_HANDOFFS ?? 200);
/** A library gets at most this long for its hand-off samples (node-redlock needs ~0.2 s each). */
const HANDOFF_BUDGET_MS = 40_000;
const TTL_MS = 10_000;
const CONTENDERS = 16;
const CRITICAL_MS = 2;
const FLOOR = 'bare fan-out, no library (5 masters)';

type MakeLocker = typeof createLocker;
/** `BEFORE=<another checkout>`: locksmith's redlock on that checkout's code too. */
const before = process.env.BEFORE;
const beforeLocker: MakeLocker | undefined = before
  ? ((await import(`${before}/src/index.ts`)) as { createLocker: MakeLocker }).createLocker
  : undefined;

/** A held lock of any library. */
interface Held {
  release(): Promise<void>;
}

/** One independent client (own connections) of a library. */
interface Client {
  acquire(key: string, signal?: AbortSignal): Promise<Held>;
  close(): Promise<void>;
}

interface Library {
  readonly name: string;
  client(): Promise<Client>;
}

function ioredis(host: string, port: number): Redis {
  const r = new Redis({ host, port, maxRetriesPerRequest: 1 });
  r.on('error', () => undefined);
  return r;
}

function locksmith(name: string, url: string, make: MakeLocker = createLocker): Library {
  return {
    name,
    async client() {
      const locker: Locker = make(url, { ttlMs: TTL_MS });
      await locker.backend();
      return {
        async acquire(key, signal) {
          const lock = await locker.lock(key, signal ? { signal } : {});
          return { release: async () => void (await lock.release()) };
        },
        close: () => locker.close(),
      };
    },
  };
}

function nodeRedlock(nodes: readonly { host: string; port: number }[]): Library {
  return {
    name: `node-redlock (${nodes.length} masters)`,
    async client() {
      const clients = nodes.map((n) => ioredis(n.host, n.port));
      // Defaults of the library (retryDelay 200 ms, jitter 200 ms), but wait without a retry limit.
      const rl = new Redlock(clients, { retryCount: -1 });
      rl.on('error', () => undefined);
      return {
        async acquire(key) {
          const lock = await rl.acquire([key], TTL_MS);
          return { release: async () => void (await rl.release(lock, { retryCount: 0 })) };
        },
        async close() {
          for (const c of clients) c.disconnect();
        },
      };
    },
  };
}

function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return NaN;
  const i = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[i] ?? NaN;
}

function stats(samples: number[]): { p50: number; p99: number; n: number } {
  const s = [...samples].sort((a, b) => a - b);
  return { p50: percentile(s, 50), p99: percentile(s, 99), n: s.length };
}

const key = (lib: string, what: string): string => `bench:${lib.replace(/\W+/g, '-')}:${what}:${randomBytes(4).toString('hex')}`;

/**
 * Uncontended acquire+release of every library, in alternating rounds (so a change in the
 * machine's load hits all of them alike), each after its own warm-up. The bare fan-out is
 * the floor of any 5-master client on this machine: `SET NX PX` then `DEL` sent to all five
 * masters at once, no script, no token, no library.
 */
async function uncontendedAll(
  libs: readonly Library[],
  masters: readonly { host: string; port: number }[],
): Promise<Map<string, ReturnType<typeof stats>>> {
  // The issue's method: 200 cycles per library per round, ten rounds, the order reversed
  // every other round so that no library always follows the same one.
  const rounds = 10;
  const cycles: { name: string; cycle: () => Promise<void>; close: () => Promise<void> }[] = [];
  for (const lib of libs) {
    const c = await lib.client();
    const k = key(lib.name, 'uncontended');
    cycles.push({ name: lib.name, cycle: async () => (await c.acquire(k)).release(), close: () => c.close() });
  }
  const bare = masters.map((m) => ioredis(m.host, m.port));
  const bk = key('bare', 'uncontended');
  cycles.push({
    name: FLOOR,
    cycle: async () => {
      await Promise.all(bare.map((r) => r.set(bk, 'x', 'PX', TTL_MS, 'NX')));
      await Promise.all(bare.map((r) => r.del(bk)));
    },
    close: async () => bare.forEach((r) => r.disconnect()),
  });
  const samples = new Map<string, number[]>(cycles.map((c) => [c.name, []]));
  try {
    for (const c of cycles) for (let i = 0; i < 500; i++) await c.cycle();
    for (let r = 0; r < rounds; r++) {
      for (const c of r % 2 === 0 ? cycles : [...cycles].reverse()) {
        const out = samples.get(c.name) ?? [];
        for (let i = 0; i < UNCONTENDED / rounds; i++) {
          const t0 = performance.now();
          await c.cycle();
          out.push(performance.now() - t0);
        }
      }
    }
  } finally {
    for (const c of cycles) await c.close();
  }
  return new Map([...samples].map(([name, s]) => [name, stats(s)]));
}

async function handoff(lib: Library): Promise<{ p50: number; p99: number; n: number }> {
  const a = await lib.client();
  const b = await lib.client();
  const k = key(lib.name, 'handoff');
  const samples: number[] = [];
  const started = performance.now();
  try {
    // Warm-up (connections, script cache, subscriptions).
    for (let i = 0; i < 5; i++) await (await a.acquire(k)).release();
    for (let i = 0; i < HANDOFFS && performance.now() - started < HANDOFF_BUDGET_MS; i++) {
      const held = await a.acquire(k);
      let heldAt = 0;
      const waiting = b.acquire(k).then((h) => {
        heldAt = performance.now();
        return h;
      });
      // Let the waiter go to sleep (subscribed / between retries) before the release.
      await sleep(30);
      const t0 = performance.now();
      await held.release();
      const got = await waiting;
      samples.push(heldAt - t0);
      await got.release();
    }
    return stats(samples);
  } finally {
    await a.close();
    await b.close();
  }
}

async function hot(lib: Library): Promise<{ opsPerSec: number; jain: number; longestStreak: number; ops: number }> {
  const clients = await Promise.all(Array.from({ length: CONTENDERS }, () => lib.client()));
  const k = key(lib.name, 'hot');
  const counts = new Array<number>(CONTENDERS).fill(0);
  const order: number[] = [];
  let inside = 0;
  let violations = 0;
  // Warm every client (connections, script cache) before the clock starts.
  for (const c of clients) await (await c.acquire(k)).release();
  const start = performance.now();
  const deadline = start + HOT_SECONDS * 1_000;
  try {
    await Promise.all(
      clients.map(async (c, idx) => {
        while (performance.now() < deadline) {
          const held = await c.acquire(k);
          const inTime = performance.now() < deadline;
          inside += 1;
          if (inside > 1) violations += 1;
          await sleep(CRITICAL_MS);
          inside -= 1;
          if (inTime) {
            counts[idx] = (counts[idx] ?? 0) + 1;
            order.push(idx);
          }
          await held.release();
        }
      }),
    );
  } finally {
    await Promise.all(clients.map((c) => c.close()));
  }
  if (violations > 0) console.error(`!! ${lib.name}: ${violations} overlapping holds in the hot-lock run`);
  const ops = order.length;
  return { opsPerSec: ops / HOT_SECONDS, jain: jainIndex(counts), longestStreak: longestStreak(order), ops };
}

const fmt = (n: number, digits = 2): string => (Number.isFinite(n) ? n.toFixed(digits) : 'n/a');

async function main(): Promise<void> {
  const server = await startRedlock({ count: 5 });
  const first = server.nodes[0];
  if (!first) throw new Error('no master started');
  console.log(`machine: ${cpus().length} CPUs, ${cpus()[0]?.model ?? '?'}, node ${process.version}`);
  console.log(`settings: ttl ${TTL_MS} ms, hot lock ${CONTENDERS} contenders × ${HOT_SECONDS} s with a ${CRITICAL_MS} ms critical section`);
  const only = process.env.BENCH_ONLY;
  const redlockUrl = `${server.url}${process.env.BENCH_REDLOCK_QUERY ? `?${process.env.BENCH_REDLOCK_QUERY}` : ''}`;
  const libs = [
    locksmith('locksmith redlock (5 masters)', redlockUrl),
    ...(beforeLocker ? [locksmith('locksmith redlock (5 masters, BEFORE)', redlockUrl, beforeLocker)] : []),
    locksmith('locksmith redis (1 node)', `redis://${first.host}:${first.port}`),
    nodeRedlock(server.nodes),
  ].filter((l) => only === undefined || l.name.includes(only));
  const rows: Record<string, number | string>[] = [];
  try {
    process.stderr.write('uncontended, alternating rounds…\n');
    const u = await uncontendedAll(libs, server.nodes);
    for (const lib of libs) {
      process.stderr.write(`${lib.name}: hand-off… `);
      const h = await handoff(lib);
      process.stderr.write('hot lock…\n');
      const x = await hot(lib);
      rows.push({
        library: lib.name,
        uncontendedP50Ms: u.get(lib.name)?.p50 ?? NaN,
        uncontendedP99Ms: u.get(lib.name)?.p99 ?? NaN,
        handoffP50Ms: h.p50,
        handoffP99Ms: h.p99,
        handoffSamples: h.n,
        hot16OpsPerSec: x.opsPerSec,
        hot16Jain: x.jain,
        hot16LongestStreak: x.longestStreak,
      });
    }
    const f = u.get(FLOOR);
    rows.push({
      library: FLOOR,
      uncontendedP50Ms: f?.p50 ?? NaN,
      uncontendedP99Ms: f?.p99 ?? NaN,
      handoffP50Ms: NaN,
      handoffP99Ms: NaN,
      hot16OpsPerSec: NaN,
      hot16Jain: NaN,
      hot16LongestStreak: '–',
    });
  } finally {
    await server.stop();
  }
  printRows(rows);
}

/** The table, the ratios the docs quote, and one JSON line per library. */
function printRows(rows: Record<string, number | string>[]): void {
  console.log('');
  console.log('| library | uncontended p50 / p99 (ms) | hand-off p50 / p99 (ms) | hot16 ops/s | hot16 Jain | hot16 longest streak |');
  console.log('|---|---|---|---|---|---|');
  const n = (r: Record<string, number | string>, k: string): number => Number(r[k]);
  for (const r of rows) {
    console.log(
      `| ${String(r.library)} | ${fmt(n(r, 'uncontendedP50Ms'), 3)} / ${fmt(n(r, 'uncontendedP99Ms'), 3)} | ${fmt(n(r, 'handoffP50Ms'), 3)} / ${fmt(n(r, 'handoffP99Ms'), 3)} | ${fmt(n(r, 'hot16OpsPerSec'), 0)} | ${fmt(n(r, 'hot16Jain'), 3)} | ${String(r.hot16LongestStreak)} |`,
    );
  }
  const find = (prefix: string): Record<string, number | string> | undefined => rows.find((r) => String(r.library).startsWith(prefix));
  const [rl, single, peer, floor] = [find('locksmith redlock'), find('locksmith redis'), find('node-redlock'), find('bare fan-out')];
  const old = rows.find((r) => String(r.library).endsWith('BEFORE)'));
  console.log('');
  if (rl && single)
    console.log(`uncontended p50, redlock / single-node redis: ${fmt(n(rl, 'uncontendedP50Ms') / n(single, 'uncontendedP50Ms'))}×`);
  if (floor && single)
    console.log(
      `uncontended p50, bare 5-master fan-out / single-node redis: ${fmt(n(floor, 'uncontendedP50Ms') / n(single, 'uncontendedP50Ms'))}× (the floor of any 5-master client here)`,
    );
  if (old && single)
    console.log(`uncontended p50, redlock BEFORE / single-node redis: ${fmt(n(old, 'uncontendedP50Ms') / n(single, 'uncontendedP50Ms'))}×`);
  if (rl && old) console.log(`uncontended p50, redlock / redlock BEFORE: ${fmt(n(rl, 'uncontendedP50Ms') / n(old, 'uncontendedP50Ms'))}×`);
  if (rl && floor)
    console.log(`uncontended p50, redlock / bare fan-out: ${fmt(n(rl, 'uncontendedP50Ms') / n(floor, 'uncontendedP50Ms'))}×`);
  if (rl && peer) console.log(`uncontended p50, redlock / node-redlock: ${fmt(n(rl, 'uncontendedP50Ms') / n(peer, 'uncontendedP50Ms'))}×`);
  if (rl && peer)
    console.log(`hand-off p50, node-redlock / locksmith redlock: ${fmt(n(peer, 'handoffP50Ms') / n(rl, 'handoffP50Ms'), 1)}×`);
  console.log('');
  for (const r of rows) console.log(JSON.stringify(r));
}

main().then(
  // node-redlock's unlimited retries keep timers alive: exit explicitly.
  () => process.exit(0),
  (err: unknown) => {
    console.error(err);
    process.exit(1);
  },
);

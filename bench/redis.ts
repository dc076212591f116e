/**
 * `npm run bench:redis` — locksmith's Redis backend side by side with node-redlock and
 * redis-semaphore on one Redis started by the harness, in one run.
 *
 * Figures per library:
 * - uncontended acquire+release latency (p50/p99);
 * - hand-off latency: the holder calls release → the waiting client holds (p50/p99);
 * - one hot lock, 16 contenders (each its own connection), 2 ms critical section:
 *   ops/s, Jain fairness index over the contenders, longest streak of one contender;
 * - Redis commands per second that clients send while 100 waiters wait on a held lock
 *   (counted with MONITOR; commands a Lua script runs inside Redis are not counted).
 *
 * Prints a table and one JSON line per library. Environment knobs (for quick runs):
 * BENCH_HOT_SECONDS (default 10), BENCH_IDLE_SECONDS (default 10), BENCH_UNCONTENDED (2000),
 * BENCH_HANDOFFS (200), BENCH_ONLY (run only the libraries whose name contains it),
 * BENCH_DEBUG (progress of the idle phase on stderr).
 */
import { cpus } from 'node:os';
import { createConnection } from 'node:net';
import { setMaxListeners } from 'node:events';
import { performance } from 'node:perf_hooks';
import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import Redlock from 'redlock';
import { Mutex } from 'redis-semaphore';
import { createLocker, type Locker } from '../src/index.js';
import { startRedis } from '../scripts/servers/redis.js';
import { jainIndex, longestStreak } from '../src/bench/index.js';

const HOT_SECONDS = Number(process.env.BENCH_HOT_SECONDS ?? 10);
const IDLE_SECONDS = Number(process.env.BENCH_IDLE_SECONDS ?? 10);
const UNCONTENDED = Number(process.env.BENCH_UNCONTENDED ?? 2_000);
const HANDOFFS = Number(process.env.BENCH_HANDOFFS ?? 200);
/** A library gets at most this long for its hand-off samples (node-redlock needs ~0.2 s each). */
const HANDOFF_BUDGET_MS = 40_000;
const TTL_MS = 10_000;
const CONTENDERS = 16;
const IDLE_WAITERS = 100;
const CRITICAL_MS = 2;

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

function ioredis(url: string): Redis {
  const u = new URL(url);
  const r = new Redis({ host: u.hostname, port: Number(u.port), maxRetriesPerRequest: 1 });
  r.on('error', () => undefined);
  return r;
}

function locksmith(url: string, fair: boolean): Library {
  return {
    name: fair ? 'locksmith (fair)' : 'locksmith',
    async client() {
      const locker: Locker = createLocker(url, { ttlMs: TTL_MS, fair });
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

function redlock(url: string): Library {
  return {
    name: 'node-redlock',
    async client() {
      const redis = ioredis(url);
      // Defaults of the library (retryDelay 200 ms, jitter 200 ms), but wait without a retry limit.
      const rl = new Redlock([redis], { retryCount: -1 });
      rl.on('error', () => undefined);
      return {
        async acquire(key) {
          const lock = await rl.acquire([key], TTL_MS);
          // A release must not inherit the unlimited retries (a lease that expired would retry forever).
          return { release: async () => void (await rl.release(lock, { retryCount: 0 })) };
        },
        async close() {
          redis.disconnect();
        },
      };
    },
  };
}

function redisSemaphore(url: string): Library {
  return {
    name: 'redis-semaphore',
    async client() {
      const redis = ioredis(url);
      return {
        async acquire(key, signal) {
          // Library defaults (retryInterval 10 ms, refresh at 80 % of the ttl) but no acquire timeout.
          const mutex = new Mutex(redis, key, { lockTimeout: TTL_MS, acquireTimeout: 3_600_000, onLockLost: () => undefined });
          await mutex.acquire(signal);
          return { release: () => mutex.release() };
        },
        async close() {
          redis.disconnect();
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

async function uncontended(lib: Library): Promise<{ p50: number; p99: number; n: number }> {
  const c = await lib.client();
  const k = key(lib.name, 'uncontended');
  try {
    for (let i = 0; i < 200; i++) await (await c.acquire(k)).release();
    const samples: number[] = [];
    for (let i = 0; i < UNCONTENDED; i++) {
      const t0 = performance.now();
      const held = await c.acquire(k);
      await held.release();
      samples.push(performance.now() - t0);
    }
    return stats(samples);
  } finally {
    await c.close();
  }
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

async function idle(lib: Library, serverUrl: string): Promise<{ commandsPerSec: number }> {
  const holderClient = await lib.client();
  const waiterClient = await lib.client();
  const k = key(lib.name, 'idle');
  const held = await holderClient.acquire(k);
  const ac = new AbortController();
  setMaxListeners(IDLE_WAITERS + 10, ac.signal);
  const pending = Array.from({ length: IDLE_WAITERS }, () =>
    waiterClient.acquire(k, ac.signal).then(
      (h) => h.release().catch(() => undefined),
      () => undefined,
    ),
  );
  await sleep(1_000);
  // Count what clients send (MONITOR lines), not the commands a script runs inside Redis.
  const monitor = await startMonitor(serverUrl);
  await sleep(200);
  monitor.reset();
  const t0 = performance.now();
  await sleep(IDLE_SECONDS * 1_000);
  const commandsPerSec = monitor.count() / ((performance.now() - t0) / 1_000);
  monitor.stop();
  ac.abort(new Error('benchmark over'));
  dbg('idle: window over');
  await held.release().catch(() => undefined);
  dbg('idle: released');
  await waiterClient.close();
  await holderClient.close();
  dbg('idle: closed');
  await Promise.race([Promise.allSettled(pending), sleep(5_000)]);
  dbg('idle: done');
  return { commandsPerSec };
}

/** MONITOR on a raw socket: counts commands clients send (lines not marked `lua`). */
async function startMonitor(url: string): Promise<{ reset(): void; count(): number; stop(): void }> {
  const u = new URL(url);
  const sock = createConnection({ host: u.hostname, port: Number(u.port) });
  await new Promise<void>((resolve, reject) => {
    sock.once('connect', () => resolve());
    sock.once('error', reject);
  });
  sock.on('error', () => undefined);
  let n = 0;
  let rest = '';
  sock.on('data', (d: Buffer) => {
    const lines = (rest + d.toString('utf8')).split('\r\n');
    rest = lines.pop() ?? '';
    for (const line of lines) if (/^\+\d+\.\d+ \[/.test(line) && !line.includes(' lua]')) n += 1;
  });
  sock.write('MONITOR\r\n');
  return {
    reset: () => void (n = 0),
    count: () => n,
    stop: () => void sock.destroy(),
  };
}

const dbg = (m: string): void => {
  if (process.env.BENCH_DEBUG) process.stderr.write(`${m}\n`);
};

const fmt = (n: number, digits = 2): string => (Number.isFinite(n) ? n.toFixed(digits) : 'n/a');

async function main(): Promise<void> {
  const server = await startRedis();
  const admin = ioredis(server.url);
  const redisVersion = /redis_version:(\S+)/.exec(await admin.info('server'))?.[1] ?? '?';
  const machine = {
    nproc: cpus().length,
    cpu: cpus()[0]?.model ?? '?',
    node: process.version,
    redis: redisVersion,
  };
  console.log(`machine: ${machine.nproc} CPUs, ${machine.cpu}, node ${machine.node}, redis ${machine.redis}`);
  console.log(
    `settings: ttl ${TTL_MS} ms, hot lock ${CONTENDERS} contenders × ${HOT_SECONDS} s with a ${CRITICAL_MS} ms critical section, ${IDLE_WAITERS} idle waiters × ${IDLE_SECONDS} s`,
  );
  const only = process.env.BENCH_ONLY;
  const libs = [locksmith(server.url, false), locksmith(server.url, true), redisSemaphore(server.url), redlock(server.url)].filter(
    (l) => only === undefined || l.name.includes(only),
  );
  const rows: Record<string, unknown>[] = [];
  try {
    for (const lib of libs) {
      process.stderr.write(`${lib.name}: uncontended… `);
      const u = await uncontended(lib);
      process.stderr.write('hand-off… ');
      const h = await handoff(lib);
      process.stderr.write('hot lock… ');
      const x = await hot(lib);
      process.stderr.write('idle waiters…\n');
      const i = await idle(lib, server.url);
      const row = {
        library: lib.name,
        uncontendedP50Ms: u.p50,
        uncontendedP99Ms: u.p99,
        handoffP50Ms: h.p50,
        handoffP99Ms: h.p99,
        handoffSamples: h.n,
        hot16OpsPerSec: x.opsPerSec,
        hot16Jain: x.jain,
        hot16LongestStreak: x.longestStreak,
        idle100CommandsPerSec: i.commandsPerSec,
      };
      rows.push(row);
    }
  } finally {
    admin.disconnect();
    await server.stop();
  }
  const header =
    '| library | uncontended p50 / p99 (ms) | hand-off p50 / p99 (ms) | hot16 ops/s | hot16 Jain | hot16 longest streak | 100 idle waiters: Redis cmds/s |';
  console.log('');
  console.log(header);
  console.log('|---|---|---|---|---|---|---|');
  for (const r of rows) {
    const n = (k: string): number => Number(r[k]);
    console.log(
      `| ${String(r.library)} | ${fmt(n('uncontendedP50Ms'), 3)} / ${fmt(n('uncontendedP99Ms'), 3)} | ${fmt(n('handoffP50Ms'), 3)} / ${fmt(n('handoffP99Ms'), 3)} | ${fmt(n('hot16OpsPerSec'), 0)} | ${fmt(n('hot16Jain'), 3)} | ${n('hot16LongestStreak')} | ${fmt(n('idle100CommandsPerSec'), 1)} |`,
    );
  }
  console.log('');
  for (const r of rows) console.log(JSON.stringify({ ...r, machine }));
}

main().then(
  // node-redlock's unlimited retries of the aborted idle waiters keep timers alive: exit explicitly.
  () => process.exit(0),
  (err: unknown) => {
    console.error(err);
    process.exit(1);
  },
);

/**
 * `npm run bench:redis` — the benchmark matrix (src/bench-matrix/) on one Redis started by the
 * harness: locksmith (non-fair and fair) next to node-redlock and redis-semaphore, every
 * library on ioredis against the same server in the same run, ratios against the best peer.
 * Idle cost of waiters = commands clients send per second, counted with MONITOR (commands a
 * Lua script runs inside Redis are not counted). Knobs: bench/common.ts (BENCH_QUICK=1 for a
 * smoke run). `BEFORE=<another checkout>` adds locksmith on that checkout's code (a change
 * against the code before it, in the same run). See docs/benchmarks.md.
 */
import { createConnection } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import Redlock, { type RedlockLock } from 'redlock';
import { Mutex } from 'redis-semaphore';
import { createLocker, type Locker } from '../src/index.js';
import { RedisBackend, redisOptions } from '../src/backends/redis/index.js';
import { lockerContender, type BenchClient, type Contender, type ServerProbe } from '../src/bench-matrix/index.js';
import { startRedis } from '../scripts/servers/redis.js';
import { childOrMain, runEngine } from './common.js';

const TTL_MS = 10_000;

function ioredis(url: string): Redis {
  const u = new URL(url);
  const r = new Redis({ host: u.hostname, port: Number(u.port), maxRetriesPerRequest: 1 });
  r.on('error', () => undefined);
  return r;
}

/** redis-semaphore's `Mutex` with its defaults (retry every 10 ms, refresh at 80 % of the ttl), no acquire timeout. */
function redisSemaphore(url: string): Contender {
  return {
    name: 'redis-semaphore',
    peer: true,
    reportsQueued: false,
    client(): BenchClient {
      const redis = ioredis(url);
      return {
        async acquire(key, o = {}) {
          const mutex = new Mutex(redis, key, { lockTimeout: TTL_MS, acquireTimeout: 3_600_000, onLockLost: () => undefined });
          await mutex.acquire(o.signal);
          return { release: () => mutex.release() };
        },
        close: async () => redis.disconnect(),
        roundTrip: async () => void (await redis.ping()),
      };
    },
  };
}

/**
 * node-redlock with its defaults (retryDelay 200 ms, jitter 200 ms) on one Redis. It cannot
 * abort a wait, so a wait is a series of 5-retry attempts with the signal checked between
 * them (one attempt in six goes without the delay); a lock obtained after the abort is
 * released at once.
 */
function redlock(url: string): Contender {
  return {
    name: 'node-redlock',
    peer: true,
    reportsQueued: false,
    client(): BenchClient {
      const redis = ioredis(url);
      const rl = new Redlock([redis], { retryCount: 5 });
      rl.on('error', () => undefined);
      // A release must not retry (a lease that expired would retry for nothing).
      const release = async (lock: RedlockLock): Promise<void> => void (await rl.release(lock, { retryCount: 0 }));
      return {
        async acquire(key, o = {}) {
          for (;;) {
            o.signal?.throwIfAborted();
            const lock = await rl.acquire([key], TTL_MS).catch(() => undefined);
            if (lock && o.signal?.aborted) await release(lock).catch(() => undefined);
            else if (lock) return { release: () => release(lock) };
          }
        },
        close: async () => redis.disconnect(),
        roundTrip: async () => void (await redis.ping()),
      };
    },
  };
}

/**
 * Commands clients send, counted with MONITOR only while it matters: the waiters row calls a
 * probe twice (start and end of the idle window); the first call opens MONITOR, the second
 * reads the count and closes it, so MONITOR's own cost burdens no other row.
 */
function monitorProbe(url: string): ServerProbe {
  let open: { count(): number; stop(): void } | undefined;
  return async () => {
    if (open) {
      const n = open.count();
      open.stop();
      open = undefined;
      return n;
    }
    open = await startMonitor(url);
    await sleep(100);
    return open.count();
  };
}

/** MONITOR on a raw socket: counts commands clients send (lines not marked `lua`). */
async function startMonitor(url: string): Promise<{ count(): number; stop(): void }> {
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
  return { count: () => n, stop: () => void sock.destroy() };
}

/** What a locker over a client of our own needs from one checkout's code. */
interface Code {
  readonly createLocker: typeof createLocker;
  readonly RedisBackend: typeof RedisBackend;
  readonly redisOptions: typeof redisOptions;
}

/** `BEFORE=<another checkout>`: locksmith on that checkout's code too, in the same alternating rounds. */
const before = process.env['BEFORE'];
const beforeCode: Code | undefined = before
  ? { ...((await import(`${before}/src/index.ts`)) as Code), ...((await import(`${before}/src/backends/redis/index.ts`)) as Code) }
  : undefined;

/** The ioredis client each locker's releases go over, for the hand-off row's round trip. */
const clientOf = new WeakMap<Locker, Redis>();

/**
 * A locker as `createLocker(url)` makes it (the same ioredis options, from the checkout's
 * `redisOptions`), but over a client made here, so that the matrix can send its reference
 * `PING` over the very connection the locker's releases use.
 */
function lockerOn(code: Code, url: string): Locker {
  const parsed = code.redisOptions(new URL(url));
  const client = new Redis(parsed.client);
  client.on('error', () => undefined);
  const locker = code.createLocker(new code.RedisBackend(client, parsed.backend), { ttlMs: TTL_MS });
  clientOf.set(locker, client);
  return locker;
}

const ping = async (locker: Locker): Promise<unknown> => clientOf.get(locker)?.ping();

/** Every library of the run, on the Redis at `url` (also what a forked hand-off waiter makes). */
function contenders(url: string): Contender[] {
  const now: Code = { createLocker, RedisBackend, redisOptions };
  const locksmith = (fair: boolean): Contender =>
    lockerContender(fair ? 'locksmith (fair)' : 'locksmith', () => lockerOn(now, url), fair, ping);
  const old = (fair: boolean): Contender[] =>
    beforeCode
      ? [lockerContender(fair ? 'locksmith (fair, BEFORE)' : 'locksmith (BEFORE)', () => lockerOn(beforeCode, url), fair, ping)]
      : [];
  return [locksmith(false), locksmith(true), ...old(false), ...old(true), redisSemaphore(url), redlock(url)];
}

childOrMain(contenders, async () => {
  const server = await startRedis();
  const admin = ioredis(server.url);
  try {
    const version = /redis_version:(\S+)/.exec(await admin.info('server'))?.[1] ?? '?';
    admin.disconnect();
    await runEngine({
      engine: `redis ${version}`,
      contenders: contenders(server.url),
      fork: { script: import.meta.filename, url: server.url },
      probe: monitorProbe(server.url),
      probeCounts: 'commands clients send, from MONITOR',
      notes: [`ttl ${TTL_MS} ms for everybody; redis-semaphore Mutex: retry every 10 ms; node-redlock: retryDelay 200 ms, jitter 200 ms`],
    });
  } finally {
    admin.disconnect();
    await server.stop();
  }
});

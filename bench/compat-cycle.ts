/**
 * The shims' own cost of an uncontended cycle, layer by layer, in ONE run on one
 * redis-server, alternating rounds (order rotated every round) so that machine load hits
 * every contender alike: plain `createLocker(new RedisBackend(client))` `lock()+release()`,
 * the same with an explicit owner, the `tryLock` a redis-semaphore `Mutex` makes with its
 * layers added one by one, each shim, and the library it replaces. Wall time p50 per cycle,
 * and this process's CPU time per cycle (median of the rounds), in µs.
 * Run: `npx tsx --expose-gc bench/compat-cycle.ts` (figures: docs/benchmarks.md, "Compat shims").
 * Before/after in one run: `BASE=<dir with an older src/>` adds that tree's contenders, prefixed `base `;
 * `DIST=1` takes locksmith and the shims from the built `dist/` (of this tree and of BASE:
 * `npm run build` first), as a user runs them: under tsx every closure of `src/` also pays
 * esbuild's `__name` helper. `ONLY=<regex>` keeps the contenders it matches; `CYCLES` per
 * round (300), `ROUNDS` (12).
 */
import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import OriginalRedlock from 'redlock';
import { Mutex as OriginalMutex } from 'redis-semaphore';
import type ShimRedlock from '../src/compat/redlock.js';
import type { Mutex as ShimMutex } from '../src/compat/redis-semaphore.js';
import type { RedisBackend } from '../src/backends/redis/index.js';
import type { createLocker, Locker } from '../src/locker.js';
import { startRedis } from '../scripts/servers/redis.js';
import { runCycleRounds, type CycleContender } from './cycle-rounds.js';

const CYCLES = Number(process.env.CYCLES ?? 300);
const ROUNDS = Number(process.env.ROUNDS ?? 12);

interface Tree {
  readonly Redlock: typeof ShimRedlock;
  readonly Mutex: typeof ShimMutex;
  readonly RedisBackend: typeof RedisBackend;
  readonly createLocker: typeof createLocker;
}

/** The shims and locksmith of the tree at `root` (this one: `..`), from `src/` or (DIST=1) from `dist/`. */
async function tree(root: string): Promise<Tree> {
  const [dir, ext] = process.env.DIST ? ['dist', 'js'] : ['src', 'ts'];
  const load = async <T>(path: string): Promise<T> => (await import(`${root}/${dir}/${path}.${ext}`)) as T;
  const [redlock, semaphore, backend, locker] = await Promise.all([
    load<{ default: typeof ShimRedlock }>('compat/redlock'),
    load<{ Mutex: typeof ShimMutex }>('compat/redis-semaphore'),
    load<{ RedisBackend: typeof RedisBackend }>('backends/redis/index'),
    load<{ createLocker: typeof createLocker }>('locker'),
  ]);
  return { Redlock: redlock.default, Mutex: semaphore.Mutex, RedisBackend: backend.RedisBackend, createLocker: locker.createLocker };
}

/**
 * What a redis-semaphore `Mutex` asks of the locker (the lease without renewal, one attempt;
 * before its identifier became lazy, under a random UUID owner), then the layers it adds one
 * by one: a loss listener, a refresh timer.
 */
function layers(locker: Locker): CycleContender[] {
  const attempt = Object.freeze({ autoExtend: false, ttlMs: 10_000, waitMs: 0 });
  const take = async (k: string): Promise<Awaited<ReturnType<Locker['lock']>>> =>
    (await locker.tryLock(k, { owner: randomUUID(), autoExtend: false, ttlMs: 10_000, waitMs: 0 }))!;
  return [
    { name: 'tryLock(ttl,waitMs 0)', cycle: async (k) => (await locker.tryLock(k, attempt))!.release() },
    { name: 'tryLock(uuid owner,ttl,waitMs 0)', cycle: async (k) => (await take(k)).release() },
    {
      name: '+ signal listener',
      cycle: async (k) => {
        const h = await take(k);
        h.signal.addEventListener('abort', () => undefined, { once: true });
        return h.release();
      },
    },
    {
      name: '+ setInterval',
      cycle: async (k) => {
        const h = await take(k);
        h.signal.addEventListener('abort', () => undefined, { once: true });
        const t = setInterval(() => undefined, 3333);
        t.unref();
        clearInterval(t);
        return h.release();
      },
    },
  ];
}

function contenders(port: number, clients: Redis[], tree: Tree, prefix: string, originals: boolean): CycleContender[] {
  const client = (): Redis => {
    const c = new Redis({ port, host: '127.0.0.1' });
    clients.push(c);
    return c;
  };
  const plain = tree.createLocker(new tree.RedisBackend(client()));
  const owned = tree.createLocker(new tree.RedisBackend(client()));
  const redlock = new OriginalRedlock([client()]);
  const shimRedlock = new tree.Redlock([client()]);
  const rs = client();
  const shim = client();
  let n = 0;
  const list: CycleContender[] = [
    { name: 'locksmith lock+release', cycle: async (k) => (await plain.lock(k)).release() },
    { name: 'locksmith lock(owner)+release', cycle: async (k) => (await owned.lock(k, { owner: `o${n++}`, autoExtend: false })).release() },
    ...layers(owned),
    { name: 'node-redlock 5', cycle: async (k) => (await redlock.acquire([k], 10_000)).release() },
    { name: 'compat/redlock', cycle: async (k) => (await shimRedlock.acquire([k], 10_000)).release() },
    {
      name: 'redis-semaphore Mutex',
      cycle: async (k) => {
        const m = new OriginalMutex(rs, k);
        await m.acquire();
        await m.release();
      },
    },
    {
      name: 'compat/redis-semaphore Mutex',
      cycle: async (k) => {
        const m = new tree.Mutex(shim, k);
        await m.acquire();
        await m.release();
      },
    },
  ];
  const originalsOnly = new Set(['node-redlock 5', 'redis-semaphore Mutex']);
  return list
    .filter((c) => originals || !originalsOnly.has(c.name))
    .map((c) => (originalsOnly.has(c.name) ? c : { name: `${prefix}${c.name}`, cycle: c.cycle }));
}

const server = await startRedis();
const clients: Redis[] = [];
try {
  const port = server.nodes[0]!.port;
  const list = contenders(port, clients, await tree('..'), '', true);
  if (process.env.BASE) list.push(...contenders(port, clients, await tree(process.env.BASE), 'base ', false));
  await runCycleRounds(list, { cycles: CYCLES, rounds: ROUNDS, keyPrefix: 'cycle' });
} finally {
  await Promise.allSettled(clients.map((c) => c.quit()));
  await server.stop();
}
process.exit(0);

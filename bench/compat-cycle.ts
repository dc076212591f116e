/**
 * The shims' own cost of an uncontended cycle, layer by layer, in ONE run on one
 * redis-server, alternating rounds (order rotated every round) so that machine load hits
 * every contender alike: plain locksmith `lock()+release()`, the same with an explicit owner,
 * each shim, and the library it replaces. Wall time p50 per cycle, and this process's CPU
 * time per cycle (median of the rounds), in µs.
 * Run: `npx tsx --expose-gc bench/compat-cycle.ts` (figures: docs/benchmarks.md, "Compat shims").
 * Before/after in one run: `BASE=<dir with an older src/>` adds that tree's contenders, prefixed `base `;
 * `ONLY=<regex>` keeps the contenders it matches; `CYCLES` per round (300), `ROUNDS` (12).
 */
import { Redis } from 'ioredis';
import OriginalRedlock from 'redlock';
import { Mutex as OriginalMutex } from 'redis-semaphore';
import ShimRedlock from '../src/compat/redlock.js';
import { Mutex as ShimMutex } from '../src/compat/redis-semaphore.js';
import { lockerFor } from '../src/compat/clients.js';
import { startRedis } from '../scripts/servers/redis.js';
import { runCycleRounds, type CycleContender } from './cycle-rounds.js';

const CYCLES = Number(process.env.CYCLES ?? 300);
const ROUNDS = Number(process.env.ROUNDS ?? 12);

interface Tree {
  readonly Redlock: typeof ShimRedlock;
  readonly Mutex: typeof ShimMutex;
  readonly lockerFor: typeof lockerFor;
}

/** The shim's layers one by one over plain `tryLock`: an explicit owner, a loss listener, a refresh timer. */
function layers(locker: ReturnType<typeof lockerFor>, owner: () => string): CycleContender[] {
  const take = async (k: string): Promise<Awaited<ReturnType<typeof locker.lock>>> =>
    (await locker.tryLock(k, { owner: owner(), autoExtend: false, ttlMs: 10_000, waitMs: 0 }))!;
  return [
    { name: 'tryLock(owner,ttl,waitMs 0)', cycle: async (k) => (await take(k)).release() },
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
  const plain = tree.lockerFor([client()]);
  const owned = tree.lockerFor([client()]);
  const redlock = new OriginalRedlock([client()]);
  const shimRedlock = new tree.Redlock([client()]);
  const rs = client();
  const shim = client();
  let n = 0;
  const list: CycleContender[] = [
    { name: 'locksmith lock+release', cycle: async (k) => (await plain.lock(k)).release() },
    { name: 'locksmith lock(owner)+release', cycle: async (k) => (await owned.lock(k, { owner: `o${n++}`, autoExtend: false })).release() },
    ...layers(owned, () => `o${n++}`),
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
  const list = contenders(port, clients, { Redlock: ShimRedlock, Mutex: ShimMutex, lockerFor }, '', true);
  if (process.env.BASE) {
    const base = process.env.BASE;
    const tree: Tree = {
      Redlock: ((await import(`${base}/src/compat/redlock.ts`)) as { default: typeof ShimRedlock }).default,
      Mutex: ((await import(`${base}/src/compat/redis-semaphore.ts`)) as { Mutex: typeof ShimMutex }).Mutex,
      lockerFor: ((await import(`${base}/src/compat/clients.ts`)) as { lockerFor: typeof lockerFor }).lockerFor,
    };
    list.push(...contenders(port, clients, tree, 'base ', false));
  }
  await runCycleRounds(list, { cycles: CYCLES, rounds: ROUNDS, keyPrefix: 'cycle' });
} finally {
  await Promise.allSettled(clients.map((c) => c.quit()));
  await server.stop();
}
process.exit(0);

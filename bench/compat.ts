/**
 * The compat shims next to the libraries they replace, in ONE run on one redis-server,
 * alternating rounds so that machine load hits every contender alike:
 * - uncontended lock + release: 200 cycles per contender per round, 10 rounds after a warm-up, p50;
 * - hand-off: A holds, B waits, idle 20–50 ms, A releases; the time from A's release() call
 *   to B's acquisition resolving, 60 rounds, p50 / p99.
 * Each contender uses its library's defaults and two clients (A and B, as two processes would).
 * Run: `npm run bench:compat`. Figures: docs/migrating/node-redlock.md, docs/migrating/redis-semaphore.md.
 * `BASE=<dir with an older src/>` adds that tree's shims (prefixed `base `) to the same run;
 * `DIST=1` takes the shims from the built `dist/` (of this tree and of BASE: `npm run build`
 * first), as a user runs them.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import OriginalRedlock from 'redlock';
import { Mutex as OriginalMutex } from 'redis-semaphore';
import type ShimRedlock from '../src/compat/redlock.js';
import type { Mutex as ShimMutex } from '../src/compat/redis-semaphore.js';
import { startRedis } from '../scripts/servers/redis.js';

/** One contender: take and give back a lock named `key` on client A or B. */
interface Contender {
  readonly name: string;
  /** Resolves when held; the returned function releases. */
  take(side: 0 | 1, key: string): Promise<() => Promise<unknown>>;
}

const UNCONTENDED_CYCLES = 200;
const UNCONTENDED_ROUNDS = 10;
const HANDOFF_ROUNDS = 60;

function pct(values: readonly number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? NaN;
}

/** The shims of one tree. */
interface Shims {
  readonly Redlock: typeof ShimRedlock;
  readonly Mutex: typeof ShimMutex;
}

/** The shims of the tree at `root` (this one: `..`), from `src/` or (DIST=1) from `dist/`. */
async function shimsOf(root: string): Promise<Shims> {
  const [dir, ext] = process.env.DIST ? ['dist', 'js'] : ['src', 'ts'];
  const redlock = (await import(`${root}/${dir}/compat/redlock.${ext}`)) as { default: typeof ShimRedlock };
  const semaphore = (await import(`${root}/${dir}/compat/redis-semaphore.${ext}`)) as { Mutex: typeof ShimMutex };
  return { Redlock: redlock.default, Mutex: semaphore.Mutex };
}

function pair(port: number, clients: Redis[]): [Redis, Redis] {
  const c = [new Redis({ port, host: '127.0.0.1' }), new Redis({ port, host: '127.0.0.1' })] as [Redis, Redis];
  clients.push(...c);
  return c;
}

/** The shims of one tree, named with `prefix`. */
function shimContenders(port: number, clients: Redis[], tree: Shims, prefix: string): Contender[] {
  const [sa, sb] = pair(port, clients);
  const [na, nb] = pair(port, clients);
  const shims = [new tree.Redlock([sa]), new tree.Redlock([sb])] as const;
  const shimClients = [na, nb] as const;
  return [
    {
      name: `${prefix}compat/redlock`,
      take: async (side, key) => {
        const lock = await shims[side].acquire([key], 10_000);
        return () => lock.release();
      },
    },
    {
      name: `${prefix}compat/redis-semaphore Mutex`,
      take: async (side, key) => {
        const m = new tree.Mutex(shimClients[side], key);
        await m.acquire();
        return () => m.release();
      },
    },
  ];
}

function contenders(port: number, clients: Redis[], tree: Shims): Contender[] {
  const [ra, rb] = pair(port, clients);
  const [ma, mb] = pair(port, clients);
  const redlocks = [new OriginalRedlock([ra]), new OriginalRedlock([rb])] as const;
  const mutexClients = [ma, mb] as const;
  const [shimRedlock, shimMutex] = shimContenders(port, clients, tree, '');
  return [
    {
      name: 'node-redlock 5',
      take: async (side, key) => {
        const lock = await redlocks[side].acquire([key], 10_000);
        return () => lock.release();
      },
    },
    shimRedlock!,
    {
      name: 'redis-semaphore Mutex',
      take: async (side, key) => {
        const m = new OriginalMutex(mutexClients[side], key);
        await m.acquire();
        return () => m.release();
      },
    },
    shimMutex!,
  ];
}

async function uncontended(c: Contender, round: number): Promise<number[]> {
  const times: number[] = [];
  for (let i = 0; i < UNCONTENDED_CYCLES; i++) {
    const t0 = performance.now();
    const release = await c.take(0, `bench:u:${round}:${i % 8}`);
    await release();
    times.push(performance.now() - t0);
  }
  return times;
}

async function handoff(c: Contender, round: number): Promise<number> {
  const key = `bench:h:${round}`;
  const releaseA = await c.take(0, key);
  let resolvedAt = 0;
  const b = c.take(1, key).then((release) => {
    resolvedAt = performance.now();
    return release;
  });
  await sleep(20 + Math.random() * 30);
  const releasedAt = performance.now();
  await releaseA();
  const releaseB = await b;
  await releaseB();
  return resolvedAt - releasedAt;
}

/** Rotate the order every round so that no contender always runs first. */
function rotated<T>(list: readonly T[], round: number): T[] {
  const k = round % list.length;
  return [...list.slice(k), ...list.slice(0, k)];
}

async function run(): Promise<void> {
  const server = await startRedis();
  const clients: Redis[] = [];
  try {
    const port = server.nodes[0]!.port;
    const list = contenders(port, clients, await shimsOf('..'));
    if (process.env.BASE) list.push(...shimContenders(port, clients, await shimsOf(process.env.BASE), 'base '));
    for (const c of list) await uncontended(c, -1);
    const unc = new Map(list.map((c) => [c.name, [] as number[]]));
    for (let r = 0; r < UNCONTENDED_ROUNDS; r++) {
      for (const c of rotated(list, r)) unc.get(c.name)!.push(...(await uncontended(c, r)));
    }
    const hand = new Map(list.map((c) => [c.name, [] as number[]]));
    for (let r = 0; r < HANDOFF_ROUNDS; r++) {
      for (const c of rotated(list, r)) hand.get(c.name)!.push(await handoff(c, r));
    }
    console.log(`| contender | uncontended lock+release p50 (ms) | hand-off p50 (ms) | hand-off p99 (ms) |`);
    console.log(`|---|---:|---:|---:|`);
    for (const c of list) {
      const u = unc.get(c.name)!;
      const h = hand.get(c.name)!;
      console.log(`| ${c.name} | ${pct(u, 50).toFixed(3)} | ${pct(h, 50).toFixed(3)} | ${pct(h, 99).toFixed(3)} |`);
    }
    // Each shim against the library it replaces (and the base tree's shim against it): < 1 is faster.
    const pairs = [
      ['node-redlock 5', 'compat/redlock'],
      ['redis-semaphore Mutex', 'compat/redis-semaphore Mutex'],
      ...(process.env.BASE
        ? [
            ['node-redlock 5', 'base compat/redlock'],
            ['redis-semaphore Mutex', 'base compat/redis-semaphore Mutex'],
          ]
        : []),
    ] as const;
    for (const [orig, shim] of pairs) {
      const ratio = (m: Map<string, number[]>, p: number): string => (pct(m.get(shim)!, p) / pct(m.get(orig)!, p)).toFixed(2);
      console.log(`- ${shim} / ${orig}: uncontended p50 ${ratio(unc, 50)}×, hand-off p50 ${ratio(hand, 50)}×, p99 ${ratio(hand, 99)}×`);
    }
  } finally {
    await Promise.allSettled(clients.map((c) => c.quit()));
    await server.stop();
  }
}

await run();
process.exit(0);

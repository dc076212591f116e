/**
 * Benchmark (not a test): what publishing every change on `<prefix>changes` costs an
 * uncontended lock + release (docs/backends/redis.md, "Watching").
 *
 *   npx tsx bench/observe/redis-changes.ts BASE_SRC
 *
 * BASE_SRC is the `src/` folder of a checkout from before the scripts published changes
 * (e.g. `git archive <commit> src | tar -x -C .ab/base` inside the worktree, so that its
 * imports find node_modules). Three sides run in this one process in alternating rounds
 * against one fresh redis-server: before, after with nobody watching, after with one
 * watcher subscribed (each change is then also sent to it).
 */
import { pathToFileURL } from 'node:url';
import { Redis } from 'ioredis';
import { startRedis } from '../../scripts/servers/redis.js';
import * as current from '../../src/index.js';
import { RedisBackend } from '../../src/backends/redis/index.js';
import { uncontendedRound, type Lib } from './redis-cycle.js';

const ROUNDS = 12;
const OPS = 1_000;
const SIDES = ['before', 'after', 'after+watcher'] as const;

const redis = await startRedis();
const admin = new Redis(redis.url);

/** One round on this run's Redis (redis-cycle.ts). */
const round = (lib: Lib, tag: string): Promise<[number, number]> => uncontendedRound(lib, redis.url, tag, admin, OPS);

/** One round of `side`; the watcher side subscribes a watcher (of another prefix) for the round. */
async function runSide(side: (typeof SIDES)[number], base: Lib): Promise<[number, number]> {
  if (side === 'before') return round(base, 'base');
  if (side === 'after') return round(current, 'new');
  const watcher = new RedisBackend(new Redis(redis.url), { ownsClient: true });
  const stop = new AbortController();
  const it = watcher.changes({ prefix: 'elsewhere:', signal: stop.signal })[Symbol.asyncIterator]();
  await it.next(); // null: subscribed
  const pending = it.next();
  try {
    return await round(current, 'watched');
  } finally {
    stop.abort();
    await pending;
    await watcher.close();
  }
}

const median = (xs: number[]): number => [...xs].sort((x, y) => x - y)[Math.floor(xs.length / 2)] ?? NaN;

try {
  const baseSrc = process.argv[2];
  if (!baseSrc) throw new Error('usage: npx tsx bench/observe/redis-changes.ts BASE_SRC');
  const base = (await import(pathToFileURL(`${baseSrc}/index.ts`).href)) as Lib;
  const client: number[][] = SIDES.map(() => []);
  const server: number[][] = SIDES.map(() => []);
  for (let r = 0; r < ROUNDS; r++) {
    // Rotate which side goes first, so that none always runs on a warmer server.
    for (let k = 0; k < SIDES.length; k++) {
      const s = (r + k) % SIDES.length;
      const [c, v] = await runSide(SIDES[s] ?? 'before', base);
      client[s]?.push(c);
      server[s]?.push(v);
    }
  }
  SIDES.forEach((side, s) => {
    const c = client[s] ?? [];
    console.log(
      `${side.padEnd(14)} lock+release µs: median ${median(c).toFixed(1)}, best ${Math.min(...c).toFixed(1)}; ` +
        `server µs per EVALSHA: median ${median(server[s] ?? []).toFixed(2)}`,
    );
  });
} finally {
  admin.disconnect();
  await redis.stop();
}

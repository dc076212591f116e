/**
 * Benchmark (not a test): what storing the identity costs an uncontended lock + release, and
 * how long paging through 10,000 held locks takes. docs/backends/redis.md, "Listing".
 *
 *   npx tsx bench/observe/redis-listing.ts [BASE_SRC]
 *
 * With BASE_SRC (the `src/` folder of a checkout from before the identity was stored, e.g.
 * `git archive <commit> src | tar -x -C /tmp/base` with node_modules linked beside it), both
 * versions run in this one process in alternating rounds against one fresh redis-server.
 */
import { performance } from 'node:perf_hooks';
import { Redis } from 'ioredis';
import { pathToFileURL } from 'node:url';
import { startRedis } from '../../scripts/servers/redis.js';
import * as current from '../../src/index.js';
import type { Backend } from '../../src/backend.js';
import { listSeam } from '../../test/helpers.js';
import { uncontendedRound, type Lib } from './redis-cycle.js';

const ROUNDS = 20;
const OPS = 1_000;

const redis = await startRedis();
const admin = new Redis(redis.url);
/** Server µs per EVALSHA of the round (the scripts' own cost, from INFO commandstats). */
const server: number[][] = [[], []];

/** One round (redis-cycle.ts): µs per pair; the server's µs per EVALSHA kept for `side`. */
async function round(lib: Lib, url: string, tag: string, side: 0 | 1): Promise<number> {
  const [took, serverUs] = await uncontendedRound(lib, url, tag, admin, OPS);
  server[side]?.push(serverUs);
  return took;
}

async function abRounds(url: string, baseSrc: string): Promise<void> {
  const base = (await import(pathToFileURL(`${baseSrc}/index.ts`).href)) as Lib;
  const a: number[] = [];
  const b: number[] = [];
  for (let r = 0; r < ROUNDS; r++) {
    // Alternate which goes first, so that neither always runs on a warmer server.
    if (r % 2 === 0) {
      a.push(await round(base, url, 'base', 0));
      b.push(await round(current, url, 'new', 1));
    } else {
      b.push(await round(current, url, 'new', 1));
      a.push(await round(base, url, 'base', 0));
    }
  }
  const median = (xs: number[]): number => [...xs].sort((x, y) => x - y)[Math.floor(xs.length / 2)] ?? NaN;
  const ma = median(a);
  const mb = median(b);
  console.log(`lock+release µs, before: ${a.map((x) => x.toFixed(1)).join(' ')}  median ${ma.toFixed(1)}`);
  console.log(`lock+release µs, after:  ${b.map((x) => x.toFixed(1)).join(' ')}  median ${mb.toFixed(1)}`);
  // Each pair ran back to back: the median of their ratios is the least disturbed by load.
  const ratios = a.map((x, i) => ((b[i] ?? NaN) - x) / x);
  const best = (xs: number[]): number => Math.min(...xs);
  console.log(
    `best round µs: before ${best(a).toFixed(1)}, after ${best(b).toFixed(1)} (${(((best(b) - best(a)) / best(a)) * 100).toFixed(1)} %)`,
  );
  const [sa = [], sb = []] = server;
  const sm = [median(sa), median(sb)] as const;
  console.log(
    `server µs per EVALSHA (median of rounds): before ${sm[0].toFixed(2)}, after ${sm[1].toFixed(2)} (${(((sm[1] - sm[0]) / sm[0]) * 100).toFixed(1)} %)`,
  );
  console.log(
    `after vs before: medians ${(((mb - ma) / ma) * 100).toFixed(1)} %, median of paired rounds ${(median(ratios) * 100).toFixed(1)} %`,
  );
}

/** Hold 10,000 locks, then page through them with limit 1000: ms for the whole walk. */
async function listing(url: string): Promise<void> {
  const locker = current.createLocker(url, { ttlMs: 120_000 });
  try {
    const held = [];
    for (let i = 0; i < 10_000; i += 500) {
      held.push(...(await Promise.all(Array.from({ length: 500 }, (_, j) => locker.lock(`list:${i + j}`)))));
    }
    const backend: Backend = await locker.backend();
    for (let run = 0; run < 3; run++) {
      const t0 = performance.now();
      const { locks, pages } = await listSeam(backend, 'list:', 1000);
      const seen = locks.length;
      console.log(`list 10,000 held locks, limit 1000: ${(performance.now() - t0).toFixed(0)} ms, ${pages} pages, ${seen} locks`);
    }
    await Promise.all(held.map((h) => h.release()));
  } finally {
    await locker.close();
  }
}

try {
  const baseSrc = process.argv[2];
  if (baseSrc) await abRounds(redis.url, baseSrc);
  await listing(redis.url);
} finally {
  admin.disconnect();
  await redis.stop();
}

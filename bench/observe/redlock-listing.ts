/**
 * Benchmark (not a test): what storing the identity costs an uncontended Redlock lock +
 * release, and paging through 10,000 locks held on three masters with limit 1000.
 * docs/backends/redlock.md, "Listing".
 *
 *   npx tsx bench/observe/redlock-listing.ts [BASE_SRC]
 *
 * With BASE_SRC (the `src/` of a checkout from before, as for bench/observe/redis-listing.ts),
 * both versions run in this one process in alternating rounds against the same masters.
 */
import { performance } from 'node:perf_hooks';
import { pathToFileURL } from 'node:url';
import { startRedlock } from '../../scripts/servers/redlock.js';
import * as current from '../../src/index.js';
import type { Backend } from '../../src/backend.js';
import { listSeam } from '../../test/helpers.js';

type Lib = Pick<typeof current, 'createLocker'>;

const server = await startRedlock({ count: 3 });
// Thousands of acquisitions at once on a loaded machine: a generous per-master bound.
const url = `${server.url}${server.url.includes('?') ? '&' : '?'}nodeTimeoutMs=5000`;

/** Sequential uncontended lock + release on one locker: µs per pair. */
async function round(lib: Lib, tag: string): Promise<number> {
  const locker = lib.createLocker(url, { ttlMs: 10_000 });
  try {
    for (let i = 0; i < 100; i++) await (await locker.lock(`bench:${tag}:${i % 10}`)).release();
    const t0 = performance.now();
    for (let i = 0; i < 500; i++) await (await locker.lock(`bench:${tag}:${i % 10}`)).release();
    return ((performance.now() - t0) * 1000) / 500;
  } finally {
    await locker.close();
  }
}

async function abRounds(baseSrc: string): Promise<void> {
  const base = (await import(pathToFileURL(`${baseSrc}/index.ts`).href)) as Lib;
  const a: number[] = [];
  const b: number[] = [];
  for (let r = 0; r < 16; r++) {
    // Alternate which goes first, so that neither always runs on warmer masters.
    if (r % 2 === 0) {
      a.push(await round(base, 'base'));
      b.push(await round(current, 'new'));
    } else {
      b.push(await round(current, 'new'));
      a.push(await round(base, 'base'));
    }
  }
  const median = (xs: number[]): number => [...xs].sort((x, y) => x - y)[Math.floor(xs.length / 2)] ?? NaN;
  const [ma, mb] = [median(a), median(b)];
  console.log(`redlock lock+release µs, before: median ${ma.toFixed(1)}, best ${Math.min(...a).toFixed(1)}`);
  console.log(`redlock lock+release µs, after:  median ${mb.toFixed(1)}, best ${Math.min(...b).toFixed(1)}`);
  console.log(`change of the medians: ${(((mb - ma) / ma) * 100).toFixed(1)} %`);
}

async function listing(): Promise<void> {
  const locker = current.createLocker(url, { ttlMs: 120_000 });
  try {
    const held = [];
    for (let i = 0; i < 10_000; i += 100) {
      held.push(...(await Promise.all(Array.from({ length: 100 }, (_, j) => locker.lock(`list:${i + j}`)))));
    }
    const backend: Backend = await locker.backend();
    for (let run = 0; run < 3; run++) {
      const t0 = performance.now();
      const { locks, pages } = await listSeam(backend, 'list:', 1000);
      const seen = locks.length;
      console.log(
        `redlock, 3 masters: list 10,000 held locks, limit 1000: ${(performance.now() - t0).toFixed(0)} ms, ${pages} pages, ${seen} locks`,
      );
    }
    await Promise.all(held.map((h) => h.release()));
  } finally {
    await locker.close();
  }
}

try {
  const baseSrc = process.argv[2];
  if (baseSrc) await abRounds(baseSrc);
  await listing();
} finally {
  await server.stop();
}

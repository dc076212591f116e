/**
 * Benchmark (not a test): paging through 10,000 Redlock locks held on three masters, limit
 * 1000. docs/backends/redlock.md, "Listing".
 *
 *   npx tsx test/redlock/bench-observe.ts
 */
import { performance } from 'node:perf_hooks';
import { startRedlock } from '../../scripts/servers/redlock.js';
import { createLocker } from '../../src/index.js';
import type { Backend } from '../../src/backend.js';

const server = await startRedlock({ count: 3 });
// Thousands of acquisitions at once on a loaded machine: a generous per-master bound.
const locker = createLocker(`${server.url}${server.url.includes('?') ? '&' : '?'}nodeTimeoutMs=5000`, { ttlMs: 120_000 });
try {
  const held = [];
  for (let i = 0; i < 10_000; i += 100) {
    held.push(...(await Promise.all(Array.from({ length: 100 }, (_, j) => locker.lock(`list:${i + j}`)))));
  }
  const backend: Backend = await locker.backend();
  for (let run = 0; run < 3; run++) {
    let cursor: string | undefined;
    let seen = 0;
    let pages = 0;
    const t0 = performance.now();
    do {
      const page = await backend.list!({ prefix: 'list:', limit: 1000, cursor, signal: new AbortController().signal });
      seen += page.locks.length;
      pages++;
      cursor = page.cursor;
    } while (cursor !== undefined);
    console.log(
      `redlock, 3 masters: list 10,000 held locks, limit 1000: ${(performance.now() - t0).toFixed(0)} ms, ${pages} pages, ${seen} locks`,
    );
  }
  await Promise.all(held.map((h) => h.release()));
} finally {
  await locker.close();
  await server.stop();
}

/**
 * Listing figures for docs/backends/zookeeper.md, "Listing" (not a test: timings belong here).
 * `npx tsx test/zookeeper/list-bench.ts [locks]` starts a one-node ZooKeeper, holds `locks`
 * (default 10,000) locks through the seam, then times paging through all of them with limit
 * 1,000 (three runs), and the uncontended acquire + release cost with and without an
 * identity in the node's data, in alternating rounds.
 */
import { performance } from 'node:perf_hooks';
import { createZooKeeperBackend, type ZooKeeperBackend } from '../../src/backends/zookeeper/index.js';
import type { ZkTicket } from '../../src/backends/zookeeper/recipe.js';
import { seamRequest } from '../helpers.js';
import { startZooKeeper } from '../../scripts/servers/zookeeper.js';

const LOCKS = Number(process.argv[2] ?? 10_000);
const IDENTITY = '{"h":"build-host-01.example","p":123456,"n":"orders-service"}';

async function holdAll(b: ZooKeeperBackend): Promise<void> {
  for (let i = 0; i < LOCKS; i += 500) {
    const batch = Array.from({ length: Math.min(500, LOCKS - i) }, (_, k) => `bench:${String(i + k).padStart(6, '0')}`);
    await Promise.all(
      batch.map(async (id) => {
        const r = await b.tryAcquire(seamRequest<ZkTicket>(id, `o-${id}`, { wait: false, ttlMs: 600_000 }));
        if (!r.granted) throw new Error(`${id} not granted`);
      }),
    );
  }
}

async function pageAll(b: ZooKeeperBackend): Promise<{ ms: number; cpuMs: number; locks: number; pages: number }> {
  const start = performance.now();
  const cpu = process.cpuUsage();
  let cursor: string | undefined;
  let locks = 0;
  let pages = 0;
  do {
    const p = await b.list({ prefix: 'bench:', limit: 1_000, cursor, signal: new AbortController().signal });
    locks += p.locks.length;
    pages += 1;
    cursor = p.cursor;
  } while (cursor !== undefined);
  const used = process.cpuUsage(cpu);
  return { ms: performance.now() - start, cpuMs: (used.user + used.system) / 1_000, locks, pages };
}

/** `n` uncontended acquire + release round trips through the seam; ms per pair. */
async function cycle(b: ZooKeeperBackend, identity: string, n: number): Promise<number> {
  const start = performance.now();
  for (let i = 0; i < n; i++) {
    const r = await b.tryAcquire(seamRequest<ZkTicket>('ab:one', 'ab-owner', { identity, wait: false }));
    if (!r.granted) throw new Error('not granted');
    await b.release(r.grant);
  }
  return (performance.now() - start) / n;
}

async function main(): Promise<void> {
  const server = await startZooKeeper({ nodes: 1 });
  const url = `zookeeper://${server.connectString}/bench?sessionTimeoutMs=60000`;
  const b = createZooKeeperBackend(url);
  const reader = createZooKeeperBackend(url);
  try {
    const t0 = performance.now();
    await holdAll(b);
    console.log(`held ${LOCKS} locks in ${Math.round(performance.now() - t0)} ms`);
    for (let run = 0; run < 3; run++) {
      const r = await pageAll(reader);
      console.log(
        `page through ${r.locks} held locks, limit 1000: ${Math.round(r.ms)} ms (${r.pages} pages, client CPU ${Math.round(r.cpuMs)} ms)`,
      );
    }
    const rounds: Record<'without' | 'with', number[]> = { without: [], with: [] };
    await cycle(b, IDENTITY, 100);
    for (let round = 0; round < 6; round++) {
      rounds.without.push(await cycle(b, '', 300));
      rounds.with.push(await cycle(b, IDENTITY, 300));
    }
    const median = (xs: number[]): number => [...xs].sort((x, y) => x - y)[Math.floor(xs.length / 2)] ?? NaN;
    const a = median(rounds.without);
    const c = median(rounds.with);
    console.log(`acquire+release: ${a.toFixed(3)} ms without identity, ${c.toFixed(3)} ms with (${(((c - a) / a) * 100).toFixed(1)} %)`);
  } finally {
    await Promise.allSettled([b.close(), reader.close()]);
    await server.stop();
  }
}

await main();

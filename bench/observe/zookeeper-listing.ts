/**
 * Listing figures for docs/backends/zookeeper.md, "Listing" (not a test: timings belong here).
 * `npx tsx bench/observe/zookeeper-listing.ts [locks] [old src]` starts a one-node ZooKeeper, holds
 * `locks` (default 10,000) locks through the seam, then times paging through all of them with
 * limit 1,000 (three runs), and the uncontended acquire + release cost with and without an
 * identity in the node's data, in alternating rounds. With `old src` (the `src/` folder of
 * another checkout, e.g. `git archive main src | tar -x -C /tmp/old` with a `node_modules`
 * link beside it), the paging alternates between that code's backend and this one's, seven
 * rounds each, and prints the medians.
 */
import { pathToFileURL } from 'node:url';
import { resolve } from 'node:path';
import { performance } from 'node:perf_hooks';
import { createZooKeeperBackend, type ZooKeeperBackend } from '../../src/backends/zookeeper/index.js';
import type { ZkTicket } from '../../src/backends/zookeeper/recipe.js';
import { seamRequest } from '../../test/helpers.js';
import { startZooKeeper } from '../../scripts/servers/zookeeper.js';

const LOCKS = Number(process.argv[2] ?? 10_000);
const OLD_SRC = process.argv[3];
const IDENTITY = '{"h":"build-host-01.example","p":123456,"n":"orders-service"}';

async function holdAll(b: ZooKeeperBackend): Promise<void> {
  for (let i = 0; i < LOCKS; i += 500) {
    const batch = Array.from({ length: Math.min(500, LOCKS - i) }, (_, k) => `bench:${String(i + k).padStart(6, '0')}`);
    await Promise.all(
      batch.map(async (id) => {
        // The default identity of a locker: listing reads and decodes it.
        const r = await b.tryAcquire(seamRequest<ZkTicket>(id, `o-${id}`, { wait: false, ttlMs: 600_000, identity: IDENTITY }));
        if (!r.granted) throw new Error(`${id} not granted`);
      }),
    );
  }
}

type Lister = Pick<ZooKeeperBackend, 'list'>;

async function pageAll(b: Lister): Promise<{ ms: number; cpuMs: number; locks: number; pages: number }> {
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
  if (locks !== LOCKS) throw new Error(`listed ${locks} of ${LOCKS} held locks`);
  return { ms: performance.now() - start, cpuMs: (used.user + used.system) / 1_000, locks, pages };
}

const median = (xs: number[]): number => [...xs].sort((x, y) => x - y)[Math.floor(xs.length / 2)] ?? NaN;

/** Paging through every lock by the old code's backend and this one's, alternating. */
async function oldAgainstNew(url: string, reader: Lister): Promise<void> {
  const mod = (await import(pathToFileURL(resolve(OLD_SRC ?? '', 'backends/zookeeper/index.ts')).href)) as {
    createZooKeeperBackend: (url: string) => Lister & { close(): Promise<void> };
  };
  const old = mod.createZooKeeperBackend(url);
  const runs: Record<'old' | 'new', { ms: number; cpuMs: number }[]> = { old: [], new: [] };
  try {
    await pageAll(old);
    for (let round = 0; round < 7; round++) {
      runs.old.push(await pageAll(old));
      runs.new.push(await pageAll(reader));
    }
  } finally {
    await old.close();
  }
  for (const k of ['old', 'new'] as const) {
    const ms = runs[k].map((r) => Math.round(r.ms));
    const cpu = median(runs[k].map((r) => r.cpuMs));
    console.log(
      `${k}: page through ${LOCKS} locks, limit 1000: median ${median(ms)} ms (client CPU ${Math.round(cpu)} ms), runs ${ms.join(' ')}`,
    );
  }
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
  // Long sessions: a hold's lease is at most the session timeout, and the rounds outlast a minute.
  const server = await startZooKeeper({ nodes: 1, maxSessionTimeoutMs: 600_000 });
  const url = `zookeeper://${server.connectString}/bench?sessionTimeoutMs=600000`;
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
    if (OLD_SRC !== undefined) await oldAgainstNew(url, reader);
    const rounds: Record<'without' | 'with', number[]> = { without: [], with: [] };
    await cycle(b, IDENTITY, 100);
    for (let round = 0; round < 6; round++) {
      rounds.without.push(await cycle(b, '', 300));
      rounds.with.push(await cycle(b, IDENTITY, 300));
    }
    const a = median(rounds.without);
    const c = median(rounds.with);
    console.log(`acquire+release: ${a.toFixed(3)} ms without identity, ${c.toFixed(3)} ms with (${(((c - a) / a) * 100).toFixed(1)} %)`);
  } finally {
    await Promise.allSettled([b.close(), reader.close()]);
    await server.stop();
  }
}

await main();

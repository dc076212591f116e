/**
 * `npm run bench:faults`: lost updates per fencing mode and backend, with the current holder
 * SIGSTOPped past its ttl. Prints a table and one JSON line per row (for docs/benchmarks.md).
 */
import { cpus } from 'node:os';
import { startRedis } from '../scripts/servers/redis.js';
import { startZooKeeper } from '../scripts/servers/zookeeper.js';
import { startCassandra } from '../scripts/servers/cassandra.js';
import { startPostgres } from '../scripts/servers/postgres.js';
import { startMariaDb } from '../scripts/servers/mariadb.js';
import { createLocker } from '../src/index.js';
import type { RunningServer } from '../scripts/servers/harness.js';
import { runFaultScenario } from '../test/faults/scenario.js';
import type { FenceMode } from '../test/faults/fenced-store.js';

const modes: FenceMode[] = ['none', 'writes', 'reads-and-writes'];
// ZooKeeper's lease is the session: a pause only lets another client in once the session
// expires, so its session timeout is set short and the pause longer than it.
const engines: {
  name: string;
  start: () => Promise<RunningServer>;
  ttlMs: number;
  pauseMs: number;
  criticalMs?: number;
  url?: (u: string) => string;
}[] = [
  { name: 'redis', start: () => startRedis(), ttlMs: 200, pauseMs: 350 },
  {
    name: 'zookeeper',
    start: () => startZooKeeper({ nodes: 1 }),
    ttlMs: 1_000,
    pauseMs: 2_500,
    url: (u) => `${u}${u.includes('?') ? '&' : '?'}sessionTimeoutMs=1000`,
  },
  // Cassandra cells live in whole seconds (a 1 s ttl is written as 2 s): pause past that.
  {
    name: 'cassandra',
    start: () => startCassandra({ nodes: 1 }),
    ttlMs: 1_000,
    pauseMs: 3_500,
    criticalMs: 40,
    url: (u) => `${u}?create=true`,
  },
  { name: 'postgres', start: () => startPostgres(), ttlMs: 300, pauseMs: 450, url: (u) => `${u}?migrate=true` },
  { name: 'mysql', start: () => startMariaDb(), ttlMs: 300, pauseMs: 450, url: (u) => `${u}?migrate=true` },
];
const only = process.argv[2];
console.log(`machine: ${cpus().length} × ${cpus()[0]?.model ?? 'cpu'}, node ${process.version}`);
console.log('| backend | fence | workers × ops | pauses | acknowledged | final | lost updates | rejected by fence |');
console.log('|---|---|---|---|---|---|---|---|');
for (const e of engines) {
  if (only && e.name !== only) continue;
  const server = await e.start();
  try {
    for (const mode of modes) {
      const url = e.url ? e.url(server.url) : server.url;
      // Create any schema once, before six processes race to create it.
      const setup = createLocker(url);
      await (await setup.lock('fault:setup')).release();
      await setup.close();
      const r = await runFaultScenario({
        url,
        mode,
        workers: 6,
        opsPerWorker: 60,
        ttlMs: e.ttlMs,
        criticalMs: e.criticalMs ?? 5,
        pauseMs: e.pauseMs,
        pauses: 15,
      });
      console.log(`| ${e.name} | ${mode} | 6 × 60 | ${r.pausesDone} | ${r.committed} | ${r.final} | ${r.lostUpdates} | ${r.rejected} |`);
      console.error(JSON.stringify({ backend: e.name, ...r }));
    }
  } finally {
    await server.stop();
  }
}

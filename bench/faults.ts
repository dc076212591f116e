/**
 * `npm run bench:faults`: lost updates per fencing mode and backend, with the current holder
 * SIGSTOPped past its ttl. Prints a table and one JSON line per row (for docs/benchmarks.md).
 */
import { cpus } from 'node:os';
import { startRedis } from '../scripts/servers/redis.js';
import { startZooKeeper } from '../scripts/servers/zookeeper.js';
import type { RunningServer } from '../scripts/servers/harness.js';
import { runFaultScenario } from '../test/faults/scenario.js';
import type { FenceMode } from '../test/faults/fenced-store.js';

const modes: FenceMode[] = ['none', 'writes', 'reads-and-writes'];
const engines: { name: string; start: () => Promise<RunningServer>; ttlMs: number }[] = [
  { name: 'redis', start: () => startRedis(), ttlMs: 200 },
  { name: 'zookeeper', start: () => startZooKeeper({ nodes: 1 }), ttlMs: 1_000 },
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
      const r = await runFaultScenario({ url: server.url, mode, workers: 6, opsPerWorker: 60, ttlMs: e.ttlMs, criticalMs: 5, pauseMs: e.ttlMs + 150, pauses: 15 });
      console.log(`| ${e.name} | ${mode} | 6 × 60 | ${r.pausesDone} | ${r.committed} | ${r.final} | ${r.lostUpdates} | ${r.rejected} |`);
      console.error(JSON.stringify({ backend: e.name, ...r }));
    }
  } finally {
    await server.stop();
  }
}

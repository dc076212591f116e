/**
 * Fault test on a real ZooKeeper: the holder is SIGSTOPped past its session timeout, so the
 * ensemble expires its session and the next waiter takes over while the paused process still
 * believes it is inside its critical section. Safety invariant: with a fence on reads and
 * writes no acknowledged update is lost.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { startZooKeeper } from '../../scripts/servers/zookeeper.js';
import type { RunningServer } from '../../scripts/servers/harness.js';
import { runFaultScenario } from './scenario.js';

let server: RunningServer;
before(async () => {
  server = await startZooKeeper({ nodes: 1 });
});
after(async () => {
  await server?.stop();
});

test('zookeeper: a holder paused past its session loses no update behind a read+write fence', { timeout: 300_000 }, async () => {
  const url = `${server.url}${server.url.includes('?') ? '&' : '?'}sessionTimeoutMs=1000`;
  const r = await runFaultScenario({
    url,
    mode: 'reads-and-writes',
    workers: 5,
    opsPerWorker: 30,
    ttlMs: 1_000,
    criticalMs: 5,
    pauseMs: 2_500,
    pauses: 4,
  });
  assert.ok(r.pausesDone > 0, 'the holder was paused');
  assert.equal(r.lostUpdates, 0, JSON.stringify(r));
  assert.equal(r.final, r.committed);
});

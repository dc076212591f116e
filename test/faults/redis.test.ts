/**
 * Fault test on a real Redis: worker processes, the current holder SIGSTOPped past its
 * ttl again and again. Safety invariant: with a fence on reads and writes no acknowledged
 * update is lost. (How many are lost without the fence is a measurement, printed by
 * `npm run bench:faults`, not asserted.)
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { startRedis } from '../../scripts/servers/redis.js';
import type { RunningServer } from '../../scripts/servers/harness.js';
import { runFaultScenario } from './scenario.js';

let server: RunningServer;
before(async () => {
  server = await startRedis();
});
after(async () => {
  await server?.stop();
});

test('redis: pausing the holder past its ttl loses no update behind a read+write fence', { timeout: 300_000 }, async () => {
  const r = await runFaultScenario({
    url: server.url,
    mode: 'reads-and-writes',
    workers: 6,
    opsPerWorker: 40,
    ttlMs: 200,
    criticalMs: 5,
    pauseMs: 300,
    pauses: 10,
  });
  assert.ok(r.pausesDone > 0, 'the holder was paused');
  assert.equal(r.lostUpdates, 0, JSON.stringify(r));
  assert.equal(r.final, r.committed);
});

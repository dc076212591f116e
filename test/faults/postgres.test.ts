/**
 * Fault test on a real PostgreSQL: worker processes, the current holder SIGSTOPped past its ttl
 * again and again. Safety invariant: with a fence on reads and writes no acknowledged update
 * is lost (the lease ends by the database's clock while the holder is paused).
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { startPostgres } from '../../scripts/servers/postgres.js';
import type { RunningServer } from '../../scripts/servers/harness.js';
import { runFaultScenario } from './scenario.js';

let server: RunningServer;
before(async () => {
  server = await startPostgres();
});
after(async () => {
  await server?.stop();
});

test('postgres: pausing the holder past its ttl loses no update behind a read+write fence', { timeout: 300_000 }, async () => {
  const r = await runFaultScenario({
    url: `${server.url}?migrate=true`,
    mode: 'reads-and-writes',
    workers: 6,
    opsPerWorker: 40,
    ttlMs: 300,
    criticalMs: 5,
    pauseMs: 450,
    pauses: 10,
  });
  assert.ok(r.pausesDone > 0, 'the holder was paused');
  assert.equal(r.lostUpdates, 0, JSON.stringify(r));
  assert.equal(r.final, r.committed);
});

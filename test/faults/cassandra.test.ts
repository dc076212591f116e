/**
 * Fault test on a real Cassandra: the holder is SIGSTOPped past the TTL of its cells, the
 * next in the queue takes over, the paused process resumes inside its critical section.
 * Safety invariant: with a fence on reads and writes no acknowledged update is lost.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { startCassandra } from '../../scripts/servers/cassandra.js';
import type { RunningServer } from '../../scripts/servers/harness.js';
import { createLocker } from '../../src/index.js';
import { runFaultScenario } from './scenario.js';

let server: RunningServer | undefined;
before(
  async () => {
    server = await startCassandra({ nodes: 1 });
  },
  { timeout: 600_000 },
);
after(async () => {
  await server?.stop();
});

test("cassandra: a holder paused past its cells' TTL loses no update behind a read+write fence", { timeout: 400_000 }, async () => {
  if (!server) throw new Error('cassandra did not start');
  const url = `${server.url}?create=true`;
  // Create the schema once, before five processes race to create it.
  const setup = createLocker(url);
  await (await setup.lock('fault:setup')).release();
  await setup.close();
  const r = await runFaultScenario({
    url,
    mode: 'reads-and-writes',
    workers: 5,
    opsPerWorker: 25,
    ttlMs: 1_000,
    criticalMs: 40,
    pauseMs: 3_500,
    pauses: 4,
  });
  assert.ok(r.pausesDone > 0, 'the holder was paused');
  assert.equal(r.lostUpdates, 0, JSON.stringify(r));
  assert.equal(r.final, r.committed);
});

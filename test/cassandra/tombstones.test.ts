/**
 * Tombstones: every release deletes cells (a queue entry and a main cell), and expired
 * cells count too. Without rotation one hot lockId piles them into the same partitions
 * until Cassandra refuses to read them. The harness's node here fails a read past 1,000
 * tombstones (the default is 100,000), and the lock rotates its partitions every 200
 * tokens (`shardSize=200`), so the acquisitions below would fail several times over
 * without rotation.
 * See docs/backends/cassandra.md, "Tombstones".
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { createCassandraBackend, type CassandraBackend } from '../../src/backends/cassandra/index.js';
import type { RunningServer } from '../../scripts/servers/harness.js';
import { startCassandra } from '../../scripts/servers/cassandra.js';
import { request } from './request.js';

const TOMBSTONE_FAILURE_THRESHOLD = 1_000;
const SHARD_SIZE = 200;
let server: RunningServer | undefined;
const backends: CassandraBackend[] = [];

before(
  async () => {
    server = await startCassandra({ nodes: 1, tombstoneFailureThreshold: TOMBSTONE_FAILURE_THRESHOLD });
  },
  { timeout: 600_000 },
);

after(async () => {
  await Promise.allSettled(backends.map((b) => b.close()));
  await server?.stop();
});

/** `acquisitions` uncontended grants and releases on one lockId, two clients taking turns. */
async function hammer(acquisitions: number): Promise<void> {
  if (!server) throw new Error('cassandra did not start');
  const url = `${server.url}?create=true&shardSize=${SHARD_SIZE}`;
  const clients = [await createCassandraBackend(url), await createCassandraBackend(url)];
  backends.push(...clients);
  const lockId = 'hot-lock';
  let last = 0n;
  for (let i = 0; i < acquisitions; i++) {
    const b = clients[i % 2]!;
    // Uncontended, so the first attempt holds; a refusal here would be a bug.
    const r = await b.tryAcquire(request(lockId, `owner-${i}`, { ttlMs: 1_000 }));
    assert.ok(r.granted, `acquisition ${i} was refused`);
    assert.ok(r.grant.token > last, 'tokens strictly increase');
    last = r.grant.token;
    assert.equal(await b.release(r.grant), true);
  }
  assert.equal(last, BigInt(acquisitions));
  const state = await clients[0]!.inspect(lockId);
  assert.equal(state.holders.length, 0);
  assert.equal(state.waiters, 0);
  assert.equal(state.lastToken, BigInt(acquisitions));
}

test(
  `fair: 5,000 acquisitions on one lockId never reach ${TOMBSTONE_FAILURE_THRESHOLD} tombstones in a read`,
  { timeout: 600_000 },
  async () => {
    await hammer(5_000);
  },
);

/**
 * Tombstones: every release deletes a queue cell and a main cell, and expired cells count
 * too. Without rotation one hot lockId piles them into two partitions until Cassandra
 * refuses to read them. The harness's nodes fail a read past 5,000 tombstones (the default
 * is 100,000), so 20,000 acquisitions on one id would fail four times over without the
 * fair lock's shard rotation (a new queue/main partition every `shardSize` grants).
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { AcquireRequest } from '../../src/backend.js';
import { createCassandraBackend, type CassandraBackend } from '../../src/backends/cassandra/index.js';
import type { RunningServer } from '../../scripts/servers/harness.js';
import { startCassandra } from '../../scripts/servers/cassandra.js';

const ACQUISITIONS = 20_000;
const TOMBSTONE_FAILURE_THRESHOLD = 5_000;
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

test(`${ACQUISITIONS} acquisitions on one lockId never reach the tombstone failure threshold`, { timeout: 900_000 }, async () => {
  if (!server) throw new Error('cassandra did not start');
  // Two clients taking turns, as two processes hammering one hot lock would.
  const clients = [
    await createCassandraBackend(`${server.url}?create=true&shardSize=1000`),
    await createCassandraBackend(`${server.url}?create=true&shardSize=1000`),
  ];
  backends.push(...clients);
  const lockId = 'hot-lock';
  let last = 0n;
  for (let i = 0; i < ACQUISITIONS; i++) {
    const b = clients[i % 2]!;
    const req: AcquireRequest = {
      lockId,
      kind: 'mutex',
      permits: 1,
      ownerId: `owner-${i}`,
      ttlMs: 1_000,
      fair: true,
      lockDelayMs: 0,
      wait: true,
      onLost: () => undefined,
    };
    // Uncontended, so the first attempt holds; a refusal here would be a bug.
    const r = await b.tryAcquire(req);
    assert.ok(r.granted, `acquisition ${i} was refused`);
    assert.ok(r.grant.token > last, 'tokens strictly increase');
    last = r.grant.token;
    assert.equal(await b.release(r.grant), true);
  }
  assert.equal(last, BigInt(ACQUISITIONS));
  const state = await clients[0]!.inspect(lockId);
  assert.equal(state.holders.length, 0);
  assert.equal(state.waiters, 0);
  assert.equal(state.lastToken, BigInt(ACQUISITIONS));
});

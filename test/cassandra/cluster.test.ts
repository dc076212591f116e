/**
 * A 3-node cluster (127.0.0.1–3, RF 3, QUORUM): one node is killed (SIGKILL) while a lock
 * is held and another client waits for it. With R + W > RF the two remaining nodes still
 * form every quorum, so nothing may change for the holder (no loss, renewals go on) or for
 * the waiter (it keeps waiting and gets the lock when it is released).
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { createLocker, FencedResource, type Locker } from '../../src/index.js';
import type { RunningServer } from '../../scripts/servers/harness.js';
import { startCassandra } from '../../scripts/servers/cassandra.js';

let server: RunningServer | undefined;
const lockers: Locker[] = [];

before(
  async () => {
    server = await startCassandra({ nodes: 3 });
  },
  { timeout: 900_000 },
);

after(async () => {
  await Promise.allSettled(lockers.map((l) => l.close()));
  await server?.stop();
});

function describe(e: unknown): string {
  if (!(e instanceof Error)) return String(e);
  return `${e.message}${e.cause === undefined ? '' : ` <- ${describe(e.cause)}`}`;
}

function client(ttlMs = 5_000): Locker {
  if (!server) throw new Error('cassandra did not start');
  const l = createLocker(`${server.url}?create=true&replication=3&consistency=quorum`, { ttlMs });
  lockers.push(l);
  return l;
}

test('killing one of three nodes changes nothing for the holder and the waiter', { timeout: 300_000 }, async () => {
  if (!server) throw new Error('cassandra did not start');
  const lockId = 'cluster-lock';
  const resource = new FencedResource(0);
  const a = client();
  const b = client();
  const held = await a.lock(lockId);
  resource.write(held.token, 1);

  const waiting = new Promise<void>((resolve) => b.once('waiting', () => resolve()));
  let bSettled = false;
  const next = b.lock(lockId, { timeoutMs: 240_000 });
  void next.then(
    () => (bSettled = true),
    () => (bSettled = true),
  );
  await waiting;

  // The first node is the seed and the driver's first contact point: the harshest choice.
  const victim = server.nodes[0];
  assert.ok(victim);
  await victim.kill();

  // Three ttls with one node dead: the holder renews (no loss), the waiter keeps waiting.
  await sleep(15_000);
  assert.equal(held.signal.aborted, false, `the holder lost its lock when a node died: ${describe(held.signal.reason)}`);
  assert.equal(held.held, true);
  assert.equal(bSettled, false, 'the waiter stopped waiting');
  assert.equal(await client().tryLock(lockId), null, 'another client got a held lock');

  await held.release();
  const got = await next;
  assert.ok(got.token > held.token);
  resource.write(got.token, 2);
  assert.equal(resource.rejected, 0);
  await got.release();

  // New acquisitions (and their fencing LWTs) still work on the two survivors.
  const again = await client().lock(lockId, { timeoutMs: 60_000 });
  assert.ok(again.token > got.token);
  await again.release();
});

/**
 * The hand-off on the deletion of the last key before ours (docs/backends/etcd.md, "The
 * recipe"): a waiter with exactly one older key holds at that key's deletion without listing
 * again, but only while its own key stood (one watch, events in revision order) and only when
 * no lock-delay marker can outlive that key.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { test } from 'node:test';
import { Etcd3 } from 'etcd3';
import { createLocker } from '../../src/index.js';
import { abandon } from '../../src/testing.js';
import { createEtcdBackend, type EtcdBackend } from '../../src/backends/etcd/index.js';
import type { EtcdTicket } from '../../src/backends/etcd/recipe.js';
import { startEtcd } from '../../scripts/servers/etcd.js';
import { seamRequest, useServer } from '../helpers.js';

const T = { timeout: 60_000 };
const server = await useServer(() => startEtcd());
const PREFIX = 'last/';
const id = (name: string): string => `${name}-${randomBytes(4).toString('hex')}`;
const backend = (): EtcdBackend => createEtcdBackend(`${server.url}?prefix=${PREFIX}&leaseTtlMs=2000`);

/** A holds `lockId` (with `lockDelayMs`), B queues behind it: B's ticket. */
async function holderAndWaiter(a: EtcdBackend, b: EtcdBackend, lockId: string, lockDelayMs = 0) {
  const held = await a.tryAcquire(seamRequest(lockId, 'a', { lockDelayMs }));
  assert.ok(held.granted);
  const waiting = await b.tryAcquire(seamRequest(lockId, 'b'));
  assert.equal(waiting.granted, false);
  const ticket = waiting.granted ? undefined : waiting.contended.ticket;
  assert.ok(ticket?.rev !== undefined);
  return { grant: held.grant, ticket: ticket as EtcdTicket & { rev: bigint } };
}

test('a waiter behind the last key holds at that key deletion, on its own key, without listing again', T, async () => {
  const [a, b] = [backend(), backend()];
  try {
    const lockId = id('handoff');
    const { grant, ticket } = await holderAndWaiter(a, b, lockId);
    assert.equal(ticket.watch?.type, 'last');
    const wake = b.waitForChange(lockId, ticket, new AbortController().signal);
    await a.release(grant);
    await wake;
    const rev = ticket.rev;
    assert.ok(ticket.heldAt !== undefined && ticket.heldAt > rev, 'the wait saw the deletion while its key stood');
    const got = await b.tryAcquire(seamRequest(lockId, 'b', { ticket }));
    assert.ok(got.granted);
    assert.equal(got.grant.token, rev, 'the token is the waiting key revision');
    assert.deepEqual(
      (await a.inspect(lockId)).holders.map((h) => h.token),
      [got.grant.token],
    );
    await b.release(got.grant);
  } finally {
    await Promise.all([a.close(), b.close()]);
  }
});

test('a waiter whose own key vanished before the last key went is not granted on it: it queues again', T, async () => {
  const [a, b] = [backend(), backend()];
  try {
    const lockId = id('vanished');
    const { grant, ticket } = await holderAndWaiter(a, b, lockId);
    const oldRev = ticket.rev;
    const wake = b.waitForChange(lockId, ticket, new AbortController().signal);
    await a.client.raw.delete().key(ticket.key);
    await a.release(grant);
    await wake;
    assert.equal(ticket.heldAt, undefined, 'no proof: our key went first');
    let got = await b.tryAcquire(seamRequest(lockId, 'b', { ticket }));
    assert.ok(got.granted);
    assert.ok(got.grant.token > oldRev, 'granted on a new key, not on the vanished one');
    assert.deepEqual(
      (await a.inspect(lockId)).holders.map((h) => h.token),
      [got.grant.token],
    );
    await b.release(got.grant);
    got = await b.tryAcquire(seamRequest(lockId, 'b'));
    assert.ok(got.granted);
    await b.release(got.grant);
  } finally {
    await Promise.all([a.close(), b.close()]);
  }
});

test('behind a key that will write a lock-delay marker, or does not say, the waiter lists again', T, async () => {
  const b = backend();
  const raw = new Etcd3({ hosts: server.endpoints.split(',') });
  try {
    // Its holder writes the marker only after its grant: a listing may come before it.
    const marking = { locksmith: 1, kind: 'mutex', owner: 'm', nonce: 'n', permits: 1, id: '', at: Date.now(), marks: true };
    // A key of an older locksmith has no `marks`: it may leave a marker too.
    const older = { locksmith: 1, kind: 'mutex', owner: 'o', nonce: 'n', permits: 1, id: '', at: Date.now() };
    for (const value of [marking, older]) {
      const lockId = id('marks');
      const lease = await raw.lease(60, { autoKeepAlive: false }).grant();
      await raw
        .put(`${PREFIX}${lockId}/${BigInt(lease).toString(16)}`)
        .value(JSON.stringify(value))
        .lease(lease)
        .exec();
      const waiting = await b.tryAcquire(seamRequest(lockId, 'b'));
      const ticket = waiting.granted ? undefined : waiting.contended.ticket;
      assert.equal(ticket?.watch?.type, 'key', JSON.stringify(value));
      await b.cancel(seamRequest(lockId, 'b'), ticket);
      await raw.leaseClient.leaseRevoke({ ID: lease });
    }
  } finally {
    await b.close();
    raw.close();
  }
});

test('a waiter queued behind a holder that vanished waits out its lock-delay', { timeout: 90_000 }, async () => {
  const url = `${server.url}?prefix=${PREFIX}&leaseTtlMs=2000`;
  const [doomed, other] = [createLocker(url), createLocker(url)];
  const raw = new Etcd3({ hosts: server.endpoints.split(',') });
  try {
    const lockId = id('delay');
    await doomed.lock(lockId, { lockDelayMs: 3_000 });
    const next = other.lock(lockId, { timeoutMs: 60_000 });
    await abandon(doomed);
    const hold = await next;
    assert.deepEqual(await raw.getAll().prefix(`${PREFIX}%delay/${lockId}/`).keys(), [], 'granted only once the marker went');
    await hold.release();
  } finally {
    await Promise.allSettled([doomed.close(), other.close()]);
    raw.close();
  }
});

/**
 * Lock-delay on etcd (docs/backends/etcd.md, "Lock-delay"): the marker a holder leaves
 * outlives its key when it vanishes (lease expiry, its own ttl lapsing) and goes with a clean
 * release or a forced one.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { Etcd3 } from 'etcd3';
import { createLocker, type Locker } from '../../src/index.js';
import { abandon } from '../../src/testing.js';
import { startEtcd } from '../../scripts/servers/etcd.js';
import { useServer } from '../helpers.js';

const server = await useServer(() => startEtcd());
const PREFIX = 'locksmith-delay/';
const T = { timeout: 90_000 };

const locker = (): Locker => createLocker(`${server.url}?prefix=${PREFIX}&leaseTtlMs=2000`);
const lockId = (name: string): string => `${name}-${randomBytes(4).toString('hex')}`;

/** Wait until the lock's own keys (not its markers) are all gone from etcd. */
async function keysGone(raw: Etcd3, id: string): Promise<void> {
  while ((await raw.getAll().prefix(`${PREFIX}${id}/`).keys()).length > 0) await sleep(100);
}

test('a holder whose lease expired still blocks for the lock-delay after its key is gone, then frees', T, async () => {
  const raw = new Etcd3({ hosts: server.endpoints.split(',') });
  const [doomed, other] = [locker(), locker()];
  const id = lockId('crash');
  try {
    await doomed.lock(id, { lockDelayMs: 6_000 });
    await abandon(doomed);
    await keysGone(raw, id);
    assert.equal(await other.tryLock(id), null, 'the key went with the lease, the delay still blocks');
    assert.equal((await raw.getAll().prefix(`${PREFIX}%delay/${id}/`).keys()).length, 1, 'the marker stands');
    const next = await other.lock(id, { timeoutMs: 60_000 });
    assert.equal(next.held, true);
    await next.release();
  } finally {
    await Promise.allSettled([doomed.close(), other.close()]);
    raw.close();
  }
});

test('a hold whose own ttl lapsed keeps the lock-delay although its client lives on', T, async () => {
  const raw = new Etcd3({ hosts: server.endpoints.split(',') });
  const [a, b] = [locker(), locker()];
  const id = lockId('lapse');
  try {
    await a.lock(id, { ttlMs: 500, autoExtend: false, lockDelayMs: 3_000 });
    await keysGone(raw, id);
    assert.equal(await b.tryLock(id), null, 'blocked by the delay after the lapse');
    const next = await b.lock(id, { timeoutMs: 30_000 });
    assert.equal(next.held, true);
    await next.release();
  } finally {
    await Promise.allSettled([a.close(), b.close()]);
    raw.close();
  }
});

test('a clean release leaves no marker, and a vanished reader blocks a writer but not a reader', T, async () => {
  const raw = new Etcd3({ hosts: server.endpoints.split(',') });
  const [a, doomed, b] = [locker(), locker(), locker()];
  const id = lockId('release');
  try {
    const held = await a.lock(id, { lockDelayMs: 60_000 });
    await held.release();
    assert.deepEqual(await raw.getAll().prefix(`${PREFIX}%delay/`).keys(), [], 'no marker after a release');
    await doomed.readWriteLock(id).read({ lockDelayMs: 60_000 });
    await abandon(doomed);
    await keysGone(raw, id);
    const reader = await b.readWriteLock(id).tryRead();
    assert.ok(reader, 'a reader shares with the vanished reader');
    await reader.release();
    assert.equal(await b.readWriteLock(id).tryWrite(), null, 'a writer waits out the delay');
    assert.ok((await b.forceRelease(id, { reason: 'test: end the delay' })) >= 0);
    const writer = await b.readWriteLock(id).tryWrite();
    assert.ok(writer, 'a forced release ends the delay');
    await writer.release();
  } finally {
    await Promise.allSettled([a.close(), doomed.close(), b.close()]);
    raw.close();
  }
});

/**
 * What an exclusive waiter reads: the key just older than its own, never the whole queue
 * (docs/backends/etcd.md, "The recipe"). Keys worth more than one gRPC message (the client
 * takes 4 MiB) queued ahead of it would make any full listing fail.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { test } from 'node:test';
import { Etcd3 } from 'etcd3';
import { createLocker } from '../../src/index.js';
import { startEtcd } from '../../scripts/servers/etcd.js';
import { useServer, waitingOn } from '../helpers.js';

const server = await useServer(() => startEtcd());

test('a mutex waiter behind more queued bytes than one gRPC message holds still waits and gets the lock', { timeout: 60_000 }, async () => {
  const lockId = `queue-${randomBytes(4).toString('hex')}`;
  const raw = new Etcd3({ hosts: server.endpoints.split(',') });
  const a = createLocker(server.url);
  const b = createLocker(server.url);
  try {
    const held = await a.lock(lockId);
    // Six foreign keys (empty of locksmith's JSON: Go-style mutex holders) of 1 MiB each, queued after `a`.
    const big = Buffer.alloc(1024 * 1024, 0x61);
    const names = Array.from({ length: 6 }, (_, i) => `${lockId}/big-${i}`);
    for (const name of names) await raw.put(name).value(big);
    assert.equal(await b.tryLock(lockId), null, 'a soft attempt sees the queue and leaves nothing behind');
    const waiting = waitingOn(b, lockId);
    const next = b.lock(lockId, { timeoutMs: 30_000 });
    await waiting;
    for (const name of names) await raw.delete().key(name);
    await held.release();
    const got = await next;
    assert.ok(got.token > held.token, `${got.token} > ${held.token}`);
    await got.release();
  } finally {
    await Promise.allSettled([a.close(), b.close()]);
    raw.close();
  }
});

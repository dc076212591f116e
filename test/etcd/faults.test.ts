/**
 * The etcd backend under faults of a real 3-member cluster: a member killed with SIGKILL
 * (a follower, then the leader) while a lock is held changes nothing for the holder; a
 * client cut off from the whole cluster (a TCP proxy per member that stops forwarding)
 * hears of its loss before any other client is granted the lock.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, describe, test } from 'node:test';
import { performance } from 'node:perf_hooks';
import { createLocker, FencedResource, LockLostError, StaleTokenError, type Lock, type Locker } from '../../src/index.js';
import { EtcdBackend } from '../../src/backends/etcd/index.js';
import { startEtcd } from '../../scripts/servers/etcd.js';
import type { ServerNode } from '../../scripts/servers/harness.js';
import { waitFor } from '../../scripts/servers/harness.js';
import { eventually, faultProxy, lossOf, useServer, type FaultProxy } from '../helpers.js';

const T = { timeout: 120_000 };
const server = await useServer(() => startEtcd());
const id = (label: string): string => `faults-${label}-${randomBytes(4).toString('hex')}`;
const open: Locker[] = [];
after(async () => {
  await Promise.allSettled(open.map((l) => l.close()));
});

function client(url = server.url, leaseTtlMs = 10_000): Locker {
  const l = createLocker(`${url}?leaseTtlMs=${leaseTtlMs}`, { ttlMs: 6_000 });
  open.push(l);
  return l;
}

/** Resolve after `lock` was extended `n` more times (the renewals went through). */
function extensions(locker: Locker, lock: Lock, n: number): Promise<void> {
  return new Promise((resolve) => {
    let seen = 0;
    const on = (e: { lockId: string }): void => {
      if (e.lockId !== lock.lockId || ++seen < n) return;
      locker.off('extended', on);
      resolve();
    };
    locker.on('extended', on);
  });
}

/** Wait for `work`, failing at once if `lock` is lost meanwhile (instead of at the test timeout). */
function unlessLost<R>(lock: Lock, work: Promise<R>): Promise<R> {
  return new Promise<R>((resolve, reject) => {
    const onAbort = (): void => reject(new Error('the holder lost its lock', { cause: lock.signal.reason }));
    if (lock.signal.aborted) onAbort();
    lock.signal.addEventListener('abort', onAbort, { once: true });
    work.then(resolve, reject).finally(() => lock.signal.removeEventListener('abort', onAbort));
  });
}

/** Hold a lock across the loss of `victim`: the holder sees nothing, others are excluded, new locks work. */
async function holdAcross(victim: () => Promise<ServerNode>): Promise<void> {
  const holderClient = client();
  const lockId = id('hold');
  const lock = await holderClient.lock(lockId);
  const backend = await holderClient.backend();
  assert.ok(backend instanceof EtcdBackend);
  const lease = backend.lease;
  const node = await victim();
  await node.kill();
  try {
    await unlessLost(lock, extensions(holderClient, lock, 3));
    assert.equal(lock.signal.aborted, false, 'the holder never heard of a loss');
    assert.equal(backend.lease, lease, 'the same lease throughout');
    const other = client();
    assert.equal(await other.tryLock(lockId, { waitMs: 0 }), null, 'still excluded');
    const fresh = await other.lock(id('new'), { timeoutMs: 30_000 });
    assert.ok(fresh.token > lock.token, 'new acquisitions work, tokens go on increasing');
    await fresh.release();
    await lock.release();
  } finally {
    await node.restart();
    await waitFor('the restarted member to be healthy', () => server.healthy(node), { timeoutMs: 60_000 });
  }
}

describe('members killed while a lock is held', () => {
  test('kill -9 of a follower changes nothing for the holder', T, async () => {
    await holdAcross(async () => {
      const leader = await server.leader();
      const follower = server.nodes.find((n) => n !== leader);
      assert.ok(follower);
      return follower;
    });
  });

  test('kill -9 of the leader changes nothing for the holder; a new leader is elected', T, async () => {
    let old: ServerNode | undefined;
    await holdAcross(async () => {
      old = await server.leader();
      assert.ok(old, 'a leader');
      return old;
    });
    await eventually('a leader', async () => (await server.leader()) !== undefined, 60_000, 200);
  });
});

describe('a client cut off from the cluster', () => {
  test('loses the lock with its signal before another client is granted it; fencing rejects it', T, async () => {
    const proxies: FaultProxy[] = await Promise.all(server.nodes.map((n) => faultProxy(n.port)));
    try {
      const url = `etcd://${proxies.map((p) => `127.0.0.1:${p.port}`).join(',')}`;
      const cutOff = client(url, 3_000);
      const lockId = id('partition');
      const res = new FencedResource('init');
      const old = await cutOff.lock(lockId, { ttlMs: 3_000 });
      res.write(old.token, 'old');
      const lost = lossOf(old).then((reason) => ({ reason, at: performance.now() }));
      for (const p of proxies) p.cut();
      const other = client(server.url, 3_000);
      const granted = other.lock(lockId, { timeoutMs: 60_000 }).then((lock) => ({ lock, at: performance.now() }));
      const [loss, next] = await Promise.all([lost, granted]);
      assert.ok(loss.reason instanceof LockLostError, 'the holder is told with LockLostError');
      assert.ok(loss.at < next.at, `loss signalled at ${loss.at.toFixed(0)} before the grant at ${next.at.toFixed(0)}`);
      assert.ok(next.lock.token > old.token);
      res.write(next.lock.token, 'new');
      assert.throws(() => res.write(old.token, 'late'), StaleTokenError);
      await next.lock.release();
    } finally {
      for (const p of proxies) await p.close();
    }
  });
});

describe('a member that stops answering', () => {
  test('SIGSTOP of the member carrying the keep-alive changes nothing for the holder', T, async () => {
    const holderClient = client(server.url, 8_000);
    const lock = await holderClient.lock(id('pause'));
    const backend = await holderClient.backend();
    assert.ok(backend instanceof EtcdBackend);
    const lease = backend.lease;
    assert.ok(lease);
    const node = server.nodes[lease.member];
    assert.ok(node, 'the URL lists the members in the harness order');
    const renewals = lease.renewals;
    node.pause();
    try {
      // Hold across more than a whole lease ttl of silence from that member.
      await unlessLost(lock, extensions(holderClient, lock, 5));
      await eventually('more keep-alives answered than one ttl needs', () => lease.renewals >= renewals + 6, 30_000, 50);
      assert.equal(lock.signal.aborted, false, 'the holder never heard of a loss');
      assert.equal(backend.lease, lease, 'the same lease throughout');
      assert.notEqual(server.nodes[lease.member], node, 'the keep-alive moved to another member');
    } finally {
      node.resume();
    }
    await lock.release();
    await eventually('the resumed member to be healthy', () => server.healthy(node), 60_000, 200);
  });
});

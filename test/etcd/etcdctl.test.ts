/**
 * Key compatibility with etcd's Go `concurrency.Mutex`, checked with Debian's `etcdctl lock`
 * (etcdctl 3.4): both wait in one queue, so each excludes the other; and the guards on the
 * create revision (a stale release never deletes a newer key of the same name).
 */
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { after, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { createLocker, LockLostError } from '../../src/index.js';
import { createEtcdBackend, type EtcdBackend } from '../../src/backends/etcd/index.js';
import { startEtcd } from '../../scripts/servers/etcd.js';
import { lossOf, seamRequest, useServer } from '../helpers.js';

const T = { timeout: 60_000 };
const server = await useServer(() => startEtcd());
const children = new Set<ChildProcess>();
after(() => {
  for (const c of children) c.kill('SIGKILL');
});

/** `etcdctl lock name`: resolves the key it holds once it printed it; SIGINT unlocks. */
function etcdctlLock(name: string): { child: ChildProcess; key: Promise<string> } {
  const child = spawn('etcdctl', [`--endpoints=${server.endpoints}`, 'lock', name], { stdio: ['ignore', 'pipe', 'pipe'] });
  children.add(child);
  child.on('exit', () => children.delete(child));
  const key = new Promise<string>((resolve, reject) => {
    let out = '';
    child.stdout?.setEncoding('utf8');
    child.stdout?.on('data', (d: string) => {
      out += d;
      const line = out.split('\n')[0];
      if (out.includes('\n') && line) resolve(line);
    });
    child.on('exit', (code) => reject(new Error(`etcdctl lock exited (${code}) before holding`)));
  });
  key.catch(() => undefined);
  return { child, key };
}

async function unlock(child: ChildProcess): Promise<void> {
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  child.kill('SIGINT');
  assert.equal(await exited, 0, 'etcdctl unlocked and exited cleanly');
}

const id = (label: string): string => `interop-${label}-${randomBytes(4).toString('hex')}`;

describe('etcdctl lock and locksmith exclude each other', () => {
  test('etcdctl holds: locksmith waits, and gets the lock with a larger token when etcdctl unlocks', T, async () => {
    const name = id('ctl-first');
    const ctl = etcdctlLock(name);
    const key = await ctl.key;
    assert.match(key, new RegExp(`^${name}/[0-9a-f]+$`), 'the Go recipe key: name/leaseHex');
    const locker = createLocker(server.url);
    try {
      assert.equal(await locker.tryLock(name), null, 'locksmith sees the etcdctl holder');
      const state = await locker.inspect(name);
      assert.equal(state.holders.length, 1);
      const ctlToken = state.holders[0]!.token;
      const waiting = locker.lock(name, { timeoutMs: 30_000 });
      await sleep(300);
      await unlock(ctl.child);
      const lock = await waiting;
      assert.ok(lock.token > ctlToken, `${lock.token} > ${ctlToken}`);
      await lock.release();
    } finally {
      await locker.close();
    }
  });

  test('locksmith holds: etcdctl lock waits until locksmith releases', T, async () => {
    const name = id('ls-first');
    const locker = createLocker(server.url);
    try {
      const lock = await locker.lock(name);
      const ctl = etcdctlLock(name);
      let ctlHeld = false;
      void ctl.key.then(() => {
        ctlHeld = true;
      });
      // etcdctl queues behind our key: its key exists, it does not hold.
      for (let i = 0; i < 40 && (await locker.inspect(name)).waiters === 0; i++) await sleep(50);
      assert.equal((await locker.inspect(name)).waiters, 1, 'etcdctl waits in the same queue');
      assert.equal(ctlHeld, false, 'etcdctl does not hold while locksmith does');
      await lock.release();
      const key = await ctl.key;
      assert.match(key, new RegExp(`^${name}/`));
      assert.equal(await locker.tryLock(name), null, 'now etcdctl holds');
      await unlock(ctl.child);
      const again = await locker.tryLock(name, { waitMs: 10_000 });
      assert.ok(again && again.token > lock.token);
      await again.release();
    } finally {
      await locker.close();
    }
  });
});

describe('a key deleted under its holder', () => {
  test('etcdctl del of the held key aborts the signal with not-held at once, not at the next extend', { timeout: 30_000 }, async () => {
    const name = id('del');
    const locker = createLocker(server.url, { autoExtend: false, ttlMs: 120_000 });
    try {
      const lock = await locker.lock(name);
      const lost = lossOf(lock);
      const del = spawn('etcdctl', [`--endpoints=${server.endpoints}`, 'del', '--prefix', `${name}/`], { stdio: 'ignore' });
      assert.equal(await new Promise((resolve) => del.once('exit', resolve)), 0);
      const reason = await lost;
      assert.ok(reason instanceof LockLostError);
      assert.equal(reason.reason, 'not-held');
      const next = await locker.tryLock(name);
      assert.ok(next && next.token > lock.token, 'the lock is free for others');
      await next.release();
    } finally {
      await locker.close();
    }
  });
});

describe('revision guards', () => {
  test("a retried stale release does not delete a newer key of the same name (the lease's key)", T, staleReleaseKeepsNewerKey);

  test('a waiter whose key vanished is not granted on it: it queues again with a new key', T, vanishedWaiterKeyQueuesAgain);

  test('two acquisitions on one lease get distinct keys and exclude each other', T, twoAcquisitionsOnOneLease);
});

async function staleReleaseKeepsNewerKey(): Promise<void> {
  const backend: EtcdBackend = createEtcdBackend(`${server.url}?prefix=guard/`);
  try {
    const lockId = id('stale');
    const first = await backend.tryAcquire(seamRequest(lockId, 'a'));
    assert.ok(first.granted);
    assert.equal(await backend.release(first.grant), true);
    const second = await backend.tryAcquire(seamRequest(lockId, 'b'));
    assert.ok(second.granted);
    assert.equal(second.grant.data.key, first.grant.data.key, 'the same key name (prefix/lockId/leaseHex)');
    assert.ok(second.grant.token > first.grant.token);
    assert.equal(await backend.release(first.grant), false, 'the stale release deletes nothing');
    const state = await backend.inspect(lockId);
    assert.deepEqual(
      state.holders.map((h) => h.token),
      [second.grant.token],
    );
    await backend.extend(second.grant, 5_000);
    assert.equal(await backend.release(second.grant), true);
  } finally {
    await backend.close();
  }
}

async function vanishedWaiterKeyQueuesAgain(): Promise<void> {
  const a = createEtcdBackend(`${server.url}?prefix=guard/`);
  const b = createEtcdBackend(`${server.url}?prefix=guard/`);
  try {
    const lockId = id('vanished');
    const held = await a.tryAcquire(seamRequest(lockId, 'a'));
    assert.ok(held.granted);
    const waiting = await b.tryAcquire(seamRequest(lockId, 'b'));
    assert.equal(waiting.granted, false);
    const ticket = waiting.granted ? undefined : waiting.contended.ticket;
    assert.ok(ticket?.rev !== undefined);
    const oldRev = ticket.rev;
    await a.client.raw.delete().key(ticket.key);
    await a.release(held.grant);
    const again = await b.tryAcquire(seamRequest(lockId, 'b', { ticket }));
    assert.ok(again.granted);
    assert.ok(again.grant.token > oldRev, 'granted on a new key, not on the vanished one');
    assert.deepEqual(
      (await a.inspect(lockId)).holders.map((h) => h.token),
      [again.grant.token],
      'the granted key exists',
    );
    await b.release(again.grant);
  } finally {
    await Promise.all([a.close(), b.close()]);
  }
}

async function twoAcquisitionsOnOneLease(): Promise<void> {
  const backend = createEtcdBackend(`${server.url}?prefix=guard/`);
  try {
    const lockId = id('same-lease');
    const a = await backend.tryAcquire(seamRequest(lockId, 'a'));
    assert.ok(a.granted);
    const b = await backend.tryAcquire(seamRequest(lockId, 'b', { wait: false }));
    assert.equal(b.granted, false);
    assert.equal((await backend.inspect(lockId)).waiters, 0, 'a soft attempt leaves no key behind');
    await backend.release(a.grant);
  } finally {
    await backend.close();
  }
}

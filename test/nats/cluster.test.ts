/**
 * The NATS backend on a real three-node JetStream cluster (bucket replicated three times):
 * a node killed with SIGKILL while a lock is held changes nothing for the holder; a holder
 * cut off from every node (a TCP proxy per node that stops forwarding) hears of its loss
 * before anybody else is granted the lock; a holder process killed with SIGKILL keeps the
 * lock only until its stored lease ends.
 */
import assert from 'node:assert/strict';
import { fork } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { createLocker, LockLostError, type Lock, type Locker } from '../../src/index.js';
import { startNats } from '../../scripts/servers/nats.js';
import { waitFor } from '../../scripts/servers/harness.js';
import { faultProxy, lossOf, useServer, type FaultProxy } from '../helpers.js';

const T = { timeout: 120_000 };
const server = await useServer(() => startNats({ nodes: 3 }));
const hosts = server.nodes.map((n) => `${n.host}:${n.port}`);
const query = '?bucket=cluster&replicas=3&clockSkewMs=100';
const id = (label: string): string => `cluster-${label}-${randomBytes(4).toString('hex')}`;
const open: Locker[] = [];
after(async () => {
  await Promise.allSettled(open.map((l) => l.close()));
});

function client(servers: readonly string[] = hosts, ttlMs = 3_000): Locker {
  const l = createLocker(`nats://${servers.join(',')}${query}`, { ttlMs });
  open.push(l);
  return l;
}

/** Resolve after `lock` was extended `n` more times; reject at once if it is lost meanwhile. */
function extensions(locker: Locker, lock: Lock, n: number): Promise<void> {
  return new Promise((resolve, reject) => {
    let seen = 0;
    const onAbort = (): void => reject(new Error('the holder lost its lock', { cause: lock.signal.reason }));
    const on = (e: { lockId: string }): void => {
      if (e.lockId !== lock.lockId || ++seen < n) return;
      locker.off('extended', on);
      lock.signal.removeEventListener('abort', onAbort);
      resolve();
    };
    locker.on('extended', on);
    lock.signal.addEventListener('abort', onAbort, { once: true });
  });
}

describe('nats: a three-node JetStream cluster', () => {
  test('kill -9 of the node the holder is connected to: the holder keeps its lock, others stay out', T, async () => {
    const victim = server.nodes[0];
    assert.ok(victim);
    // The holder knows the victim first (and the others only to fail over to). Its lease
    // outlasts a failover: a new stream leader is elected within a few seconds.
    const holder = client([`${victim.host}:${victim.port}`, ...hosts.slice(1)], 10_000);
    const lockId = id('kill');
    const lock = await holder.lock(lockId);
    await victim.kill();
    try {
      await extensions(holder, lock, 2);
      const other = client(hosts.slice(1));
      assert.equal(await other.tryLock(lockId), null, 'still excluded');
      const fresh = await other.lock(id('new'), { timeoutMs: 30_000 });
      await fresh.release();
      assert.equal(lock.signal.aborted, false, 'the holder never heard of a loss');
      await lock.release();
      const next = await other.lock(lockId, { timeoutMs: 30_000 });
      assert.ok(next.token > lock.token);
      await next.release();
    } finally {
      await victim.restart();
      await waitFor('the restarted node to be healthy', () => server.healthy(victim), { timeoutMs: 60_000 });
    }
  });

  test('a holder partitioned from every node hears of its loss before another client is granted the lock', T, async () => {
    const proxies: FaultProxy[] = await Promise.all(server.nodes.map((n) => faultProxy(n.port)));
    try {
      const holder = client(proxies.map((p) => `127.0.0.1:${p.port}`));
      const lockId = id('partition');
      const lock = await holder.lock(lockId);
      const events: string[] = [];
      const lost = lossOf(lock).then((reason) => {
        events.push('lost');
        return reason;
      });
      for (const p of proxies) p.cut();
      const other = client();
      const next = await other.lock(lockId, { timeoutMs: 60_000 });
      events.push('granted');
      assert.ok((await lost) instanceof LockLostError);
      assert.deepEqual(events, ['lost', 'granted'], 'the old holder knew first');
      assert.ok(next.token > lock.token);
      await next.release();
    } finally {
      for (const p of proxies) p.heal();
      await Promise.all(proxies.map((p) => p.close()));
    }
  });

  test('a holder process killed with SIGKILL: the lock is granted again once its stored lease ends', T, killedHolderProcess);
});

async function killedHolderProcess(): Promise<void> {
  const lockId = id('crash');
  const child = fork(join(import.meta.dirname, 'holder-child.ts'), [`nats://${hosts.join(',')}${query}`, lockId, '2000'], {
    execArgv: ['--import', 'tsx'],
    stdio: 'inherit',
  });
  const token = await new Promise<bigint>((resolve, reject) => {
    child.once('message', (m: { token: string }) => resolve(BigInt(m.token)));
    child.once('exit', (code) => reject(new Error(`the child exited (${code}) before holding`)));
  });
  child.kill('SIGKILL');
  const other = client();
  assert.equal(await other.tryLock(lockId), null, 'the dead holder still holds until its lease ends');
  const next = await other.lock(lockId, { timeoutMs: 60_000 });
  assert.ok(next.token > token);
  await next.release();
}

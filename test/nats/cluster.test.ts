/**
 * The NATS backend on a real three-node JetStream cluster, its bucket on one node (Debian's
 * nats-server 2.9.10 cannot replicate a compare-and-set safely: docs/backends/nats.md,
 * "Replicas"): a node killed with SIGKILL while a lock is held changes nothing for the
 * holder; a replicated bucket is refused on this server; a holder
 * cut off from every node (a TCP proxy per node that stops forwarding) hears of its loss
 * before anybody else is granted the lock; a holder process killed with SIGKILL keeps the
 * lock only until its stored lease ends.
 */
import assert from 'node:assert/strict';
import { fork } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { createLocker, InvalidArgumentError, LockLostError, type Lock, type Locker } from '../../src/index.js';
import { NatsBackend } from '../../src/backends/nats/index.js';
import { startNats } from '../../scripts/servers/nats.js';
import { waitFor } from '../../scripts/servers/harness.js';
import { faultProxy, lossOf, useServer, type FaultProxy } from '../helpers.js';

const T = { timeout: 120_000 };
const server = await useServer(() => startNats({ nodes: 3 }));
const hosts = server.nodes.map((n) => `${n.host}:${n.port}`);
const query = '?bucket=cluster&clockSkewMs=100';
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
  test(
    'kill -9 of a node the holder is connected to (not the one with the bucket): the holder keeps its lock, others stay out',
    T,
    killNode,
  );

  test('a replicated bucket is refused on a server whose compare-and-set is not atomic', T, async () => {
    const l = createLocker(`nats://${hosts.join(',')}?bucket=replicated&replicas=3`);
    open.push(l);
    await assert.rejects(l.tryLock(id('r3')), (err: unknown) => err instanceof InvalidArgumentError && /2\.9\.21/.test(err.message));
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

/** The name of the node that hosts the bucket's stream (it leads the stream's one replica). */
async function bucketNode(locker: Locker): Promise<{ backend: NatsBackend; host: string | undefined }> {
  const backend = await locker.backend();
  assert.ok(backend instanceof NatsBackend);
  return { backend, host: (await (await backend.connect()).kv.status()).streamInfo.cluster?.leader };
}

async function killNode(): Promise<void> {
  const { host } = await bucketNode(client());
  const others = server.nodes.filter((n) => n.name !== host);
  // The holder knows the two nodes without the bucket: it fails over from one to the other.
  const holder = client(
    others.map((n) => `${n.host}:${n.port}`),
    10_000,
  );
  const lockId = id('kill');
  const lock = await holder.lock(lockId);
  const port = (await (await bucketNode(holder)).backend.connect()).serverPort;
  const victim = others.find((n) => n.port === port);
  assert.ok(victim, `the holder is connected to ${port}`);
  await victim.kill();
  try {
    await extensions(holder, lock, 2);
    const other = client(hosts.filter((h) => h !== `${victim.host}:${victim.port}`));
    assert.equal(await other.tryLock(lockId), null, 'still excluded');
    const fresh = await other.lock(id('new'), { timeoutMs: 30_000 });
    await fresh.release();
    assert.equal(lock.signal.aborted, false, 'the holder never heard of a loss');
    await lock.release();
  } finally {
    await victim.restart();
    await waitFor('the restarted node to be healthy', () => server.healthy(victim), { timeoutMs: 60_000 });
  }
}

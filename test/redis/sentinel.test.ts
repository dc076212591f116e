/**
 * `redis-sentinel://` URLs against a real master, replica and Sentinel: the locker finds
 * the master through Sentinel, selects the database of the path, keeps working after
 * Sentinel promotes the replica, and a wrong master name or a malformed URL says so.
 */
import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { Redis } from 'ioredis';
import { BackendUnavailableError, createLocker, InvalidArgumentError, LockTimeoutError, type Locker } from '../../src/index.js';
import { startRedisSentinel } from '../../scripts/servers/redis-sentinel.js';
import { eventually, useServer, waitingOn } from '../helpers.js';

const T = { timeout: 120_000 };
const server = await useServer(() => startRedisSentinel({ replica: true }));
const sentinelPort = server.sentinel.port;

const lockers: Locker[] = [];
after(async () => {
  await Promise.all(lockers.map((l) => l.close()));
});
function locker(url = server.url, connectTimeoutMs = 10_000): Locker {
  const l = createLocker(url, { connectTimeoutMs });
  lockers.push(l);
  return l;
}

test('two lockers on a redis-sentinel:// URL exclude each other and hand over on release', T, async () => {
  const a = locker();
  const b = locker(`redis-sentinel://127.0.0.1:1,127.0.0.1:${sentinelPort}/${server.masterName}`);
  const first = await a.lock('sentinel:hand-over', { timeoutMs: 10_000 });
  await assert.rejects(b.lock('sentinel:hand-over', { timeoutMs: 0 }), LockTimeoutError);
  const waiting = waitingOn(b, 'sentinel:hand-over');
  const second = b.lock('sentinel:hand-over', { timeoutMs: 60_000 });
  await waiting;
  await first.release();
  const next = await second;
  assert.ok(next.token > first.token);
  await next.release();
});

test('the database in the path is selected on the master', T, async () => {
  const l = locker(`${server.url}/3?prefix=sentinel-db:`);
  const lock = await l.lock('in-db-3');
  const port = await server.masterPort();
  const admin = new Redis({ host: '127.0.0.1', port, db: 3 });
  try {
    assert.ok((await admin.keys('sentinel-db:*')).length > 0, 'the lock keys are in db 3');
    await admin.select(0);
    assert.equal((await admin.keys('sentinel-db:*')).length, 0, 'and not in db 0');
  } finally {
    admin.disconnect();
  }
  await lock.release();
});

test('a wrong master name is a BackendUnavailableError within connectTimeoutMs that says why', T, async () => {
  const l = locker(`redis-sentinel://127.0.0.1:${sentinelPort}/no-such-master`, 1_500);
  await assert.rejects(l.lock('x'), (err: unknown) => {
    assert.ok(err instanceof BackendUnavailableError, String(err));
    // The Sentinel's own answer, not just a timeout.
    assert.match(err.message, /No such master with that name/);
    return true;
  });
});

test('a Sentinel URL without a master name, or with a path too long, is an InvalidArgumentError', T, async () => {
  for (const url of [`redis-sentinel://127.0.0.1:${sentinelPort}`, `redis-sentinel://127.0.0.1:${sentinelPort}/m/0/extra`]) {
    await assert.rejects(locker(url).lock('x'), (err: unknown) => err instanceof InvalidArgumentError && err.message.includes('master'));
  }
});

test(
  'after the master is killed and Sentinel promotes the replica, the same locker locks on the new master and a replicated hold survives',
  T,
  async () => {
    const l = locker();
    const before = await l.lock('sentinel:failover');
    await before.release();
    const holder = await l.lock('sentinel:kept', { ttlMs: 30_000 });
    // The grant must reach the replica before the master dies, or the failover loses it
    // (asynchronous replication: docs/backends/redis.md).
    const master = new Redis({ host: '127.0.0.1', port: await server.masterPort() });
    await eventually('the replica to acknowledge the grant', async () => (await master.call('WAIT', '1', '2000')) === 1, 60_000, 100);
    master.disconnect();
    await server.master.nodes[0]?.kill();
    const replicaPort = server.replica?.nodes[0]?.port;
    await eventually('Sentinel to promote the replica', async () => (await server.masterPort()) === replicaPort, 60_000, 200);
    await eventually(
      'a lock on the promoted master',
      async () => {
        const lock = await l.tryLock('sentinel:failover', { waitMs: 5_000 });
        if (!lock) return false;
        await lock.release();
        return true;
      },
      60_000,
      200,
    );
    const fresh = locker();
    const freshLock = await fresh.lock('sentinel:failover:fresh', { timeoutMs: 10_000 });
    await freshLock.release();
    assert.equal(await fresh.tryLock('sentinel:kept'), null, 'the replicated grant still excludes others');
    await holder.extend();
    assert.equal(holder.held, true, 'and its holder renews it on the new master');
    await holder.release();
    const again = await fresh.tryLock('sentinel:kept');
    assert.ok(again, 'released on the new master');
    await again.release();
  },
);

/**
 * Redis-specific behaviour against real redis-servers: restarts, killed connections, odd
 * lock ids, a user's own client on a (one-node) Redis Cluster, wake-ups without a herd,
 * idle waiters that do not poll, the NOSCRIPT fallback and an unreachable server.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { createServer, type Socket } from 'node:net';
import { Cluster, Redis } from 'ioredis';
import {
  BackendUnavailableError,
  createLocker,
  InvalidArgumentError,
  LockLostError,
  type Lock,
  type Locker,
  type LockerOptions,
} from '../../src/index.js';
import { RedisBackend } from '../../src/backends/redis/index.js';
import { startRedis } from '../../scripts/servers/redis.js';
import { freePort, type RunningServer } from '../../scripts/servers/harness.js';
import { lossOf, waitingOn } from '../helpers.js';

const T = { timeout: 120_000 };

let server: RunningServer;
let admin: Redis;
const lockers: Locker[] = [];

function locker(options?: Partial<LockerOptions>): Locker {
  const l = createLocker(server.url, options);
  lockers.push(l);
  return l;
}

const id = (label: string): string => `redis-test:${label}:${randomBytes(6).toString('hex')}`;

const aborted = lossOf;

/** Calls of one command so far, from INFO commandstats. */
async function calls(command: string): Promise<number> {
  const info = await admin.info('commandstats');
  const m = new RegExp(`cmdstat_${command}:calls=(\\d+)`).exec(info);
  return m ? Number(m[1]) : 0;
}

async function newAdmin(): Promise<Redis> {
  const url = new URL(server.url);
  const r = new Redis({ host: url.hostname, port: Number(url.port), lazyConnect: true, maxRetriesPerRequest: 1 });
  r.on('error', () => undefined);
  await r.connect();
  return r;
}

before(async () => {
  server = await startRedis();
  admin = await newAdmin();
});

after(async () => {
  await Promise.allSettled(lockers.splice(0).map((l) => l.close()));
  admin.disconnect();
  await server.stop();
});

test('a restart that loses every key: the holder learns of the loss, the next acquire works, tokens keep increasing', T, async () => {
  const lockId = id('restart');
  const a = locker({ ttlMs: 1_000 });
  const held = await a.lock(lockId);
  const lost = aborted(held);
  const node = server.nodes[0];
  assert.ok(node);
  await node.kill();
  const reason = await lost;
  assert.ok(reason instanceof LockLostError, `signal reason ${String(reason)}`);
  await node.restart();
  admin.disconnect();
  admin = await newAdmin();
  // The same client (it reconnects by itself) and a new one both get the lock again.
  const again = await a.lock(lockId, { timeoutMs: 30_000 });
  assert.ok(again.token > held.token, `token ${again.token} after restart, ${held.token} before`);
  await again.release();
  const b = locker({ ttlMs: 1_000 });
  const third = await b.lock(lockId, { timeoutMs: 30_000 });
  assert.ok(third.token > again.token);
  await third.release();
});

test(
  'a paused (SIGSTOP) server: the holder’s signal aborts, calls fail with BackendUnavailableError, all works after SIGCONT',
  T,
  async () => {
    const lockId = id('paused');
    const a = locker({ ttlMs: 1_000 });
    const b = createLocker(`${server.url}?commandTimeoutMs=1000`, { ttlMs: 1_000 });
    lockers.push(b);
    // Connected before the pause: what is bounded below is a command, not the connect.
    await (await b.lock(id('warm-up'))).release();
    const held = await a.lock(lockId);
    const lost = aborted(held);
    const node = server.nodes[0];
    assert.ok(node);
    node.pause();
    try {
      const reason = await lost;
      assert.ok(reason instanceof LockLostError, `signal reason ${String(reason)}`);
      await assert.rejects(b.tryLock(lockId), (err: unknown) => err instanceof BackendUnavailableError);
    } finally {
      node.resume();
    }
    const next = await b.lock(lockId, { timeoutMs: 30_000 });
    assert.ok(next.token > held.token);
    await next.release();
  },
);

test('CLIENT KILL of the holder’s connection: it reconnects, keeps renewing and nobody else gets the lock', T, async () => {
  const lockId = id('client-kill');
  const ttlMs = 600;
  const a = locker({ ttlMs });
  const b = locker({ ttlMs });
  const held = await a.lock(lockId);
  // Kill every ordinary connection but the admin's: that includes the holder's.
  const killed = await admin.call('CLIENT', 'KILL', 'TYPE', 'normal', 'SKIPME', 'yes');
  assert.ok(Number(killed) >= 1, `killed ${String(killed)} connections`);
  // Across several ttls the lease survives (renewals resume on the new connection).
  for (let i = 0; i < 6; i++) {
    assert.equal(await b.tryLock(lockId), null, 'another client got a lock whose holder only lost its connection');
    await sleep(ttlMs / 2);
  }
  assert.equal(held.signal.aborted, false);
  await held.release();
  const next = await b.tryLock(lockId, { waitMs: 10_000 });
  assert.ok(next);
  assert.ok(next.token > held.token);
  await next.release();
});

test('CLIENT KILL of the subscriber connection: a waiter is still woken', T, async () => {
  const lockId = id('sub-kill');
  const a = locker({ ttlMs: 30_000 });
  const b = locker({ ttlMs: 30_000 });
  const held = await a.lock(lockId);
  const queued = waitingOn(b, lockId);
  const waiting = b.lock(lockId, { timeoutMs: 60_000 });
  await queued;
  await sleep(50);
  await admin.call('CLIENT', 'KILL', 'TYPE', 'pubsub');
  await held.release();
  const got = await waiting;
  assert.ok(got.token > held.token);
  await got.release();
});

test('an unreachable redis:// URL fails with BackendUnavailableError within the connect bound', T, async () => {
  const port = await freePort();
  const l = createLocker(`redis://127.0.0.1:${port}`, { connectTimeoutMs: 1_000 });
  lockers.push(l);
  await assert.rejects(l.lock(id('unreachable')), (err: unknown) => err instanceof BackendUnavailableError);
  await assert.rejects(l.tryLock(id('unreachable')), (err: unknown) => err instanceof BackendUnavailableError);
});

test('a server that accepts but never answers fails with BackendUnavailableError, not a hang', T, async () => {
  const sockets = new Set<Socket>();
  const silent = createServer((sock) => {
    sockets.add(sock);
    sock.on('error', () => undefined);
  });
  await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
  const address = silent.address();
  const port = typeof address === 'object' && address ? address.port : 0;
  try {
    const l = createLocker(`redis://127.0.0.1:${port}`, { connectTimeoutMs: 1_000 });
    lockers.push(l);
    await assert.rejects(l.lock(id('silent')), (err: unknown) => err instanceof BackendUnavailableError);
  } finally {
    for (const sock of sockets) sock.destroy();
    await new Promise<void>((resolve) => silent.close(() => resolve()));
  }
});

test('SCRIPT FLUSH: the next operation falls back from EVALSHA to EVAL', T, async () => {
  const lockId = id('noscript');
  const a = locker();
  const first = await a.lock(lockId);
  await admin.script('FLUSH');
  await first.release();
  const before = await calls('eval');
  await admin.script('FLUSH');
  const second = await a.lock(lockId);
  assert.ok(second.token > first.token);
  assert.ok((await calls('eval')) > before, 'EVAL was not used after NOSCRIPT');
  await second.release();
});

test('lock ids with spaces, unicode, braces and 1 KiB length are distinct locks', T, async () => {
  const a = locker();
  const b = locker();
  const kib = 'k'.repeat(1_000) + randomBytes(12).toString('hex');
  assert.equal(Buffer.byteLength(kib), 1_024);
  const ids = [
    `with spaces ${randomBytes(4).toString('hex')}`,
    `ключ-锁-鍵-🔒-${randomBytes(4).toString('hex')}`,
    kib,
    `a{b}c-${randomBytes(4).toString('hex')}`,
    `}{-${randomBytes(4).toString('hex')}`,
    `{}-${randomBytes(4).toString('hex')}`,
  ];
  const held: Lock[] = [];
  for (const lockId of ids) {
    const l = await a.lock(lockId);
    held.push(l);
    assert.equal(l.lockId, lockId);
    assert.equal(await b.tryLock(lockId), null, `second holder of '${lockId.slice(0, 40)}'`);
    const state = await b.inspect(lockId);
    assert.equal(state.holders.length, 1);
    assert.equal(state.holders[0]?.ownerId, l.ownerId);
  }
  // Each is its own lock: releasing one frees only that one.
  await held[0]?.release();
  const other = await b.tryLock(ids[0] ?? '');
  assert.ok(other);
  assert.equal(await b.tryLock(ids[1] ?? ''), null);
  await other.release();
  for (const l of held) await l.release();
});

test('the database number and the prefix of a redis:// URL are honoured', T, async () => {
  const url = new URL(server.url);
  const prefix = `p${randomBytes(3).toString('hex')}:`;
  const l = createLocker(`redis://${url.host}/3?prefix=${encodeURIComponent(prefix)}`);
  lockers.push(l);
  const lock = await l.lock('url-lock');
  const db3 = await newAdmin();
  try {
    await db3.select(3);
    const keys = await db3.keys(`${prefix}*`);
    assert.ok(
      keys.some((k) => k.startsWith(`${prefix}{url-lock}`)),
      `keys in db 3: ${keys.join(', ')}`,
    );
    assert.deepEqual(await admin.keys(`${prefix}*`), [], 'keys leaked into db 0');
  } finally {
    db3.disconnect();
  }
  await lock.release();
});

test('a database that is not a number is an InvalidArgumentError', T, async () => {
  const url = new URL(server.url);
  const l = createLocker(`redis://${url.host}/nope`);
  lockers.push(l);
  await assert.rejects(l.tryLock('x'), (err: unknown) => err instanceof InvalidArgumentError);
});

test('one release in a fair queue wakes only the head waiter (no herd)', T, async () => {
  const lockId = id('herd');
  const ttlMs = 60_000; // long: no waiter's fallback timer fires during the case
  const holder = locker({ ttlMs, fair: true });
  const held = await holder.lock(lockId);
  const waiters: Promise<Lock>[] = [];
  const clients: Locker[] = [];
  for (let i = 0; i < 8; i++) {
    const c = locker({ ttlMs, fair: true });
    clients.push(c);
    const queued = waitingOn(c, lockId);
    waiters.push(c.lock(lockId, { timeoutMs: 60_000 }));
    await queued;
  }
  // Every waiter is subscribed and asleep once the queue holds all 8 and attempts stop.
  for (;;) {
    const before = await calls('evalsha');
    await sleep(300);
    if ((await calls('evalsha')) === before + 0 && (await holder.inspect(lockId)).waiters === 8) break;
  }
  const before = await calls('evalsha');
  await held.release();
  const first = await waiters[0];
  assert.ok(first);
  await sleep(500);
  const spent = (await calls('evalsha')) - before;
  // The release, the head's successful attempt; nobody else re-attempted.
  assert.ok(spent <= 3, `${spent} scripts ran after one release (a herd re-attempts once per waiter: 8 here)`);
  // The rest follow in arrival order.
  await first.release();
  for (let i = 1; i < waiters.length; i++) {
    const next = await waiters[i];
    assert.ok(next);
    await next.release();
  }
});

test('idle waiters do not poll: 10 waiters on a held lock send few commands', T, async () => {
  const lockId = id('idle');
  const ttlMs = 30_000;
  const holder = locker({ ttlMs });
  const held = await holder.lock(lockId);
  const c = locker({ ttlMs });
  const pending: Promise<Lock>[] = [];
  for (let i = 0; i < 10; i++) pending.push(c.lock(lockId, { timeoutMs: 60_000 }));
  while ((await holder.inspect(lockId)).waiters < 10) await sleep(20);
  await sleep(200);
  const before = await calls('evalsha');
  await sleep(2_000);
  const spent = (await calls('evalsha')) - before;
  // ttl/3 = 10 s: within 2 s an idle waiter has no reason to ask Redis anything.
  assert.ok(spent <= 2, `${spent} scripts in 2 s from 10 idle waiters`);
  await held.release();
  for (const p of pending) await (await p).release();
});

test('a waiter on an expiring lease wakes when it runs out, not at a poll interval of the ttl', T, async () => {
  const lockId = id('expiry-wake');
  const a = locker({ ttlMs: 800 });
  const b = locker({ ttlMs: 800 });
  const first = await a.lock(lockId);
  // A crash: no renewal, no release.
  const { abandon } = await import('../../src/testing.js');
  await abandon(a);
  const got = await b.lock(lockId, { timeoutMs: 30_000 });
  assert.ok(got.token > first.token);
  await got.release();
});

describe('redis: a user-supplied ioredis client', () => {
  let clusterServer: RunningServer;
  before(async () => {
    clusterServer = await startRedis({ cluster: true });
  });
  after(async () => {
    await clusterServer.stop();
  });

  test('an ioredis Cluster client: locks, waiting, rw and semaphores work in cluster-safe key form', T, () =>
    clusterClientWorks(clusterServer),
  );

  test('every key of a lock shares one hash slot (CLUSTER KEYSLOT), braces in the lock id included', T, async () => {
    const backend = new RedisBackend({
      evalsha: () => Promise.reject(new Error('not connected')),
      eval: () => Promise.reject(new Error('not connected')),
      duplicate: () => {
        throw new Error('not connected');
      },
    });
    const url = new URL(clusterServer.url);
    const clusterAdmin = new Redis({ host: url.hostname, port: Number(url.port), maxRetriesPerRequest: 1 });
    clusterAdmin.on('error', () => undefined);
    for (const lockId of ['plain', 'a{b}c', '}x{', '{}', '{{', 'ünï cødé']) {
      const base = backend.keyBase(lockId);
      const slots = new Set<unknown>();
      for (const s of [':h', ':x', ':t', ':q', ':qx', ':qw', ':qs', ''])
        slots.add(await clusterAdmin.call('CLUSTER', 'KEYSLOT', `${base}${s}`));
      assert.equal(slots.size, 1, `keys of '${lockId}' span slots ${[...slots].join(',')}`);
    }
    clusterAdmin.disconnect();
    assert.notEqual(backend.keyBase('a{b'), backend.keyBase('a{c'));
  });
});

test('a plain ioredis client is left open by close()', T, async () => {
  const client = await newAdmin();
  try {
    const l = createLocker(new RedisBackend(client));
    const lock = await l.lock(id('own-client'));
    await lock.release();
    await l.close();
    assert.equal(await client.ping(), 'PONG');
  } finally {
    client.disconnect();
  }
});

/** Two lockers on ioredis Cluster clients: mutex, hand-off, read-write and semaphore. */
async function clusterClientWorks(clusterServer: RunningServer): Promise<void> {
  const url = new URL(clusterServer.url);
  const nodes = [{ host: url.hostname, port: Number(url.port) }];
  const c1 = new Cluster(nodes, { redisOptions: { maxRetriesPerRequest: 1 } });
  const c2 = new Cluster(nodes, { redisOptions: { maxRetriesPerRequest: 1 } });
  c1.on('error', () => undefined);
  c2.on('error', () => undefined);
  try {
    const a = createLocker(new RedisBackend(c1), { ttlMs: 5_000 });
    const b = createLocker(new RedisBackend(c2), { ttlMs: 5_000 });
    lockers.push(a, b);
    const lockId = id('cluster {tagged}');
    const held = await a.lock(lockId);
    assert.equal(await b.tryLock(lockId), null);
    const waiting = b.lock(lockId, { timeoutMs: 30_000 });
    await sleep(100);
    await held.release();
    const got = await waiting;
    assert.ok(got.token > held.token);
    await got.release();

    const rwA = a.readWriteLock(id('cluster-rw'));
    const r1 = await rwA.read();
    const r2 = await b.readWriteLock(rwA.lockId).read();
    assert.equal(await b.readWriteLock(rwA.lockId).tryWrite(), null);
    await r1.release();
    await r2.release();

    const semId = id('cluster-sem');
    const p1 = await a.semaphore(semId, { permits: 2 }).acquire();
    const p2 = await b.semaphore(semId, { permits: 2 }).acquire();
    assert.equal(await b.semaphore(semId, { permits: 2 }).tryAcquire(), null);
    await p1.release();
    await p2.release();
    await a.close();
    await b.close();
    // The user's clients stay open: the backend closed only its own subscriber.
    assert.equal(await c1.ping(), 'PONG');
  } finally {
    c1.disconnect();
    c2.disconnect();
  }
}

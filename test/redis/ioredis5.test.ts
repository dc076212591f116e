/**
 * The peer range `ioredis ^5.4.0 || ^6`: an application on ioredis 5 passes its own client
 * to `RedisBackend` (which duplicates it for pub/sub), and locks, waits by
 * notification and releases exactly as on ioredis 6. The devDependency `ioredis5` is
 * `npm:ioredis@^5`, so both majors are installed side by side.
 */
import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { Redis as Redis5 } from 'ioredis5';
import { Redis as Redis6 } from 'ioredis';
import { createLocker, LockTimeoutError, type Locker } from '../../src/index.js';
import { RedisBackend, type RedisClientLike } from '../../src/backends/redis/index.js';
import { startRedis } from '../../scripts/servers/redis.js';
import { useServer, waitingOn } from '../helpers.js';

const T = { timeout: 120_000 };
const server = await useServer(() => startRedis());
const port = server.nodes[0]?.port ?? 0;

const clients: { quit(): Promise<unknown> }[] = [];
const lockers: Locker[] = [];
after(async () => {
  await Promise.all(lockers.map((l) => l.close()));
  await Promise.all(clients.map((c) => c.quit()));
});

/** A locker over a user's own client of the given ioredis major. */
function lockerOn(major: 5 | 6): Locker {
  const client = major === 5 ? new Redis5({ host: '127.0.0.1', port }) : new Redis6({ host: '127.0.0.1', port });
  clients.push(client);
  // The assignment is the type test: both majors satisfy the structural client type.
  const like: RedisClientLike = client;
  const locker = createLocker(new RedisBackend(like, { prefix: 'ioredis5-test:' }));
  lockers.push(locker);
  return locker;
}

test('the installed ioredis5 alias really is ioredis 5', async () => {
  const { createRequire } = await import('node:module');
  const version = (createRequire(import.meta.url)('ioredis5/package.json') as { version: string }).version;
  assert.match(version, /^5\./);
});

test('a user-supplied ioredis 5 client locks, waits by notification and hands over on release', T, async () => {
  const a = lockerOn(5);
  const b = lockerOn(5);
  const first = await a.lock('account:5', { timeoutMs: 10_000 });
  assert.equal(first.held, true);
  await assert.rejects(b.lock('account:5', { timeoutMs: 0 }), LockTimeoutError);
  const waiting = waitingOn(b, 'account:5');
  const second = b.lock('account:5', { timeoutMs: 60_000 });
  await waiting;
  await first.release();
  const next = await second;
  assert.equal(next.held, true);
  assert.ok(next.token > first.token, 'the fencing token increases across the hand-over');
  await next.release();
});

test('ioredis 5 and ioredis 6 clients exclude each other on the same lock', T, async () => {
  const on5 = lockerOn(5);
  const on6 = lockerOn(6);
  await on5.withLock('mixed', async () => {
    assert.equal(await on6.tryLock('mixed'), null);
  });
  const lock = await on6.tryLock('mixed');
  assert.ok(lock, 'free again after the ioredis 5 holder released');
  await lock.release();
});

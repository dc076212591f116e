/**
 * A release whose reply is the message it sent a waiter of its own process delivers it to that
 * waiter itself, once `release()` resolved, instead of leaving it to the pub/sub message alone
 * (docs/backends/redis.md, "Waiting by notification"): a wake-up, or a hand-off held on receipt. Here the waiter's subscriber never
 * delivers a message, so only that wake-up can end its wait before its next scheduled re-check.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { createLocker, LockTimeoutError, type Locker } from '../../src/index.js';
import { RedisBackend, type RedisClientLike } from '../../src/backends/redis/index.js';
import type { RedisSubscriberClient } from '../../src/backends/redis-wire/clients.js';
import { startRedis } from '../../scripts/servers/redis.js';
import type { RunningServer } from '../../scripts/servers/harness.js';
import { waitingOn } from '../helpers.js';

let server: RunningServer;
const lockers: Locker[] = [];

before(async () => {
  server = await startRedis();
});

after(async () => {
  await Promise.allSettled(lockers.map((l) => l.close()));
  await server.stop();
});

/** A subscriber that subscribes, answers pings and reconnects, but never hands a message on. */
function deaf(url: string): RedisSubscriberClient {
  const sub = new Redis(url);
  const wrapped: RedisSubscriberClient = {
    subscribe: (...channels) => sub.subscribe(...channels),
    unsubscribe: (...channels) => sub.unsubscribe(...channels),
    ping: () => sub.ping(),
    on: (event: string, listener: (...args: unknown[]) => void) => {
      if (event !== 'message') sub.on(event, listener);
      return wrapped;
    },
    disconnect: (reconnect?: boolean) => sub.disconnect(reconnect),
    quit: () => sub.quit(),
  } as RedisSubscriberClient;
  return wrapped;
}

function locker(client: RedisClientLike | string): Locker {
  const l = createLocker(typeof client === 'string' ? client : new RedisBackend(client, { ownsClient: true }), { ttlMs: 30_000 });
  lockers.push(l);
  return l;
}

for (const fair of [false, true])
  test(
    `a ${fair ? 'fair' : 'non-fair'} waiter of the releasing process gets the lock without its message`,
    { timeout: 30_000 },
    async () => {
      await withoutMessage(fair);
    },
  );

/** A waiter whose subscriber never delivers a message, behind a holder of the same process. */
async function withoutMessage(fair: boolean): Promise<void> {
  const lockId = `local-wake:${fair ? 'f' : 'n'}:${randomBytes(6).toString('hex')}`;
  const commands = new Redis(server.url);
  const waiter = locker({
    evalsha: (sha, n, ...args) => commands.evalsha(sha, n, ...args),
    eval: (src, n, ...args) => commands.eval(src, n, ...args),
    duplicate: () => deaf(server.url),
    disconnect: () => commands.disconnect(),
  });
  const holder = locker(server.url);
  // A first wait subscribes the waiter's inbox: the wait below then sleeps as soon as its
  // attempt is refused, before the `waiting` event's listener runs (no round trip between).
  const other = await holder.lock(`${lockId}:other`);
  await assert.rejects(waiter.lock(`${lockId}:other`, { timeoutMs: 100 }), LockTimeoutError);
  await other.release();
  const held = await holder.lock(lockId, { fair });
  const waiting = waitingOn(waiter, lockId);
  // With a 30 s ttl the waiter's next re-check of its own is 10 s away: past this bound.
  const p = waiter.lock(lockId, { timeoutMs: 5_000, fair });
  await waiting;
  await held.release();
  const got = await p;
  assert.equal(got.held, true);
  await got.release();
}

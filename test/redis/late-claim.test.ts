/**
 * A fair waiter whose command connection is slow (its replies come later than the claim window
 * it would hold on receipt) is handed the lock: it must hold it for its ttl, as an ordinary
 * attempt over the same connection does, and not lose it to a claim reply that came "late"
 * while the server granted the full ttl (which would leave the lock blocked for that ttl).
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { createLocker, type Locker } from '../../src/index.js';
import { RedisBackend, type RedisClientLike } from '../../src/backends/redis/index.js';
import { ACQUIRE, CLAIM } from '../../src/backends/redis/scripts.js';
import { startFaultProxy, type FaultProxy } from '../../src/testing.js';
import { startRedis } from '../../scripts/servers/redis.js';
import type { RunningServer } from '../../scripts/servers/harness.js';
import { eventually } from '../helpers.js';

/** One-way delay of the slow waiter's commands (its pub/sub connection is not slowed). */
const LATENCY_MS = 700;

let server: RunningServer;
let proxy: FaultProxy;
const lockers: Locker[] = [];

before(async () => {
  server = await startRedis();
  proxy = await startFaultProxy({ targetPort: Number(new URL(server.url).port), mode: 'latency', latencyMs: LATENCY_MS });
});

after(async () => {
  await Promise.allSettled(lockers.map((l) => l.close()));
  await proxy.close();
  await server.stop();
});

/** A locker of {@link slowCommands}, and how many full ACQUIRE replies it has heard. */
interface SlowLocker {
  readonly locker: Locker;
  readonly attempts: () => number;
}

/**
 * A locker whose commands go through `via` (the slow proxy) and whose wake-ups come directly.
 * It counts the full ACQUIRE replies it hears, so that a test can change the proxy only once
 * the waiter's re-check (its second ACQUIRE, after it subscribed) has come back and it sleeps:
 * a re-check still in flight when the proxy slows would take the hand-off by itself, or make
 * the waiter claim with its attempt, and the case under test would not happen.
 */
async function slowCommands(via: FaultProxy = proxy, ttlMs = 10_000): Promise<SlowLocker> {
  const commands = new Redis(`redis://${via.address}`, { lazyConnect: true });
  await commands.connect();
  let attempts = 0;
  const counted = <T>(acquire: boolean, reply: Promise<T>): Promise<T> => (acquire ? reply.then((v) => ((attempts += 1), v)) : reply);
  const client: RedisClientLike = {
    evalsha: (sha, n, ...args) => counted(sha === ACQUIRE.sha, commands.evalsha(sha, n, ...args)),
    eval: (src, n, ...args) => counted(src === ACQUIRE.source, commands.eval(src, n, ...args)),
    duplicate: () => new Redis(server.url),
    disconnect: () => commands.disconnect(),
  };
  const locker = createLocker(new RedisBackend(client, { ownsClient: true, commandTimeoutMs: 10_000 }), { ttlMs });
  lockers.push(locker);
  return { locker, attempts: () => attempts };
}

/** Resolve once `b`, queued, has heard its re-check's reply and sleeps until a message or its cap. */
async function asleep(b: SlowLocker, lockId: string, a: Locker): Promise<void> {
  await eventually('b queued', async () => (await a.inspect(lockId)).waiters === 1, 10_000);
  await eventually('b re-checked after subscribing', () => b.attempts() >= 2, 10_000);
}

test(
  'a hand-off to a waiter with slow replies holds for its ttl, and its release frees the lock at once',
  { timeout: 60_000 },
  async () => {
    const lockId = `late-claim:${randomBytes(6).toString('hex')}`;
    const a = createLocker(server.url, { ttlMs: 10_000 });
    lockers.push(a);
    const b = await slowCommands();
    const held = await a.lock(lockId, { fair: true });
    const waiting = b.locker.lock(lockId, { fair: true, timeoutMs: 30_000 });
    // b's re-check took one slow round trip: it will claim with an attempt.
    await asleep(b, lockId, a);
    await held.release();
    const got = await waiting;
    // Longer than a hold on receipt would vouch for plus its slow claim reply.
    await sleep(3 * LATENCY_MS + 1_000);
    assert.equal(got.signal.aborted, false, `lost: ${String(got.signal.reason)}`);
    await got.release();
    const next = await a.tryLock(lockId);
    assert.ok(next, 'the lock is free after the release');
    await next.release();
  },
);

test('a claim whose reply comes after the hold on receipt ran out gives the lock back', { timeout: 60_000 }, async () => {
  const lockId = `late-claim-back:${randomBytes(6).toString('hex')}`;
  // Fast while b queues (so it holds on receipt), slow from the release on.
  const turn = await startFaultProxy({ targetPort: Number(new URL(server.url).port), mode: 'pass' });
  try {
    const a = createLocker(server.url, { ttlMs: 20_000 });
    lockers.push(a);
    const b = await slowCommands(turn, 20_000);
    const held = await a.lock(lockId, { fair: true });
    const waiting = b.locker.lock(lockId, { fair: true, timeoutMs: 30_000 });
    // Its re-check answered fast: b will hold on receipt. Slowing the proxy before that reply
    // came back was the race (docs/backends/redis.md, "Waiting by notification").
    await asleep(b, lockId, a);
    // The claim must not spend its round trips on NOSCRIPT: load it as an earlier claim would have.
    const admin = new Redis(server.url);
    await admin.script('LOAD', CLAIM.source);
    admin.disconnect();
    turn.setMode('latency', 1_000);
    await held.release();
    const got = await waiting;
    assert.equal(b.attempts(), 2, 'b held on receipt, not by a third attempt');
    // Its claim lands within the window but answers after what b held on receipt: b's lock
    // is lost (its validity ran out unconfirmed) and the full lease the claim took is given
    // back, not left to block the lock for 20 s.
    await eventually('b lost the lock', () => got.signal.aborted, 10_000);
    await eventually(
      'a takes the lock again',
      async () => (await a.tryLock(lockId).then((l) => l?.release().then(() => true))) === true,
      10_000,
      100,
    );
    // Closed before its proxy, or its command connection would retry the closed port.
    await b.locker.close();
  } finally {
    await turn.close();
  }
});

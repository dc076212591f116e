/**
 * What a fair hand-off message may grant, driven through the Backend seam against a real
 * Redis: the waiter holds on receipt only for what the release script proved to it (a message
 * anyone could publish grants nothing), and a head that was handed the lock keeps others out
 * for its lockDelay after the claim window, as a holder that went silent would.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import type { AcquireRequest, Backend, Grant } from '../../src/backend.js';
import { createBackend, type RedisTicket } from '../../src/backends/redis/index.js';
import { CLAIM_MS } from '../../src/backends/redis/scripts.js';
import { startRedis } from '../../scripts/servers/redis.js';
import type { RunningServer } from '../../scripts/servers/harness.js';
import { seamRequest } from '../helpers.js';

const T = { timeout: 60_000 };
let server: RunningServer;
let admin: Redis;
const backends: Backend[] = [];

async function backend(): Promise<Backend> {
  const b = await createBackend(new URL(server.url), { connectTimeoutMs: 10_000 });
  backends.push(b);
  return b;
}

function request(lockId: string, over: Partial<AcquireRequest> = {}): AcquireRequest {
  return seamRequest(lockId, randomBytes(20).toString('base64url'), over);
}

/** a holds `lockId`; b (`over`) queues, subscribes, re-checks and sleeps until a message. */
async function sleepingBehind(lockId: string, over: Partial<AcquireRequest> = {}) {
  const a = await backend();
  const b = await backend();
  const r = await a.tryAcquire(request(lockId));
  assert.ok(r.granted);
  const held: Grant = r.grant;
  const reqB = request(lockId, over);
  const first = await b.tryAcquire(reqB);
  assert.ok(!first.granted);
  await b.waitForChange(lockId, first.contended.ticket, new AbortController().signal);
  const second = await b.tryAcquire({ ...reqB, ticket: first.contended.ticket });
  assert.ok(!second.granted);
  const ticket = second.contended.ticket as RedisTicket;
  const woken = b.waitForChange(lockId, ticket, new AbortController().signal);
  return { a, b, held, reqB, ticket, woken };
}

before(async () => {
  server = await startRedis();
  admin = new Redis(server.url, { maxRetriesPerRequest: 1 });
  admin.on('error', () => undefined);
});

after(async () => {
  await Promise.allSettled(backends.map((b) => b.close()));
  admin.disconnect();
  await server.stop();
});

describe('redis: what a hand-off message may grant', () => {
  test('a forged hand-off message on a waiter inbox grants nothing while another client holds', T, async () => {
    const lockId = `forged:${randomBytes(6).toString('hex')}`;
    const { a, b, held, reqB, ticket, woken } = await sleepingBehind(lockId);
    // Anyone allowed to PUBLISH can send this: a low token and a window a minute long.
    const clientId = ticket.waiterId.split('.')[0] ?? '';
    await admin.publish(`locksmith:w:${clientId}`, `${ticket.waiterId}|7|${ticket.serverMs + 60_000}`);
    await woken;
    const r = await b.tryAcquire({ ...reqB, ticket });
    assert.equal(r.granted, false, `granted by a forged message: ${r.granted ? `token ${r.grant.token}, ${r.grant.ttlMs} ms` : ''}`);
    const state = await a.inspect(lockId);
    assert.equal(state.holders[0]?.ownerId, held.ownerId, 'the holder still holds');
    await b.cancel(reqB, r.granted ? undefined : (r.contended.ticket as RedisTicket));
    assert.equal(await a.release(held), true);
  });

  test(
    'even with the attempt secret, a message grants no more than the claim window and no token at or below the last seen',
    T,
    async () => {
      const lockId = `bounded:${randomBytes(6).toString('hex')}`;
      const { a, b, held, reqB, ticket, woken } = await sleepingBehind(lockId);
      const clientId = ticket.waiterId.split('.')[0] ?? '';
      const channel = `locksmith:w:${clientId}`;
      // A token the holder already has: never a grant, whatever else the message says.
      await admin.publish(channel, `${ticket.waiterId}|${ticket.lastToken}|${ticket.serverMs + 60_000}|${ticket.secret}`);
      await woken;
      const low = await b.tryAcquire({ ...reqB, ticket });
      assert.equal(low.granted, false, 'granted a token at the last one seen');
      assert.ok(!low.granted);
      const next = low.contended.ticket as RedisTicket;
      // A window a minute long: what is held on receipt is at most the claim window.
      const wake = b.waitForChange(lockId, next, new AbortController().signal);
      await admin.publish(channel, `${next.waiterId}|${next.lastToken + 1n}|${next.serverMs + 60_000}|${next.secret}`);
      await wake;
      const long = await b.tryAcquire({ ...reqB, ticket: next });
      assert.ok(long.granted, 'a message with the secret and a higher token is held on receipt');
      assert.ok(long.grant.ttlMs <= CLAIM_MS, `held ${long.grant.ttlMs} ms on receipt (claim window ${CLAIM_MS} ms)`);
      // Its claim finds no hand-off on the server (a still holds): the hold is lost at once.
      await assert.rejects(long.grant.confirmation ?? Promise.resolve());
      assert.equal(await a.release(held), true);
    },
  );

  test('a head handed the lock keeps it blocked for the claim window plus its lockDelay, claimed or not', T, async () => {
    const lockId = `handoff-delay:${randomBytes(6).toString('hex')}`;
    const { a, held, woken } = await sleepingBehind(lockId, { lockDelayMs: 3_000 });
    assert.equal(await a.release(held), true);
    const releasedAt = performance.now();
    await woken;
    // b may hold on receipt; its claim never lands (it went silent): to the others it is a
    // holder that vanished, whose lockDelay applies when its window ends.
    await sleep(CLAIM_MS + 300 - (performance.now() - releasedAt));
    const c = await a.tryAcquire(request(lockId, { wait: false, fair: false }));
    assert.equal(c.granted, false, "granted right after the claim window, within the head's lockDelay");
  });
});

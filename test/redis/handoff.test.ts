/**
 * The fair hand-off, driven step by step through the Backend seam against a real Redis: a
 * release grants the lock to the fair head waiter on the server; the waiter collects it
 * (from the message or from its own racing attempt), or gives it back when it cancels.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { randomBytes } from 'node:crypto';
import type { AcquireRequest, Backend, Grant } from '../../src/backend.js';
import { createBackend } from '../../src/backends/redis/index.js';
import type { RedisTicket } from '../../src/backends/redis/backend.js';
import { LockLostError } from '../../src/errors.js';
import { CLAIM_MS } from '../../src/backends/redis/scripts.js';
import { lockKeys } from '../../src/backends/redis-wire/keys.js';
import { startRedis } from '../../scripts/servers/redis.js';
import type { RunningServer } from '../../scripts/servers/harness.js';
import { Redis } from 'ioredis';
import { eventually, seamRequest } from '../helpers.js';
import { createLocker } from '../../src/index.js';
import { startFaultProxy } from '../../src/testing.js';

const T = { timeout: 60_000 };
let server: RunningServer;
const backends: Backend[] = [];

async function backend(): Promise<Backend> {
  const b = await createBackend(new URL(server.url), { connectTimeoutMs: 10_000 });
  backends.push(b);
  return b;
}

function request(lockId: string, over: Partial<AcquireRequest> = {}): AcquireRequest {
  return seamRequest(lockId, randomBytes(20).toString('base64url'), over);
}

async function grantOf(b: Backend, req: AcquireRequest): Promise<Grant> {
  const r = await b.tryAcquire(req);
  assert.ok(r.granted, 'expected a grant');
  return r.grant;
}

async function ticketOf(b: Backend, req: AcquireRequest): Promise<unknown> {
  const r = await b.tryAcquire(req);
  assert.ok(!r.granted, 'expected contention');
  assert.ok(r.contended.ticket !== undefined);
  return r.contended.ticket;
}

let admin: Redis;

/** What {@link sleepingBehind} sets up: a holds, b sleeps in line waiting for a message. */
interface Line {
  readonly a: Backend;
  readonly b: Backend;
  readonly held: Grant;
  readonly reqB: AcquireRequest;
  readonly ticket: RedisTicket;
  readonly woken: Promise<void>;
}

/** a holds `lockId`; b (fair unless `fair` is false) queues, subscribes, re-checks and goes to sleep until a message. */
async function sleepingBehind(lockId: string, fair = true): Promise<Line> {
  const a = await backend();
  const b = await backend();
  const held = await grantOf(a, request(lockId));
  const reqB = request(lockId, { fair });
  let ticket = await ticketOf(b, reqB);
  // The first wait subscribes and returns for a re-check; the second sleeps until a message.
  await b.waitForChange(lockId, ticket, new AbortController().signal);
  ticket = await ticketOf(b, { ...reqB, ticket });
  const woken = b.waitForChange(lockId, ticket, new AbortController().signal);
  return { a, b, held, reqB, ticket: ticket as RedisTicket, woken };
}

/** Scripts run so far (INFO commandstats). */
async function evalshaCalls(): Promise<number> {
  const m = /cmdstat_evalsha:calls=(\d+)/.exec(await admin.info('commandstats'));
  return m ? Number(m[1]) : 0;
}

before(async () => {
  server = await startRedis();
  const url = new URL(server.url);
  admin = new Redis({ host: url.hostname, port: Number(url.port), maxRetriesPerRequest: 1 });
  admin.on('error', () => undefined);
});

after(async () => {
  await Promise.allSettled(backends.map((b) => b.close()));
  admin.disconnect();
  await server.stop();
});

for (const fair of [true, false])
  test(
    `the ${fair ? 'fair' : 'non-fair'} head waiter holds on receipt of the hand-off message and claims its full ttl in the background`,
    T,
    async () => {
      await holdsOnReceipt(fair);
    },
  );

async function holdsOnReceipt(fair: boolean): Promise<void> {
  const lockId = `handoff:${randomBytes(6).toString('hex')}`;
  const { a, b, held, reqB, ticket, woken } = await sleepingBehind(lockId, fair);
  assert.equal(await a.release(held), true);
  await woken;
  // Handed over on the server: a newcomer cannot take it before b claims it.
  assert.equal(await a.tryAcquire(request(lockId, { wait: false, fair: false })).then((r) => r.granted), false);
  const scriptsBefore = await evalshaCalls();
  const got = await grantOf(b, { ...reqB, ticket });
  assert.equal(got.reentered, false);
  assert.ok(got.token > held.token);
  // Held on receipt: it vouches for what is left of the claim window, and confirms the rest.
  assert.ok(got.confirmation, 'granted from the message, with the claim in flight');
  assert.ok(got.ttlMs <= CLAIM_MS && got.ttlMs >= CLAIM_MS / 2, `vouched ${got.ttlMs} ms of the claim window`);
  assert.deepEqual(await got.confirmation, { ttlMs: reqB.ttlMs });
  assert.equal((await evalshaCalls()) - scriptsBefore, 1, 'claiming the hand-off took one script');
  const state = await a.inspect(lockId);
  assert.equal(state.holders.length, 1);
  assert.equal(state.holders[0]?.ownerId, reqB.ownerId);
  assert.equal(state.holders[0]?.count, 1);
  assert.ok((state.holders[0]?.expiresInMs ?? 0) > 5_000, 'the claim moved the expiry to the full ttl');
  assert.equal(await b.release(got), true);
  assert.equal((await a.inspect(lockId)).holders.length, 0);
}

test('a claim of a hand-off that is gone fails, and the grant held on receipt is then lost', T, async () => {
  const lockId = `handoff-gone:${randomBytes(6).toString('hex')}`;
  const { a, b, held, reqB, ticket, woken } = await sleepingBehind(lockId);
  assert.equal(await a.release(held), true);
  await woken;
  // The handed hold disappears before b's claim lands (a flushed server, a forced unlock).
  const [h, x] = lockKeys('locksmith:', lockId);
  // (A sole holder has no expiry index `x`: docs/backends/redis.md, "How it works".)
  assert.ok((await admin.del(h, x)) >= 1, 'the handed hold was there');
  const got = await grantOf(b, { ...reqB, ticket });
  await assert.rejects(got.confirmation ?? Promise.resolve(), (e: unknown) => e instanceof LockLostError && e.reason === 'not-held');
  assert.equal(await b.release(got), false);
});

test('a hand-off message whose window had ended before the last attempt was answered grants nothing', T, async () => {
  const lockId = `handoff-stale:${randomBytes(6).toString('hex')}`;
  const { a, b, held, reqB, ticket, woken } = await sleepingBehind(lockId);
  // A message that was late (a slow subscriber): its window ended 1 ms before the server
  // answered b's last attempt, so whatever it handed over may be someone else's by now. It
  // carries the attempt's secret and a token above the last one: only its window is wrong.
  const clientId = ticket.waiterId.split('.')[0] ?? '';
  const late = `${ticket.waiterId}|${ticket.lastToken + 1n}|${ticket.serverMs - 1}|${ticket.secret}`;
  await admin.publish(`locksmith:w:${clientId}`, late);
  await woken;
  const r = await b.tryAcquire({ ...reqB, ticket });
  assert.equal(r.granted, false, 'a stale hand-off message must not grant while a holds the lock');
  assert.equal(await a.release(held), true);
});

test('a head that never claims its hand-off is skipped within the claim window, not its ttl', T, async () => {
  const lockId = `handoff-ghost:${randomBytes(6).toString('hex')}`;
  const a = await backend();
  const ghost = await backend();
  const c = await backend();
  const ttlMs = 60_000;
  const held = await grantOf(a, request(lockId, { ttlMs }));
  // The ghost queues, then never attempts again (its process hung or died).
  await ticketOf(ghost, request(lockId, { ttlMs }));
  const reqC = request(lockId, { ttlMs });
  let ticket = await ticketOf(c, reqC);
  // c subscribes, re-checks and goes to sleep before the release: a's hold then had a whole
  // ttl to run, so only the release's message can tell c to look again sooner.
  await c.waitForChange(lockId, ticket, new AbortController().signal);
  ticket = await ticketOf(c, { ...reqC, ticket });
  const sleeping = c.waitForChange(lockId, ticket, new AbortController().signal);
  const t0 = performance.now();
  assert.equal(await a.release(held), true);
  const handedTo = (await a.inspect(lockId)).holders[0]?.ownerId;
  assert.notEqual(handedTo, reqC.ownerId, 'the lock was handed to the ghost first');
  await sleeping;
  for (;;) {
    const r = await c.tryAcquire({ ...reqC, ticket });
    if (r.granted) {
      await c.release(r.grant);
      break;
    }
    ticket = r.contended.ticket;
    await c.waitForChange(lockId, ticket, new AbortController().signal);
  }
  const skippedMs = performance.now() - t0;
  assert.ok(skippedMs < CLAIM_MS + 1_000, `the unclaimed hand-off blocked the next waiter ${skippedMs.toFixed(0)} ms`);
});

test('an attempt that races the hand-off message claims the hold, not a re-entry', T, async () => {
  const lockId = `handoff-race:${randomBytes(6).toString('hex')}`;
  const a = await backend();
  const b = await backend();
  const held = await grantOf(a, request(lockId));
  const reqB = request(lockId);
  const ticket = await ticketOf(b, reqB);
  // No waitForChange: b's inbox is not even subscribed, so only its own attempt can tell it.
  assert.equal(await a.release(held), true);
  const got = await grantOf(b, { ...reqB, ticket });
  assert.equal(got.reentered, false);
  assert.equal((await a.inspect(lockId)).holders[0]?.count, 1);
  assert.equal(await b.release(got), true);
  const c = await grantOf(a, request(lockId, { wait: false }));
  assert.ok(c.token > got.token);
  await a.release(c);
});

test('a waiter that gives up after the lock was handed to it gives it back to the next in line', T, async () => {
  const lockId = `handoff-cancel:${randomBytes(6).toString('hex')}`;
  const a = await backend();
  const b = await backend();
  const c = await backend();
  const held = await grantOf(a, request(lockId));
  const reqB = request(lockId);
  const ticketB = await ticketOf(b, reqB);
  const reqC = request(lockId);
  const ticketC = await ticketOf(c, reqC);
  assert.equal(await a.release(held), true);
  // The lock went to b on the server; b abandons its acquisition.
  assert.equal((await a.inspect(lockId)).holders[0]?.ownerId, reqB.ownerId);
  await b.cancel(reqB, ticketB);
  // ...and it passed on to c, the next fair waiter.
  const state = await a.inspect(lockId);
  assert.equal(state.holders.length, 1);
  assert.equal(state.holders[0]?.ownerId, reqC.ownerId);
  const got = await grantOf(c, { ...reqC, ticket: ticketC });
  assert.equal(await c.release(got), true);
  assert.equal((await a.inspect(lockId)).holders.length, 0);
});

test('a release returns after its own round trip, not after a waiter of its process woke up', T, async () => {
  // b's connections come 20 ms later than a's (a proxy): a release that waited for b's
  // wake-up, as releases once did for a waiter of their own process, would resolve after b held.
  const port = Number(new URL(server.url).port);
  const proxy = await startFaultProxy({ targetPort: port, mode: 'latency', latencyMs: 20 });
  const a = createLocker(server.url, { ttlMs: 10_000 });
  const b = createLocker(`redis://${proxy.address}`, { ttlMs: 10_000 });
  try {
    const lockId = `same-process:${randomBytes(6).toString('hex')}`;
    const rounds = 10;
    let first = 0;
    for (let i = 0; i < rounds; i++) {
      const held = await a.lock(lockId, { fair: i % 2 === 0 });
      let got = false;
      const waiting = b.lock(lockId, { fair: i % 2 === 0 }).then((l) => ((got = true), l));
      await eventually('b queued', async () => (await a.inspect(lockId)).waiters === 1, 10_000, 2);
      await held.release();
      if (got) first += 1;
      await (await waiting).release();
    }
    // A stall of this process longer than the proxy's delay could let b's wake-up in first.
    assert.ok(first <= 2, `the waiter held before the release resolved in ${first} of ${rounds} rounds`);
  } finally {
    await a.close();
    await b.close();
    await proxy.close();
  }
});

test("a releaser's next acquire lets the waiter of its process it woke go first (non-fair, no barging in a hot loop)", T, async () => {
  // An acquire sent right after the release, before b's wake-up was read, would take the lock
  // back ahead of b's woken attempt (in about half the rounds when both read one loopback).
  const a = createLocker(server.url, { ttlMs: 10_000 });
  const b = createLocker(server.url, { ttlMs: 10_000 });
  try {
    const lockId = `no-barging:${randomBytes(6).toString('hex')}`;
    const rounds = 20;
    let bFirst = 0;
    for (let i = 0; i < rounds; i++) {
      const held = await a.lock(lockId);
      const order: string[] = [];
      const waiting = b.lock(lockId).then((l) => (order.push('b'), l));
      await eventually('b queued', async () => (await a.inspect(lockId)).waiters === 1, 10_000, 2);
      await held.release();
      const again = a.lock(lockId).then((l) => (order.push('a'), l));
      const first = await Promise.race([waiting, again]);
      if (order[0] === 'b') bFirst += 1;
      await first.release();
      await (await (first === (await waiting) ? again : waiting)).release();
    }
    assert.ok(bFirst >= rounds - 3, `the woken waiter got the lock first in ${bFirst} of ${rounds} rounds`);
  } finally {
    await a.close();
    await b.close();
  }
});

test('a non-fair mutex waiter is handed the lock by the release too: a newcomer cannot take it in between', T, async () => {
  const lockId = `nonfair-handoff:${randomBytes(6).toString('hex')}`;
  const a = await backend();
  const b = await backend();
  const held = await grantOf(a, request(lockId, { fair: false }));
  const reqB = request(lockId, { fair: false });
  const ticket = await ticketOf(b, reqB);
  assert.equal(await a.release(held), true);
  assert.equal((await a.inspect(lockId)).holders[0]?.ownerId, reqB.ownerId);
  const newcomer = await a.tryAcquire(request(lockId, { fair: false, wait: false }));
  assert.equal(newcomer.granted, false);
  const got = await grantOf(b, { ...reqB, ticket });
  assert.equal(await b.release(got), true);
});

test('a non-fair reader is woken, not handed the lock (a newcomer may take it first)', T, async () => {
  const lockId = `nonfair-reader:${randomBytes(6).toString('hex')}`;
  const a = await backend();
  const b = await backend();
  const held = await grantOf(a, request(lockId, { kind: 'write', fair: false }));
  await ticketOf(b, request(lockId, { kind: 'read', fair: false }));
  assert.equal(await a.release(held), true);
  assert.equal((await a.inspect(lockId)).holders.length, 0);
  const newcomer = await grantOf(a, request(lockId, { kind: 'write', fair: false, wait: false }));
  await a.release(newcomer);
});

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { randomBytes } from 'node:crypto';
import { createLocker, LockLostError } from '../../src/index.js';
import { lossGuardMs, validityDeadline } from '../../src/lease.js';
import { FaultyBackend } from './faulty.js';
import { lossOf } from '../helpers.js';

const table = (): string => `unit-${randomBytes(4).toString('hex')}`;

const lostReason = lossOf;

test('validity is counted from the send time minus the drift allowance', () => {
  assert.equal(validityDeadline(1_000, 10_000, 0.01), 1_000 + 10_000 - (100 + 2));
  assert.equal(validityDeadline(0, 300, 0), 298);
  assert.ok(lossGuardMs(300) >= 5 && lossGuardMs(300) < 300);
  assert.equal(lossGuardMs(1_000_000), 1_000);
});

test('an unreachable backend during renewal: the signal aborts (expired) before validUntil', async () => {
  const backend = new FaultyBackend(table());
  const locker = createLocker(backend, { ttlMs: 300 });
  const lock = await locker.lock('a');
  backend.extendError = new Error('connection refused');
  const validUntil = lock.validUntil;
  const reason = await lostReason(lock);
  assert.ok(performance.now() <= validUntil + 0.001 || reason instanceof LockLostError);
  assert.ok(reason instanceof LockLostError);
  assert.equal(reason.reason, 'expired');
  assert.ok(backend.extendCalls >= 2, 'renewal was retried while validity lasted');
  await locker.close();
});

test('a renewal refused by the backend (not held) aborts the signal at once with reason not-held', async () => {
  const tbl = table();
  const backend = new FaultyBackend(tbl);
  const locker = createLocker(backend, { ttlMs: 60_000 });
  const lock = await locker.lock('b');
  // Another client force-takes the lock by releasing ours on the shared table.
  await backend.inner.release({
    lockId: 'b',
    kind: 'mutex',
    ownerId: lock.ownerId,
    token: lock.token,
    ttlMs: 1,
    reentered: false,
    data: undefined,
  });
  await assert.rejects(lock.extend(), (e) => e instanceof LockLostError && e.reason === 'not-held');
  assert.ok(lock.signal.aborted);
  await locker.close();
});

test('renewals never overlap and an in-flight renewal is awaited before release', async () => {
  const backend = new FaultyBackend(table());
  const locker = createLocker(backend, { ttlMs: 600 });
  const lock = await locker.lock('c');
  backend.extendDelayMs = 150;
  const manual = Promise.all([lock.extend(), lock.extend(), lock.extend()]);
  await sleep(10);
  await lock.release();
  await manual.catch(() => undefined);
  assert.equal(backend.maxConcurrentExtends, 1);
  assert.equal(backend.log.at(-1), 'release', 'release came after the in-flight renewals');
  await locker.close();
});

test('a renewal timer never throws: failures only end in a loss event', async () => {
  const backend = new FaultyBackend(table());
  const locker = createLocker(backend, { ttlMs: 200 });
  const events: string[] = [];
  locker.on('lost', (e) => events.push(e.error.reason));
  const lock = await locker.lock('d');
  backend.extendError = Object.assign(new Error('boom'), { code: 'ECONNRESET' });
  await lostReason(lock);
  assert.deepEqual(events, ['expired']);
  await locker.close();
});

test('a process paused past validity does not renew as if nothing happened', async () => {
  const backend = new FaultyBackend(table());
  const locker = createLocker(backend, { ttlMs: 150 });
  const lock = await locker.lock('e');
  // Block the event loop past the lease, as a GC pause or SIGSTOP would.
  const until = performance.now() + 300;
  while (performance.now() < until) {
    /* busy on purpose */
  }
  const reason = await lostReason(lock);
  assert.ok(reason instanceof LockLostError);
  assert.equal(reason.reason, 'expired');
  await locker.close();
});

test('a grant held on receipt: the lease starts on what it vouches for and takes the full ttl from its confirmation', async () => {
  const backend = new FaultyBackend(table());
  let confirm: (() => void) | undefined;
  backend.confirm = {
    shortTtlMs: 300,
    settle: (ttlMs) => new Promise((resolve) => (confirm = () => resolve({ ttlMs }))),
  };
  const locker = createLocker(backend, { ttlMs: 60_000 });
  const extended: number[] = [];
  locker.on('extended', (e) => extended.push(e.validUntil));
  const lock = await locker.lock('held-on-receipt');
  assert.ok(lock.remainingMs() <= 300, 'held on what the hand-off vouches for, not the ttl');
  assert.ok(confirm, 'the confirmation is pending');
  confirm();
  await sleep(20);
  assert.ok(lock.remainingMs() > 50_000, 'the confirmation moved the deadline to the full ttl');
  await sleep(400);
  assert.equal(backend.extendCalls, 0, 'renewals follow the full ttl, not the short one');
  assert.ok(lock.held);
  assert.deepEqual(extended, [], 'a confirmation is not an extension event');
  await lock.release();
  await locker.close();
});

test('a confirmation that finds the hand-off gone ends the lease at once (not-held)', async () => {
  const backend = new FaultyBackend(table());
  backend.confirm = {
    shortTtlMs: 2_000,
    settle: async () => {
      await sleep(20);
      throw new LockLostError('gone', 'not-held');
    },
  };
  const locker = createLocker(backend, { ttlMs: 60_000 });
  const lock = await locker.lock('gone');
  const reason = await lostReason(lock);
  assert.ok(reason instanceof LockLostError);
  assert.equal(reason.reason, 'not-held');
  await locker.close();
});

test('a confirmation that could not be sent leaves the lease to its renewals', async () => {
  const backend = new FaultyBackend(table());
  backend.confirm = { shortTtlMs: 300, settle: () => Promise.reject(new Error('connection reset')) };
  const locker = createLocker(backend, { ttlMs: 60_000 });
  const lock = await locker.lock('unconfirmed');
  backend.confirm = undefined;
  await sleep(500);
  assert.ok(backend.extendCalls >= 1, 'renewed on the short lease');
  assert.ok(lock.held, 'and still held past the short lease');
  assert.ok(lock.remainingMs() > 50_000);
  await lock.release();
  await locker.close();
});

test('a release waits for the confirmation in flight', async () => {
  const backend = new FaultyBackend(table());
  backend.confirm = { shortTtlMs: 2_000, settle: (ttlMs) => sleep(100).then(() => ({ ttlMs })) };
  const locker = createLocker(backend, { ttlMs: 60_000 });
  const lock = await locker.lock('ordered');
  await lock.release();
  assert.deepEqual(backend.log.slice(-2), ['confirmed', 'release']);
  await locker.close();
});

test('an extension shorter than the ttl is renewed before it runs out (the renewal follows the last ttl vouched for)', async () => {
  const backend = new FaultyBackend(table());
  const locker = createLocker(backend, { ttlMs: 3_000 });
  const lock = await locker.lock('shorter');
  await lock.extend(600);
  assert.ok(lock.remainingMs() <= 600);
  await sleep(1_000);
  assert.ok(lock.held, 'still held after the short extension would have run out');
  assert.ok(lock.remainingMs() > 1_000, 'renewed by the acquisition ttl');
  await lock.release();
  await locker.close();
});

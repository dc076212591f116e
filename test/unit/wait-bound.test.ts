/**
 * A wait bound of W ms means "at least one attempt, then wait at most W": a bound that falls
 * due while the first attempt is in flight does not throw that attempt's grant away
 * (src/acquire.ts, docs/architecture.md "What the core owns").
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { randomBytes } from 'node:crypto';
import { createLocker, LockTimeoutError } from '../../src/index.js';
import { FaultyBackend } from './faulty.js';

const table = (): string => `wait-bound-${randomBytes(4).toString('hex')}`;

test('a free lock is obtained however short the bound, even when the first attempt outlasts it', async () => {
  const backend = new FaultyBackend(table());
  const locker = createLocker(backend);
  await (await locker.lock('warm-up')).release();
  backend.acquireDelayMs = 30;
  const tried = await locker.tryLock('free', { waitMs: 1 });
  assert.ok(tried, 'tryLock({ waitMs: 1 }) on a free lock got it');
  const token = tried.token;
  await tried.release();
  const locked = await locker.lock('free', { timeoutMs: 1 });
  assert.equal(locked.token, token + 1n, 'no grant was made and thrown away in between');
  await locked.release();
  await locker.close();
});

test('a held lock still times out after the first attempt, and leaves nothing behind', async () => {
  const backend = new FaultyBackend(table());
  const locker = createLocker(backend);
  const held = await locker.lock('held');
  backend.acquireDelayMs = 30;
  assert.equal(await locker.tryLock('held', { waitMs: 1 }), null);
  await assert.rejects(locker.lock('held', { timeoutMs: 1 }), LockTimeoutError);
  await assert.rejects(locker.lock('held', { timeoutMs: 1, fair: true }), LockTimeoutError);
  backend.acquireDelayMs = 0;
  assert.equal((await locker.inspect('held')).waiters, 0, 'no queue entry left behind');
  await held.release();
  const next = await locker.tryLock('held');
  assert.ok(next, 'the lock is free once its holder released it');
  await next.release();
  await locker.close();
});

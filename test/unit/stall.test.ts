/**
 * A stalled event loop (a GC pause, a hung VM, a long synchronous computation) past the
 * lease: the code that wakes up must learn at once, synchronously and from the monotonic
 * clock, that it no longer holds the lock — before any timer runs and before any renewal is
 * sent (src/lease.ts, docs/guarantees.md).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { randomBytes } from 'node:crypto';
import { createLocker, LockLostError } from '../../src/index.js';
import { FaultyBackend } from './faulty.js';

const table = (): string => `stall-${randomBytes(4).toString('hex')}`;

/** Block the event loop for `ms` (no timer, no I/O callback runs meanwhile). */
function stall(ms: number): void {
  const until = performance.now() + ms;
  while (performance.now() < until) {
    /* busy on purpose */
  }
}

test('after a stall past the ttl, the handle says so synchronously: not held, 0 ms left, signal aborted (expired)', async () => {
  const backend = new FaultyBackend(table());
  const locker = createLocker(backend, { ttlMs: 200 });
  const lost: string[] = [];
  locker.on('lost', (e) => lost.push(e.error.reason));
  const lock = await locker.lock('stalled');
  const renewals = backend.extendCalls;
  stall(300);
  assert.equal(lock.held, false);
  assert.equal(lock.remainingMs(), 0);
  assert.equal(lock.signal.aborted, true, 'the signal is aborted before any timer could run');
  const reason: unknown = lock.signal.reason;
  assert.ok(reason instanceof LockLostError);
  assert.equal(reason.reason, 'expired');
  assert.deepEqual(lost, ['expired']);
  await assert.rejects(lock.extend(), (e) => e instanceof LockLostError && e.reason === 'expired');
  assert.equal(backend.extendCalls, renewals, 'no renewal was sent after the stall');
  await lock.release();
  await locker.close();
});

test('extend() right after a stall past the ttl is refused without being sent', async () => {
  const backend = new FaultyBackend(table());
  const locker = createLocker(backend, { ttlMs: 200, autoExtend: false });
  const lock = await locker.lock('stalled-extend');
  stall(300);
  await assert.rejects(lock.extend(), (e) => e instanceof LockLostError && e.reason === 'expired');
  assert.equal(backend.extendCalls, 0, 'the renewal was not sent');
  assert.ok(lock.signal.aborted);
  await lock.release();
  await locker.close();
});

test('a stall shorter than the validity changes nothing', async () => {
  const backend = new FaultyBackend(table());
  const locker = createLocker(backend, { ttlMs: 2_000 });
  const lock = await locker.lock('short-stall');
  stall(50);
  assert.equal(lock.held, true);
  assert.equal(lock.signal.aborted, false);
  await lock.extend();
  assert.ok(lock.held);
  await lock.release();
  await locker.close();
});

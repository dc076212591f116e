/**
 * An acquisition without a signal of the caller's (with or without a timeout or an explicit
 * owner) borrows the locker's close signal until it has to wait (src/acquire.ts): close() must still end it, nothing may be left
 * listening on the borrowed signal, and many waiters at once must not warn.
 */
import assert from 'node:assert/strict';
import { getEventListeners } from 'node:events';
import { test } from 'node:test';
import { createLocker, LockerClosedError } from '../../src/index.js';
import type { AcquireRequest } from '../../src/backend.js';
import { MemoryBackend, type MemoryTicket } from '../../src/backends/memory/backend.js';

let n = 0;

/** The memory backend, recording the signal of every attempt; `stall` makes attempts wait for their abort. */
class Recording extends MemoryBackend {
  readonly signals = new Set<AbortSignal>();
  stall = false;
  constructor() {
    super(`attempt-signal-${++n}`);
  }
  override async tryAcquire(req: AcquireRequest<MemoryTicket>): ReturnType<MemoryBackend['tryAcquire']> {
    this.signals.add(req.signal);
    if (this.stall) {
      await new Promise<void>((_, reject) => req.signal.addEventListener('abort', () => reject(req.signal.reason), { once: true }));
    }
    return super.tryAcquire(req);
  }
}

test('uncontended cycles leave no abort listener on any signal the backend was given', async () => {
  const backend = new Recording();
  const locker = createLocker(backend);
  for (let i = 0; i < 50; i++) await (await locker.lock('a')).release();
  await Promise.all(Array.from({ length: 20 }, async (_, i) => (await locker.lock(`k${i}`)).release()));
  assert.ok(backend.signals.size > 0);
  for (const s of backend.signals) assert.equal(getEventListeners(s, 'abort').length, 0);
  await locker.close();
});

test('close() ends an attempt in flight that has no signal of its own', async () => {
  const backend = new Recording();
  const locker = createLocker(backend);
  backend.stall = true;
  const pending = locker.lock('stalled');
  await new Promise((r) => setImmediate(r));
  assert.equal(backend.signals.size, 1, 'the attempt reached the backend');
  await locker.close();
  await assert.rejects(pending, LockerClosedError);
});

test('many waiters at once: all granted in turn, no MaxListenersExceededWarning', async () => {
  const warnings: string[] = [];
  const onWarning = (w: Error): void => void warnings.push(w.name);
  process.on('warning', onWarning);
  try {
    const locker = createLocker(new Recording());
    const held = await locker.lock('hot');
    const waiters = Array.from({ length: 40 }, () => locker.lock('hot').then((l) => l.release()));
    await new Promise((r) => setTimeout(r, 20));
    await held.release();
    await Promise.all(waiters);
    await locker.close();
    await new Promise((r) => setImmediate(r));
  } finally {
    process.off('warning', onWarning);
  }
  assert.deepEqual(
    warnings.filter((w) => w === 'MaxListenersExceededWarning'),
    [],
  );
});

test('a waiting call without a timeout still rejects on close()', async () => {
  const locker = createLocker(new Recording());
  await locker.lock('x');
  const waiting = locker.lock('x');
  await new Promise((r) => setTimeout(r, 10));
  await locker.close();
  await assert.rejects(waiting, LockerClosedError);
});

test('uncontended calls with an owner or a timeout borrow one signal, not a controller each', async () => {
  const backend = new Recording();
  const locker = createLocker(backend);
  await (await locker.lock('connect')).release();
  backend.signals.clear();
  for (let i = 0; i < 10; i++) {
    await (await locker.lock('o', { owner: `owner-${i}` })).release();
    await (await locker.lock('t', { timeoutMs: 5_000 })).release();
  }
  assert.equal(backend.signals.size, 1, 'every attempt of the connected locker was given the borrowed close signal');
  await locker.close();
});

test('a timeout that starts its timer only when the call waits still counts from the call', async () => {
  const locker = createLocker(new Recording());
  const held = await locker.lock('busy');
  const started = performance.now();
  await assert.rejects(locker.lock('busy', { timeoutMs: 50, owner: 'other' }), { code: 'LOCK_TIMEOUT' });
  // Not a timing assertion on speed: the bound must neither be skipped nor restarted at the wait.
  assert.ok(performance.now() - started >= 49, 'waited its bound');
  assert.equal(await locker.tryLock('busy', { waitMs: 30 }), null);
  await held.release();
  await locker.close();
});

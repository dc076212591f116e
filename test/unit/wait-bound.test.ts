/**
 * A wait bound of W ms means "at least one attempt, then wait at most W": a bound that falls
 * due while the first attempt is in flight does not throw that attempt's grant away
 * (src/acquire.ts, docs/architecture.md "What the core owns"), and a first attempt that does not
 * answer is cut short once the bound and FIRST_ATTEMPT_MIN_MS have passed.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { randomBytes } from 'node:crypto';
import { createLocker, LockTimeoutError } from '../../src/index.js';
import { FaultyBackend } from './faulty.js';
import type { AcquireRequest } from '../../src/backend.js';
import { MemoryBackend, type MemoryTicket } from '../../src/backends/memory/backend.js';
import { raceAbort } from '../../src/util/time.js';
import { eventually } from '../helpers.js';

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

/** The memory backend, whose attempts wait for `gate` while it is set; `honours`: they stop when their signal aborts. */
class Gated extends MemoryBackend {
  gate: Promise<void> | undefined;
  honours = false;
  override async tryAcquire(req: AcquireRequest<MemoryTicket>): ReturnType<MemoryBackend['tryAcquire']> {
    if (this.gate) await (this.honours ? raceAbort(this.gate, req.signal) : this.gate);
    return super.tryAcquire(req);
  }
}

test('an attempt that never answers ends at the bound or the abort, and its late grant is handed back', async () => {
  const backend = new Gated(table());
  const locker = createLocker(backend);
  await (await locker.lock('warm-up')).release();
  let open = (): void => undefined;
  backend.gate = new Promise((resolve) => (open = resolve));
  for (const honours of [false, true]) {
    backend.honours = honours;
    // Without a signal of the caller's the backend was given the borrowed close signal.
    await assert.rejects(locker.lock('stuck', { timeoutMs: 20 }), LockTimeoutError);
    assert.equal(await locker.tryLock('stuck', { waitMs: 20 }), null);
    await assert.rejects(locker.lock('stuck', { timeoutMs: 20, signal: new AbortController().signal }), LockTimeoutError);
    const ctl = new AbortController();
    const aborted = locker.lock('stuck', { signal: ctl.signal });
    await new Promise((r) => setTimeout(r, 10));
    const reason = new Error('caller left');
    ctl.abort(reason);
    await assert.rejects(aborted, (e) => e === reason);
    const once = new AbortController();
    const tried = locker.tryLock('stuck', { signal: once.signal });
    once.abort(reason);
    await assert.rejects(tried, (e) => e === reason);
  }
  backend.gate = undefined;
  open();
  await eventually('the late grants were handed back', async () => (await locker.inspect('stuck')).holders.length === 0);
  const next = await locker.tryLock('stuck');
  assert.ok(next, 'the lock is free once the late attempts ended');
  await next.release();
  await locker.close();
});

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { LockTimeoutError } from '../../../src/index.js';
import { waitingOn } from '../../helpers.js';
import { T, type SuiteContext } from '../suite.js';

/** tryLock, timeouts and aborts: a waiter that gives up leaves nothing behind. */
export function waitCases(ctx: SuiteContext): void {
  describe('tryLock, timeouts and aborts', () => {
    test('tryLock returns null while another client holds the lock', T, () => tryLockReturnsNullWhileAnother(ctx));

    test('tryLock succeeds when the lock is free', T, () => tryLockSucceedsWhenLockFree(ctx));

    test('tryLock with waitMs gets the lock released within the wait', T, () => tryLockWaitMsGetsLockReleased(ctx));

    test('tryLock with waitMs resolves null when the lock stays held', T, () => tryLockWaitMsResolvesNullWhen(ctx));

    test('timeoutMs rejects with LockTimeoutError', T, () => timeoutMsRejectsLockTimeoutError(ctx));

    test('an abort before the call rejects with signal.reason unchanged', T, () => abortBeforeCallRejectsSignal(ctx));

    test('an abort during the wait rejects with signal.reason unchanged and leaves no queue entry', T, () =>
      abortDuringWaitRejectsSignal(ctx),
    );

    test('a timed-out waiter leaves no queue entry behind', T, () => timedOutWaiterLeavesNo(ctx));
  });
}

async function tryLockReturnsNullWhileAnother(ctx: SuiteContext): Promise<void> {
  const { client, id } = ctx;
  const lockId = id('try-held');
  const held = await client().lock(lockId);
  assert.equal(await client().tryLock(lockId), null);
  await held.release();
}

async function tryLockSucceedsWhenLockFree(ctx: SuiteContext): Promise<void> {
  const { client, id } = ctx;
  const lockId = id('try-free');
  const lock = await client().tryLock(lockId);
  assert.ok(lock);
  assert.equal(lock.held, true);
  await lock.release();
}

async function tryLockWaitMsGetsLockReleased(ctx: SuiteContext): Promise<void> {
  const { client, id } = ctx;
  const lockId = id('try-wait');
  const a = client();
  const b = client();
  const held = await a.lock(lockId);
  const waiting = waitingOn(b, lockId);
  const attempt = b.tryLock(lockId, { waitMs: 60_000 });
  await waiting;
  await held.release();
  const got = await attempt;
  assert.ok(got);
  await got.release();
}

async function tryLockWaitMsResolvesNullWhen(ctx: SuiteContext): Promise<void> {
  const { client, id } = ctx;
  const lockId = id('try-wait-null');
  const held = await client().lock(lockId);
  assert.equal(await client().tryLock(lockId, { waitMs: 300 }), null);
  assert.equal(held.held, true);
  await held.release();
}

async function timeoutMsRejectsLockTimeoutError(ctx: SuiteContext): Promise<void> {
  const { client, id } = ctx;
  const lockId = id('timeout');
  const held = await client().lock(lockId);
  const err = await client()
    .lock(lockId, { timeoutMs: 300 })
    .then(
      () => assert.fail('should time out'),
      (e: unknown) => e,
    );
  assert.ok(err instanceof LockTimeoutError);
  assert.equal(err.code, 'LOCK_TIMEOUT');
  await held.release();
}

async function abortBeforeCallRejectsSignal(ctx: SuiteContext): Promise<void> {
  const { client, id } = ctx;
  const reason = new Error('caller gave up');
  const ctl = new AbortController();
  ctl.abort(reason);
  await assert.rejects(client().lock(id('abort-before'), { signal: ctl.signal }), (e) => e === reason);
}

async function abortDuringWaitRejectsSignal(ctx: SuiteContext): Promise<void> {
  const { client, id, caps } = ctx;
  const lockId = id('abort-during');
  const a = client();
  const b = client();
  const held = await a.lock(lockId);
  const reason = new Error('stop waiting');
  const ctl = new AbortController();
  const waiting = waitingOn(b, lockId);
  const p = b.lock(lockId, { signal: ctl.signal, fair: caps.fair });
  await waiting;
  ctl.abort(reason);
  await assert.rejects(p, (e) => e === reason);
  await held.release();
  // The aborted waiter must not block the next one (a leaked fair-queue entry would).
  const c = await client().lock(lockId, { timeoutMs: 60_000, fair: caps.fair });
  await c.release();
}

async function timedOutWaiterLeavesNo(ctx: SuiteContext): Promise<void> {
  const { client, id, caps } = ctx;
  const lockId = id('timeout-clean');
  const held = await client().lock(lockId);
  await assert.rejects(client().lock(lockId, { timeoutMs: 200, fair: caps.fair }), LockTimeoutError);
  await held.release();
  const next = await client().tryLock(lockId, { waitMs: 60_000, fair: caps.fair });
  assert.ok(next);
  await next.release();
}

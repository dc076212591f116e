import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { LockerClosedError, LockLostError, LockNotHeldError, LockTimeoutError } from '../../../src/index.js';
import { lossOf } from '../../helpers.js';
import { T, type SuiteContext } from '../suite.js';

/** One rule for zero waits, closed lockers and lost work. */
export function ruleCases(ctx: SuiteContext): void {
  describe('one rule for zero waits, closed lockers and lost work', () => {
    test('timeoutMs: 0 makes one attempt: a free lock is granted, a held one rejects LockTimeoutError at once', T, () =>
      timeoutMs0MakesOneAttempt(ctx),
    );

    test('waitMs is an alias of timeoutMs on lock() and tryLock()', T, () => waitMsAliasTimeoutMsLockTryLock(ctx));

    test('extend() after the locker closed rejects LockLostError with reason closed', T, () => extendAfterLockerClosedRejects(ctx));

    test('withLock rejects LockLostError carrying the result when the lock was lost while fn ran', T, () =>
      withLockRejectsLockLostErrorCarryingResult(ctx),
    );

    test('withLock with rejectOnLoss: false resolves with the result after a loss', T, () => withLockRejectOnLossFalseResolvesResult(ctx));

    test('extend() after release rejects LockNotHeldError, not a backend error', T, () => extendAfterReleaseRejectsLockNotHeldError(ctx));
  });
}

async function timeoutMs0MakesOneAttempt(ctx: SuiteContext): Promise<void> {
  const { client, id } = ctx;
  const lockId = id('zero-wait');
  const first = await client().lock(lockId, { timeoutMs: 0 });
  assert.equal(first.held, true);
  await assert.rejects(client().lock(lockId, { timeoutMs: 0 }), LockTimeoutError);
  await first.release();
}

async function waitMsAliasTimeoutMsLockTryLock(ctx: SuiteContext): Promise<void> {
  const { client, id } = ctx;
  const lockId = id('alias');
  const held = await client().lock(lockId);
  await assert.rejects(client().lock(lockId, { waitMs: 100 }), LockTimeoutError);
  assert.equal(await client().tryLock(lockId, { timeoutMs: 100 }), null);
  await held.release();
}

async function extendAfterLockerClosedRejects(ctx: SuiteContext): Promise<void> {
  const { client, id } = ctx;
  const locker = client();
  const lock = await locker.lock(id('extend-closed'));
  await locker.close();
  await assert.rejects(lock.extend(), (e: unknown) => e instanceof LockLostError && e.reason === 'closed');
  await assert.rejects(locker.lock(id('after-close')), LockerClosedError);
}

async function withLockRejectsLockLostErrorCarryingResult(ctx: SuiteContext): Promise<void> {
  const { client, id, shortTtl } = ctx;
  const locker = client({ autoExtend: false });
  const lockId = id('with-lost');
  const err = await locker
    .withLock(
      lockId,
      async (lock) => {
        await lossOf(lock);
        return 42;
      },
      { ttlMs: shortTtl },
    )
    .then(
      () => assert.fail('should reject'),
      (e: unknown) => e,
    );
  assert.ok(err instanceof LockLostError);
  assert.equal(err.result, 42);
}

async function withLockRejectOnLossFalseResolvesResult(ctx: SuiteContext): Promise<void> {
  const { client, id, shortTtl } = ctx;
  const locker = client({ autoExtend: false });
  const v = await locker.withLock(
    id('with-lost-ok'),
    async (lock) => {
      await lossOf(lock);
      return 'done';
    },
    { ttlMs: shortTtl, rejectOnLoss: false },
  );
  assert.equal(v, 'done');
}

async function extendAfterReleaseRejectsLockNotHeldError(ctx: SuiteContext): Promise<void> {
  const { client, id } = ctx;
  const lock = await client().lock(id('extend-after-release'));
  await lock.release();
  await assert.rejects(lock.extend(), LockNotHeldError);
}

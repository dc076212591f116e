import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { InvalidArgumentError, PermitsMismatchError, UnsupportedError, type Lock } from '../../../src/index.js';

import { waitingOn } from '../../helpers.js';
import { T, type SuiteContext } from '../suite.js';

/** Semaphore holds of several permits (`acquire({ permits: n })`) and semaphores of mismatched sizes. */
export function permitCases(ctx: SuiteContext): void {
  const { caps } = ctx;
  if (!caps.permits) return;
  describe('semaphores: several permits per hold, sizes', () => {
    test('a semaphore opened with another permits than its holders is a PermitsMismatchError', T, () => mismatchIsTyped(ctx));

    test('permits per hold outside [1, permits] are InvalidArgumentError before anything is sent', T, () => weightOutOfRange(ctx));

    if (caps.weightedPermits === true) {
      test('n permits taken at once leave permits − n; release gives all n back', T, () => nTakenLeaveRest(ctx));

      test('never more permits in use than the semaphore has, under contention of mixed sizes', T, () => neverMoreThanPermits(ctx));

      test('a weighted hold never re-enters: the same explicit owner takes permits of its own', T, () => weightedNeverReenters(ctx));

      if (caps.fair) {
        test('a fair waiter for 3 permits is not starved by single permits that keep arriving', T, () => bigFairWaiterNotStarved(ctx));
      }
    } else {
      test('several permits per hold are refused with UnsupportedError (one permit works)', T, () => weightUnsupported(ctx));
    }
  });
}

async function mismatchIsTyped(ctx: SuiteContext): Promise<void> {
  const { client, id } = ctx;
  const lockId = id('sem-size');
  const held = await client().semaphore(lockId, { permits: 2 }).acquire();
  const other = client().semaphore(lockId, { permits: 3 });
  for (const attempt of [() => other.tryAcquire(), () => other.acquire({ timeoutMs: 30_000 })]) {
    await assert.rejects(attempt, (e) => {
      assert.ok(e instanceof PermitsMismatchError, String(e));
      assert.ok(e instanceof InvalidArgumentError);
      assert.equal(e.code, 'INVALID_ARGUMENT');
      assert.equal(e.argument, 'permits');
      assert.equal(e.permits, 3);
      assert.equal(e.held, 2);
      return true;
    });
  }
  // The refused size left nothing behind: the right size still gets the second permit.
  const second = await client().semaphore(lockId, { permits: 2 }).tryAcquire();
  assert.ok(second, 'the second permit of the right size is free');
  assert.equal((await client().inspect(lockId)).holders.length, 2);
  await Promise.all([held.release(), second.release()]);
  // Once nobody holds it, any size may open it.
  const fresh = await other.tryAcquire();
  assert.ok(fresh);
  await fresh.release();
}

async function weightOutOfRange(ctx: SuiteContext): Promise<void> {
  const { client, id } = ctx;
  const sem = client().semaphore(id('sem-weight'), { permits: 3 });
  for (const permits of [0, -1, 1.5, 4, Number.NaN, '2' as unknown as number]) {
    await assert.rejects(
      () => sem.acquire({ permits }),
      (e) => e instanceof InvalidArgumentError && e.argument === 'permits',
    );
    await assert.rejects(
      () => sem.tryAcquire({ permits }),
      (e) => e instanceof InvalidArgumentError && e.argument === 'permits',
    );
  }
}

async function weightUnsupported(ctx: SuiteContext): Promise<void> {
  const { client, id } = ctx;
  const sem = client().semaphore(id('sem-unsup'), { permits: 3 });
  await assert.rejects(
    () => sem.acquire({ permits: 2 }),
    (e) => e instanceof UnsupportedError,
  );
  await assert.rejects(
    () => sem.tryAcquire({ permits: 3 }),
    (e) => e instanceof UnsupportedError,
  );
  const one = await sem.tryAcquire({ permits: 1 });
  assert.ok(one);
  await one.release();
}

async function nTakenLeaveRest(ctx: SuiteContext): Promise<void> {
  const { client, id } = ctx;
  const lockId = id('sem-n');
  const sem = (): ReturnType<ReturnType<SuiteContext['client']>['semaphore']> => client().semaphore(lockId, { permits: 5 });
  const three = await sem().acquire({ permits: 3, timeoutMs: 30_000 });
  assert.equal(await sem().tryAcquire({ permits: 3 }), null, '2 permits left, 3 asked');
  const two = await sem().tryAcquire({ permits: 2 });
  assert.ok(two, 'the 2 permits left are free');
  assert.equal(await sem().tryAcquire(), null, 'all 5 in use');
  const holders = (await client().inspect(lockId)).holders;
  assert.deepEqual(holders.map((h) => h.weight ?? 1).sort(), [2, 3]);
  await three.release();
  const again = await sem().tryAcquire({ permits: 3 });
  assert.ok(again, 'release gave all 3 back');
  assert.equal(await sem().tryAcquire(), null);
  await Promise.all([two.release(), again.release()]);
  const all = await sem().tryAcquire({ permits: 5 });
  assert.ok(all, 'every permit is free again');
  await all.release();
}

async function weightedNeverReenters(ctx: SuiteContext): Promise<void> {
  const { client, id } = ctx;
  const lockId = id('sem-owner');
  const sem = client().semaphore(lockId, { permits: 3 });
  const first = await sem.acquire({ permits: 2, owner: 'same-owner' });
  assert.equal(first.reentered, false);
  // Documented (docs/recipes/semaphore.md): no re-entry, so 2 more of 3 are not free.
  assert.equal(await client().semaphore(lockId, { permits: 3 }).tryAcquire({ permits: 2, owner: 'same-owner' }), null);
  const second = await client().semaphore(lockId, { permits: 3 }).tryAcquire({ permits: 1, owner: 'same-owner' });
  assert.ok(second, 'the last permit is free');
  assert.equal(second.reentered, false);
  assert.notEqual(second.token, first.token);
  await first.release();
  const left = (await client().inspect(lockId)).holders;
  assert.deepEqual(
    left.map((h) => h.token),
    [second.token],
    'releasing one hold of the owner leaves its other hold',
  );
  const two = await sem.tryAcquire({ permits: 2 });
  assert.ok(two, 'the first hold gave its 2 permits back');
  await Promise.all([second.release(), two.release()]);
}

async function neverMoreThanPermits(ctx: SuiteContext): Promise<void> {
  const { client, id } = ctx;
  const lockId = id('sem-mixed');
  let inUse = 0;
  let most = 0;
  await Promise.all(
    Array.from({ length: 6 }, async (_, i) => {
      const sem = client().semaphore(lockId, { permits: 4 });
      for (let round = 0; round < 2; round++) {
        const n = 1 + ((i + round) % 3);
        const hold = await sem.acquire({ permits: n, timeoutMs: 120_000 });
        inUse += n;
        most = Math.max(most, inUse);
        await sleep(5);
        inUse -= n;
        await hold.release();
      }
    }),
  );
  assert.ok(most <= 4, `at most 4 permits in use, saw ${most}`);
  assert.ok(most >= 1);
}

async function bigFairWaiterNotStarved(ctx: SuiteContext): Promise<void> {
  const { client, id } = ctx;
  const lockId = id('sem-big');
  const sem = (c = client()): ReturnType<ReturnType<SuiteContext['client']>['semaphore']> => c.semaphore(lockId, { permits: 3 });
  const first = await sem().acquire({ fair: true });
  const bigClient = client();
  const queued = waitingOn(bigClient, lockId);
  const state: { big: Lock | undefined } = { big: undefined };
  const bigDone = sem(bigClient)
    .acquire({ permits: 3, fair: true, timeoutMs: 120_000 })
    .then((l) => {
      state.big = l;
    });
  await queued;
  // Two permits are free, but the waiter ahead needs three: later fair singles wait behind it.
  for (let i = 0; i < 3; i++) {
    assert.equal(await sem().tryAcquire({ fair: true }), null, 'a later single permit does not pass the waiter for 3');
  }
  const laterClient = client();
  const laterQueued = waitingOn(laterClient, lockId);
  const order: string[] = [];
  const later = sem(laterClient)
    .acquire({ fair: true, timeoutMs: 120_000 })
    .then(async (l) => {
      order.push('single');
      await l.release();
    });
  await laterQueued;
  assert.equal(state.big, undefined);
  await first.release();
  await bigDone;
  order.push('big');
  const big = state.big as Lock | undefined;
  assert.ok(big);
  assert.equal(big.held, true);
  await big.release();
  await later;
  assert.deepEqual(order, ['big', 'single']);
}

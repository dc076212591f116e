import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { InvalidArgumentError } from '../../../src/index.js';
import { lossOf } from '../../helpers.js';
import { T, type SuiteContext } from '../suite.js';

/** Re-entry: by async context (explicit `reentrant`), by explicit owner, across clients. */
export function reentryCases(ctx: SuiteContext): void {
  const { caps } = ctx;

  describe('reentrancy', () => {
    test('nested withLock with reentrant: true re-enters (same token, no deadlock)', T, () => nestedWithLockReentrantTrueRe(ctx));

    test('a nested acquisition that does not say reentrant is a typed error, not a deadlock', T, () =>
      nestedAcquisitionSayReentrantTyped(ctx),
    );

    test('Promise.all siblings that re-enter take turns: they never overlap', T, () => promiseAllSiblingsReEnter(ctx));

    test('forked work with reentrant: false waits for the lock and never overlaps the holder', T, () => forkedWorkReentrantFalseWaits(ctx));

    test('the inner release of a nested withLock does not free the lock', T, () => innerReleaseNestedWithLockFree(ctx));

    test('nested withLock on a different lockId is independent', T, () => nestedWithLockDifferentLockIdIndependent(ctx));

    test('an explicit owner re-enters within one client', T, () => explicitOwnerReEntersWithin(ctx));

    test('a different owner does not re-enter', T, () => differentOwnerReEnter(ctx));

    if (caps.reentrant) {
      test('an explicit owner re-enters across clients (server-side count)', T, () => explicitOwnerReEntersAcross(ctx));

      test('a re-entry from another client is covered for its own ttl', T, () => reEntryFromAnotherClient(ctx));

      test("one client's short renewals do not cut another client's longer re-entered lease", T, () => oneClientsShortRenewalsDo(ctx));
    }
  });
}

async function nestedWithLockReentrantTrueRe(ctx: SuiteContext): Promise<void> {
  const { client, id } = ctx;
  const lockId = id('nested');
  const locker = client();
  const tokens: bigint[] = [];
  await locker.withLock(lockId, async (outer) => {
    tokens.push(outer.token);
    await locker.withLock(
      lockId,
      async (inner) => {
        tokens.push(inner.token);
        assert.equal(inner.reentered, true);
      },
      { timeoutMs: 5_000, reentrant: true },
    );
  });
  assert.equal(tokens[0], tokens[1]);
}

async function nestedAcquisitionSayReentrantTyped(ctx: SuiteContext): Promise<void> {
  const { client, id } = ctx;
  const lockId = id('nested-unsaid');
  const locker = client();
  await locker.withLock(lockId, async () => {
    await assert.rejects(
      locker.withLock(lockId, async () => undefined),
      (e: unknown) => {
        assert.ok(e instanceof InvalidArgumentError);
        assert.equal(e.argument, 'reentrant');
        return true;
      },
    );
    await assert.rejects(locker.lock(lockId), InvalidArgumentError);
  });
}

async function promiseAllSiblingsReEnter(ctx: SuiteContext): Promise<void> {
  const { client, id } = ctx;
  const lockId = id('siblings');
  const locker = client();
  let inside = 0;
  let most = 0;
  await locker.withLock(lockId, async () => {
    await Promise.all(
      Array.from({ length: 5 }, () =>
        locker.withLock(
          lockId,
          async () => {
            inside += 1;
            most = Math.max(most, inside);
            await sleep(10);
            inside -= 1;
          },
          { reentrant: true, timeoutMs: 30_000 },
        ),
      ),
    );
  });
  assert.equal(most, 1);
}

async function forkedWorkReentrantFalseWaits(ctx: SuiteContext): Promise<void> {
  const { client, id } = ctx;
  const lockId = id('fork');
  const locker = client();
  const order: string[] = [];
  let fork: Promise<void> | undefined;
  await locker.withLock(lockId, async () => {
    fork = new Promise<void>((resolve, reject) => {
      setTimeout(() => {
        locker.withLock(lockId, () => void order.push('fork'), { reentrant: false, timeoutMs: 60_000 }).then(resolve, reject);
      }, 0);
    });
    await sleep(50);
    order.push('holder done');
  });
  await fork;
  assert.deepEqual(order, ['holder done', 'fork']);
}

async function innerReleaseNestedWithLockFree(ctx: SuiteContext): Promise<void> {
  const { client, id } = ctx;
  const lockId = id('nested-hold');
  const locker = client();
  const other = client();
  await locker.withLock(lockId, async () => {
    await locker.withLock(lockId, async () => undefined, { reentrant: true });
    assert.equal(await other.tryLock(lockId), null);
  });
  const after = await other.tryLock(lockId);
  assert.ok(after);
  await after.release();
}

async function nestedWithLockDifferentLockIdIndependent(ctx: SuiteContext): Promise<void> {
  const { client, id } = ctx;
  const a = id('nest-a');
  const b = id('nest-b');
  const locker = client();
  await locker.withLock(a, async (la) => {
    await locker.withLock(b, async (lb) => {
      assert.equal(lb.reentered, false);
      assert.notEqual(la.lockId, lb.lockId);
    });
  });
}

async function explicitOwnerReEntersWithin(ctx: SuiteContext): Promise<void> {
  const { client, id } = ctx;
  const lockId = id('owner');
  const locker = client();
  const first = await locker.lock(lockId, { owner: 'worker-7' });
  const second = await locker.lock(lockId, { owner: 'worker-7', timeoutMs: 5_000 });
  assert.equal(second.token, first.token);
  await second.release();
  assert.equal(await client().tryLock(lockId), null);
  await first.release();
  const free = await client().tryLock(lockId);
  assert.ok(free);
  await free.release();
}

async function differentOwnerReEnter(ctx: SuiteContext): Promise<void> {
  const { client, id } = ctx;
  const lockId = id('owner-other');
  const locker = client();
  const first = await locker.lock(lockId, { owner: 'a' });
  assert.equal(await locker.tryLock(lockId, { owner: 'b' }), null);
  await first.release();
}

async function explicitOwnerReEntersAcross(ctx: SuiteContext): Promise<void> {
  const { client, id } = ctx;
  const lockId = id('owner-cross');
  const first = await client().lock(lockId, { owner: 'shared-owner' });
  const second = await client().lock(lockId, { owner: 'shared-owner', timeoutMs: 5_000 });
  assert.equal(second.token, first.token);
  await second.release();
  assert.equal(await client().tryLock(lockId), null, 'still held once');
  await first.release();
  const free = await client().tryLock(lockId);
  assert.ok(free);
  await free.release();
}

async function reEntryFromAnotherClient(ctx: SuiteContext): Promise<void> {
  const { client, id, shortTtl } = ctx;
  const lockId = id('owner-ttl');
  const short = await client({ autoExtend: false }).lock(lockId, { owner: 'o', ttlMs: shortTtl });
  const long = await client({ autoExtend: false }).lock(lockId, { owner: 'o', ttlMs: shortTtl * 20, timeoutMs: 5_000 });
  await lossOf(short);
  await sleep(shortTtl);
  assert.equal(long.held, true, 'the second client still holds by its own lease');
  assert.equal(await client().tryLock(lockId), null, 'nobody else is granted while it does');
  await long.release();
}

async function oneClientsShortRenewalsDo(ctx: SuiteContext): Promise<void> {
  const { client, id, shortTtl } = ctx;
  const lockId = id('owner-renew');
  const shortLived = client({ ttlMs: shortTtl });
  const short = await shortLived.lock(lockId, { owner: 'p' });
  const long = await client({ autoExtend: false }).lock(lockId, { owner: 'p', ttlMs: shortTtl * 20, timeoutMs: 5_000 });
  await sleep(shortTtl * 2);
  await short.release();
  await sleep(shortTtl * 2);
  assert.equal(long.held, true);
  assert.equal(await client().tryLock(lockId), null);
  await long.release();
}

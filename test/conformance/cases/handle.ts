import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { waitingOn } from '../../helpers.js';
import { T, type SuiteContext } from '../suite.js';

/** The handle: release, `await using`, withLock, extend and the events. */
export function handleCases(ctx: SuiteContext): void {
  describe('release and the handle', () => {
    test('release() is idempotent', T, () => releaseIdempotent(ctx));

    test('await using releases at the end of the scope', T, () => awaitUsingReleasesAtEnd(ctx));

    test('withLock returns the callback value and releases', T, () => withLockReturnsCallbackValueReleases(ctx));

    test('withLock releases when the callback throws and rethrows its error', T, () => withLockReleasesWhenCallbackThrows(ctx));

    test('extend() renews the lease and moves validUntil forward', T, () => extendRenewsLeaseMovesValidUntil(ctx));

    test('events: waiting, acquired, extended and released are emitted', T, () => eventsWaitingAcquiredExtendedReleased(ctx));
  });
}

async function releaseIdempotent(ctx: SuiteContext): Promise<void> {
  const { client, id } = ctx;
  const lockId = id('idem');
  const owner = client();
  const released: string[] = [];
  owner.on('released', (e) => e.lockId === lockId && released.push(e.lockId));
  const lock = await owner.lock(lockId);
  await lock.release();
  assert.equal(lock.held, false);
  // The lock is free, and a later release of the old handle must not free the next holder's.
  const next = await client().tryLock(lockId);
  assert.ok(next, 'the released lock is free for another client');
  await lock.release();
  await Promise.all([lock.release(), lock.release()]);
  assert.equal(next.held, true, "the next holder still holds after the old handle's repeated releases");
  assert.equal(await client().tryLock(lockId), null, 'and nobody else can take it');
  assert.deepEqual(released, [lockId], 'one released event, however often release() is called');
  await next.release();
}

async function awaitUsingReleasesAtEnd(ctx: SuiteContext): Promise<void> {
  const { client, id } = ctx;
  const lockId = id('using');
  const other = client();
  {
    await using lock = await client().lock(lockId);
    assert.equal(lock.held, true);
    assert.equal(await other.tryLock(lockId), null);
  }
  const again = await other.tryLock(lockId);
  assert.ok(again);
  await again.release();
}

async function withLockReturnsCallbackValueReleases(ctx: SuiteContext): Promise<void> {
  const { client, id } = ctx;
  const lockId = id('with');
  const locker = client();
  const v = await locker.withLock(lockId, async (lock) => {
    assert.equal(lock.held, true);
    return 42;
  });
  assert.equal(v, 42);
  const again = await client().tryLock(lockId);
  assert.ok(again);
  await again.release();
}

async function withLockReleasesWhenCallbackThrows(ctx: SuiteContext): Promise<void> {
  const { client, id } = ctx;
  const lockId = id('with-throw');
  const boom = new Error('boom');
  await assert.rejects(
    client().withLock(lockId, () => {
      throw boom;
    }),
    (e) => e === boom,
  );
  const again = await client().tryLock(lockId);
  assert.ok(again);
  await again.release();
}

async function extendRenewsLeaseMovesValidUntil(ctx: SuiteContext): Promise<void> {
  const { client, id } = ctx;
  const lock = await client({ autoExtend: false }).lock(id('extend'), { ttlMs: 5_000 });
  const before = lock.validUntil;
  await sleep(20);
  await lock.extend();
  assert.ok(lock.validUntil > before);
  await lock.release();
}

async function eventsWaitingAcquiredExtendedReleased(ctx: SuiteContext): Promise<void> {
  const { client, id } = ctx;
  const lockId = id('events');
  const a = client();
  const b = client();
  const seen: string[] = [];
  b.on('waiting', (e) => e.lockId === lockId && seen.push('waiting'));
  b.on('acquired', (e) => e.lockId === lockId && seen.push('acquired'));
  b.on('extended', (e) => e.lockId === lockId && seen.push('extended'));
  b.on('released', (e) => e.lockId === lockId && seen.push('released'));
  const held = await a.lock(lockId);
  const waiting = waitingOn(b, lockId);
  const p = b.lock(lockId, { timeoutMs: 60_000 });
  await waiting;
  await held.release();
  const lock = await p;
  await lock.extend();
  await lock.release();
  assert.deepEqual(seen, ['waiting', 'acquired', 'extended', 'released']);
}

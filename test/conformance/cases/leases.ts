import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { performance } from 'node:perf_hooks';
import { FencedResource, LockLostError, StaleTokenError } from '../../../src/index.js';
import { lossOf as aborted } from '../../helpers.js';
import { T, type SuiteContext } from '../suite.js';

/** Leases: auto-extension, crashes, loss detection, takeover. */
export function leaseCases(ctx: SuiteContext): void {
  describe('leases, crashes and loss', () => {
    test('auto-extension keeps the lock across several ttls', T, () => autoExtensionKeepsLockAcross(ctx));

    test('a crashed holder loses the lock after its ttl and another client acquires it', T, () => crashedHolderLosesLockAfter(ctx));

    test("the holder's signal aborts with LockLostError before validUntil when the lease is not renewed", T, () =>
      holdersSignalAbortsLockLostErrorBefore(ctx),
    );

    test('the lost event carries the LockLostError', T, () => lostEventCarriesLockLostError(ctx));

    test('extend() after the loss rejects LockLostError', T, () => extendAfterLossRejectsLockLostError(ctx));

    test('release and extend by the former holder after a takeover do not disturb the new holder', T, () =>
      releaseExtendByFormerHolder(ctx),
    );

    test('a fenced resource rejects the former holder after a takeover', T, () => fencedResourceRejectsFormerHolder(ctx));

    test('after an event-loop stall past the ttl the holder knows at once, before any timer runs, that it lost the lock', T, () =>
      stallPastTtlIsKnownAtOnce(ctx),
    );
  });
}

async function autoExtensionKeepsLockAcross(ctx: SuiteContext): Promise<void> {
  const { client, id, shortTtl } = ctx;
  const lockId = id('auto-extend');
  const lock = await client().lock(lockId, { ttlMs: shortTtl });
  const other = client();
  const end = performance.now() + shortTtl * 3;
  while (performance.now() < end) {
    assert.equal(await other.tryLock(lockId), null);
    await sleep(shortTtl / 4);
  }
  assert.equal(lock.signal.aborted, false);
  assert.equal(lock.held, true);
  await lock.release();
}

async function crashedHolderLosesLockAfter(ctx: SuiteContext): Promise<void> {
  const { client, id, shortTtl, crash } = ctx;
  const lockId = id('crash');
  const doomed = client({ ttlMs: shortTtl });
  const lock = await doomed.lock(lockId);
  await crash(doomed);
  const next = await client().lock(lockId, { timeoutMs: 60_000 });
  assert.ok(next.token > lock.token);
  await next.release();
}

async function holdersSignalAbortsLockLostErrorBefore(ctx: SuiteContext): Promise<void> {
  const { client, id, shortTtl } = ctx;
  const lock = await client({ autoExtend: false }).lock(id('abort-early'), { ttlMs: shortTtl * 2 });
  const validUntil = lock.validUntil;
  const reason = await aborted(lock);
  const at = performance.now();
  assert.ok(reason instanceof LockLostError);
  assert.equal(reason.code, 'LOCK_LOST');
  assert.ok(at <= validUntil, `aborted at ${at.toFixed(1)}, validUntil ${validUntil.toFixed(1)}`);
  assert.equal(lock.held, false);
}

async function lostEventCarriesLockLostError(ctx: SuiteContext): Promise<void> {
  const { client, id, shortTtl } = ctx;
  const locker = client({ autoExtend: false });
  const lockId = id('lost-event');
  const lost = new Promise<unknown>((resolve) => locker.once('lost', (e) => resolve(e.error)));
  const lock = await locker.lock(lockId, { ttlMs: shortTtl });
  await aborted(lock);
  assert.ok((await lost) instanceof LockLostError);
}

async function extendAfterLossRejectsLockLostError(ctx: SuiteContext): Promise<void> {
  const { client, id, shortTtl } = ctx;
  const lock = await client({ autoExtend: false }).lock(id('extend-lost'), { ttlMs: shortTtl });
  await aborted(lock);
  await assert.rejects(lock.extend(), LockLostError);
}

async function releaseExtendByFormerHolder(ctx: SuiteContext): Promise<void> {
  const { client, id, shortTtl } = ctx;
  const lockId = id('takeover');
  const old = await client({ autoExtend: false }).lock(lockId, { ttlMs: shortTtl });
  await aborted(old);
  const b = client();
  const fresh = await b.lock(lockId, { timeoutMs: 60_000 });
  assert.ok(fresh.token > old.token);
  await assert.rejects(old.extend(), LockLostError);
  await old.release();
  assert.equal(await client().tryLock(lockId), null, 'the new holder still holds it');
  await fresh.extend();
  assert.equal(fresh.held, true);
  await fresh.release();
}

async function fencedResourceRejectsFormerHolder(ctx: SuiteContext): Promise<void> {
  const { client, id, shortTtl } = ctx;
  const lockId = id('fence-takeover');
  const res = new FencedResource('init');
  const old = await client({ autoExtend: false }).lock(lockId, { ttlMs: shortTtl });
  const staleRead = res.read(old.token);
  await aborted(old);
  const fresh = await client().lock(lockId, { timeoutMs: 60_000 });
  res.write(fresh.token, 'new');
  assert.throws(() => res.write(old.token, `${staleRead}+old`), StaleTokenError);
  assert.equal(res.peek(), 'new');
  await fresh.release();
}

async function stallPastTtlIsKnownAtOnce({ client, id, shortTtl }: SuiteContext): Promise<void> {
  const lockId = id('stall');
  const lock = await client().lock(lockId, { ttlMs: shortTtl });
  // A GC pause, a hung VM, a long synchronous loop: nothing else runs meanwhile.
  const until = performance.now() + shortTtl * 1.5;
  while (performance.now() < until) {
    /* busy on purpose */
  }
  assert.equal(lock.held, false);
  assert.equal(lock.remainingMs(), 0);
  assert.equal(lock.signal.aborted, true, 'the signal is aborted when read, not when a timer gets to run');
  const reason: unknown = lock.signal.reason;
  assert.ok(reason instanceof LockLostError);
  assert.equal(reason.reason, 'expired');
  await assert.rejects(lock.extend(), LockLostError);
  await lock.release();
  const next = await client().lock(lockId, { timeoutMs: 60_000 });
  assert.ok(next.token > lock.token);
  await next.release();
}

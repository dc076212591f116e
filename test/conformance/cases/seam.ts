/**
 * The seam's own promises (src/backend.ts), asserted on each backend directly through
 * `await locker.backend()` rather than through the Locker, which would hide a backend that
 * leans on the core: `cancel()` removes what an attempt whose reply was lost left behind
 * (a hold, a queue entry) and is idempotent; `release()` answers false once the lease
 * expired and then leaves the next holder alone.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { describe, test } from 'node:test';
import type { AcquireRequest, Backend } from '../../../src/backend.js';
import type { Lock } from '../../../src/index.js';
import { eventually, seamRequest } from '../../helpers.js';
import { T, type SuiteContext } from '../suite.js';

/** A fresh owner's request on `backend`, fair when the backend can be. */
function request(ctx: SuiteContext, lockId: string, over: Partial<AcquireRequest> = {}): AcquireRequest {
  return seamRequest(lockId, randomBytes(12).toString('hex'), { fair: ctx.caps.fair, ttlMs: 60_000, ...over });
}

/** The seam's promises about `cancel()` and `release()`. */
export function seamCases(ctx: SuiteContext): void {
  describe('the seam, without the Locker', () => {
    test('cancel() removes the hold of an attempt whose reply was lost, and is idempotent', T, () => cancelRemovesLostHold(ctx));
    test('cancel() removes the queue entry of a waiting attempt whose reply was lost', T, () => cancelRemovesLostQueueEntry(ctx));
    test('release() answers false once the lease expired, and leaves the next holder alone', T, () => releaseAfterExpiry(ctx));
  });
}

/** The backend of a fresh client. */
async function backendOf(ctx: SuiteContext): Promise<Backend> {
  return ctx.client().backend();
}

async function cancelRemovesLostHold(ctx: SuiteContext): Promise<void> {
  const lockId = ctx.id('seam-cancel-hold');
  const backend = await backendOf(ctx);
  const req = request(ctx, lockId);
  // The attempt took the lock, but its reply never reached the caller: only cancel() can free it.
  const lost = await backend.tryAcquire(req);
  assert.equal(lost.granted, true, 'a free lock is granted');
  await backend.cancel(req, undefined);
  const state = await backend.inspect(lockId);
  assert.deepEqual(
    state.holders.filter((h) => h.ownerId === req.ownerId),
    [],
    'the lost attempt holds nothing after cancel()',
  );
  const next = await ctx.client().tryLock(lockId);
  assert.ok(next, 'another client gets the lock at once');
  // Idempotent: again, and twice at once, with the lock now someone else's.
  await backend.cancel(req, undefined);
  await Promise.all([backend.cancel(req, undefined), backend.cancel(req, undefined)]);
  assert.equal(next.held, true, "cancel() of a finished attempt leaves the next holder's lock alone");
  const after = await backend.inspect(lockId);
  assert.ok(
    after.holders.some((h) => h.token === next.token),
    'the next holder still holds on the server',
  );
  await next.release();
}

async function cancelRemovesLostQueueEntry(ctx: SuiteContext): Promise<void> {
  const lockId = ctx.id('seam-cancel-queue');
  const holder = await ctx.client().lock(lockId);
  const backend = await backendOf(ctx);
  const waitersBefore = (await backend.inspect(lockId)).waiters;
  const req = request(ctx, lockId);
  const contended = await backend.tryAcquire(req);
  assert.equal(contended.granted, false, 'a held lock is not granted');
  // The queue position came back, but the caller never saw it: cancel() without the ticket.
  await backend.cancel(req, undefined);
  await backend.cancel(req, undefined);
  assert.equal((await backend.inspect(lockId)).waiters, waitersBefore, 'no queue entry is left');
  await holder.release();
  // A leftover entry of a fair queue would stand first in line for its 60 s ttl.
  const next = await ctx.client().lock(lockId, { timeoutMs: 20_000, fair: ctx.caps.fair });
  assert.ok(next.token > holder.token);
  await next.release();
}

async function releaseAfterExpiry(ctx: SuiteContext): Promise<void> {
  const lockId = ctx.id('seam-release-expired');
  const backend = await backendOf(ctx);
  const result = await backend.tryAcquire(request(ctx, lockId, { ttlMs: ctx.shortTtl, fair: false }));
  assert.ok(result.granted, 'a free lock is granted');
  const other = ctx.client();
  const next: { lock?: Lock } = {};
  // Nobody renews the grant: another client gets the lock once the lease expired on the server.
  await eventually('the lease expires and another client takes the lock', async () => {
    next.lock = (await other.tryLock(lockId)) ?? undefined;
    return next.lock !== undefined;
  });
  assert.equal(await backend.release(result.grant), false, 'release() of an expired lease answers false');
  const taken = next.lock!;
  assert.equal(taken.held, true);
  assert.equal(await ctx.client().tryLock(lockId), null, 'the next holder holds alone');
  const state = await backend.inspect(lockId);
  assert.ok(
    state.holders.some((h) => h.token === taken.token),
    'the late release() left the next holder holding',
  );
  await taken.release();
}

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { LockLostError, LockTimeoutError } from '../../../src/index.js';
import { waitingOn } from '../../helpers.js';
import { T, type SuiteContext } from '../suite.js';

/** Resolve with the reason once `signal` aborts (a ref'd interval keeps the process alive meanwhile). */
function abortOf(signal: AbortSignal): Promise<unknown> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve(signal.reason);
    const keepAlive = setInterval(() => undefined, 1_000);
    signal.addEventListener(
      'abort',
      () => {
        clearInterval(keepAlive);
        resolve(signal.reason);
      },
      { once: true },
    );
  });
}

/** `lockAll` / `tryLockAll`: all-or-nothing over several ids, one release, one loss signal. */
export function lockAllCases(ctx: SuiteContext): void {
  describe('lockAll: several ids as one lock', () => {
    test('lockAll holds every id, sorted and de-duplicated, with one bigint token per id', T, () => lockAllCase1(ctx));

    test('all-or-nothing: when one id is held by another, tryLockAll is null and takes none of the others', T, () => lockAllCase2(ctx));

    test('an abort while waiting for a later id rejects with its reason and releases the ids taken', T, () => lockAllCase3(ctx));

    test('two lockAll callers with overlapping ids in opposite orders never deadlock', T, () => lockAllCase4(ctx));

    test('the loss of one lock aborts the combined signal with its LockLostError', T, () => lockAllCase5(ctx));

    test('one release() frees every id; await using releases too', T, () => lockAllCase6(ctx));
  });
}

async function lockAllCase1({ client, id }: SuiteContext): Promise<void> {
  const [a, b, c] = [id('all-a'), id('all-b'), id('all-c')];
  const all = await client().lockAll([c, a, b, a]);
  assert.deepEqual(all.lockIds, [a, b, c].sort());
  assert.equal(all.locks.length, 3);
  for (const lock of all.locks) {
    assert.equal(typeof all.token(lock.lockId), 'bigint');
    assert.equal(all.token(lock.lockId), lock.token);
  }
  assert.equal(all.held, true);
  assert.equal(all.signal.aborted, false);
  const other = client();
  for (const lockId of [a, b, c]) assert.equal(await other.tryLock(lockId), null, `${lockId} is held`);
  await all.release();
}

async function lockAllCase2({ client, id }: SuiteContext): Promise<void> {
  const [a, b, c] = [id('aon-a'), id('aon-b'), id('aon-c')];
  const holder = await client().lock(b);
  const locker = client();
  assert.equal(await locker.tryLockAll([a, b, c]), null);
  await assert.rejects(locker.lockAll([a, b, c], { timeoutMs: 200 }), LockTimeoutError);
  const other = client();
  for (const lockId of [a, c]) {
    const lock = await other.tryLock(lockId);
    assert.ok(lock, `${lockId} was rolled back`);
    await lock.release();
  }
  await holder.release();
}

async function lockAllCase3({ client, id }: SuiteContext): Promise<void> {
  const [a, b] = [id('abort-a'), id('abort-b')];
  const holder = await client().lock(b);
  const locker = client();
  const controller = new AbortController();
  const queued = waitingOn(locker, b);
  const pending = locker.lockAll([b, a], { signal: controller.signal });
  await queued;
  const reason = new Error('stop');
  controller.abort(reason);
  await assert.rejects(pending, (err) => err === reason);
  const lock = await client().tryLock(a);
  assert.ok(lock, 'the first id was released');
  await lock.release();
  await holder.release();
}

async function lockAllCase4({ client, id }: SuiteContext): Promise<void> {
  const ids = [id('dl-a'), id('dl-b'), id('dl-c')];
  const reversed = [...ids].reverse();
  const [x, y] = [client(), client()];
  let inside = 0;
  let maxInside = 0;
  const worker = async (locker: typeof x, order: string[]): Promise<void> => {
    for (let i = 0; i < 5; i++) {
      await using _all = await locker.lockAll(order, { timeoutMs: 60_000 });
      inside += 1;
      maxInside = Math.max(maxInside, inside);
      await sleep(2);
      inside -= 1;
    }
  };
  await Promise.all([worker(x, ids), worker(y, reversed), worker(x, [ids[1]!, ids[0]!]), worker(y, [ids[2]!, ids[1]!])]);
  assert.equal(maxInside, 1);
}

async function lockAllCase5({ client, id, shortTtl }: SuiteContext): Promise<void> {
  const [a, b] = [id('loss-a'), id('loss-b')];
  const all = await client({ autoExtend: false }).lockAll([a, b], { ttlMs: shortTtl });
  const [first, second] = all.locks;
  await second!.extend(60_000);
  const reason = await abortOf(all.signal);
  assert.ok(reason instanceof LockLostError);
  assert.equal(reason.context.lockId, first!.lockId);
  assert.equal(second!.held, true, 'only one lock was lost');
  assert.equal(all.held, false);
  await all.release();
}

async function lockAllCase6({ client, id }: SuiteContext): Promise<void> {
  const [a, b] = [id('rel-a'), id('rel-b')];
  const locker = client();
  const all = await locker.lockAll([a, b]);
  await all.release();
  await all.release();
  assert.equal(all.held, false);
  {
    await using again = await client().lockAll([b, a], { timeoutMs: 0 });
    assert.equal(again.held, true);
  }
  const third = await client().tryLockAll([a, b]);
  assert.ok(third, 'await using released both');
  await third.release();
}

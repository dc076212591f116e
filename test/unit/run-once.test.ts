import assert from 'node:assert/strict';
import { after, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { randomBytes } from 'node:crypto';
import { createLocker, InvalidArgumentError, LockLostError, type Locker, type RunOnceResult } from '../../src/index.js';

const url = `memory://run-once-${randomBytes(4).toString('hex')}`;
const open: Locker[] = [];
function client(): Locker {
  const l = createLocker(url);
  open.push(l);
  return l;
}
after(() => Promise.allSettled(open.map((l) => l.close())));

/** Try the job every 50 ms until an instance runs it (bounded only to stop a hung test). */
async function nextRun(locker: Locker, name: string): Promise<RunOnceResult<string>> {
  for (let i = 0; i < 600; i += 1) {
    const r = await locker.runOnce(name, () => 'next', { atMostForMs: 5_000 });
    if (r.status === 'ran') return r;
    await sleep(50);
  }
  throw new Error('the lock never freed');
}

async function skipsWhenHeld(): Promise<void> {
  const [a, b] = [client(), client()];
  let release!: () => void;
  const gate = new Promise<void>((resolve) => (release = resolve));
  let started!: () => void;
  const running = new Promise<void>((resolve) => (started = resolve));
  const first = a.runOnce(
    'job:skip',
    async () => {
      started();
      await gate;
      return 1;
    },
    { atMostForMs: 30_000 },
  );
  await running;
  let called = false;
  const second = await b.runOnce('job:skip', () => (called = true), { atMostForMs: 30_000 });
  assert.deepEqual(second, { status: 'skipped' });
  assert.equal(called, false);
  release();
  const done = await first;
  assert.equal(done.status, 'ran');
  assert.equal(done.status === 'ran' && done.value, 1);
  assert.equal(done.status === 'ran' && typeof done.token, 'bigint');
  assert.equal((await b.runOnce('job:skip', () => 2, { atMostForMs: 1_000 })).status, 'ran', 'atLeastForMs 0: released at once');
}

async function atLeastKeepsOthersOut(): Promise<void> {
  const [a, b] = [client(), client()];
  const atLeastForMs = 1_500;
  const ran = await a.runOnce('job:min', () => 'fast', { atLeastForMs, atMostForMs: 60_000 });
  assert.equal(ran.status, 'ran');
  // The backend still holds it, for the minimum only (not the 60 s ceiling).
  const [holder] = (await b.inspect('job:min')).holders;
  assert.ok(holder, 'the backend keeps the hold after fn returned');
  assert.ok(holder.expiresInMs !== undefined && holder.expiresInMs <= atLeastForMs * 1.01 + 2, `left ${holder.expiresInMs} ms`);
  assert.deepEqual(await b.runOnce('job:min', () => 'twice', { atMostForMs: 60_000 }), { status: 'skipped' });
  // Closing the instance that ran does not delete the hold: the backend's lease ends it.
  await a.close();
  assert.deepEqual(await b.runOnce('job:min', () => 'twice', { atMostForMs: 60_000 }), { status: 'skipped' });
  assert.equal((await nextRun(b, 'job:min')).status, 'ran');
}

async function atMostEndsTheHold(): Promise<void> {
  const [a, b] = [client(), client()];
  const outcome = a.runOnce(
    'job:max',
    (lock) =>
      new Promise<string>((resolve) => {
        // A job that never ends by itself: only the signal stops it (the interval keeps the process up).
        const keepAlive = setInterval(() => undefined, 1_000);
        lock.signal.addEventListener(
          'abort',
          () => {
            clearInterval(keepAlive);
            resolve('stopped');
          },
          { once: true },
        );
      }),
    { atLeastForMs: 100, atMostForMs: 400 },
  );
  const error = await outcome.then(
    () => assert.fail('a job past atMostForMs does not resolve'),
    (e: unknown) => e,
  );
  assert.ok(error instanceof LockLostError);
  assert.equal(error.result, 'stopped');
  assert.equal((await nextRun(b, 'job:max')).status, 'ran');
}

async function errorsPropagateAndKeepTheMinimum(): Promise<void> {
  const [a, b] = [client(), client()];
  const boom = new Error('boom');
  await assert.rejects(
    a.runOnce(
      'job:err',
      () => {
        throw boom;
      },
      { atLeastForMs: 1_000, atMostForMs: 10_000 },
    ),
    (e) => e === boom,
  );
  assert.deepEqual(await b.runOnce('job:err', () => 'twice', { atMostForMs: 10_000 }), { status: 'skipped' });
  assert.equal((await nextRun(b, 'job:err')).status, 'ran');
}

async function typedErrors(): Promise<void> {
  const l = client();
  const bad = async (options: unknown, argument: string): Promise<void> => {
    // @ts-expect-error -- deliberately malformed input
    const p = l.runOnce('job:bad', () => 1, options);
    await assert.rejects(p, (e) => e instanceof InvalidArgumentError && e.argument === argument, JSON.stringify(options));
  };
  await bad({ atLeastForMs: 2_000, atMostForMs: 1_000 }, 'atLeastForMs');
  await bad({ atLeastForMs: -1, atMostForMs: 1_000 }, 'atLeastForMs');
  await bad({ atMostForMs: -5 }, 'atMostForMs');
  await bad({ atMostForMs: 0 }, 'atMostForMs');
  await bad({ atMostForMs: Number.NaN }, 'atMostForMs');
  await bad({}, 'atMostForMs');
  await bad(undefined, 'options');
  await bad({ atMostForMs: 1_000, lockAtLeastFor: 500 }, 'lockAtLeastFor');
  // @ts-expect-error -- not a function
  await assert.rejects(l.runOnce('job:bad', 'nope', { atMostForMs: 1_000 }), InvalidArgumentError);
  // Nothing was taken by a rejected call.
  assert.equal((await l.runOnce('job:bad', () => 1, { atMostForMs: 1_000 })).status, 'ran');
}

async function longJobStaysHeld(): Promise<void> {
  const [a, b] = [client(), client()];
  const job = a.runOnce(
    'job:long',
    async (lock) => {
      // Well past the first lease (the 300 ms minimum): renewals keep it.
      await sleep(1_200);
      return lock.signal.aborted;
    },
    { atLeastForMs: 300, atMostForMs: 60_000 },
  );
  await sleep(700);
  assert.deepEqual(await b.runOnce('job:long', () => 'twice', { atMostForMs: 60_000 }), { status: 'skipped' });
  const done = await job;
  assert.equal(done.status === 'ran' && done.value, false, 'the signal never aborted');
  assert.equal((await b.runOnce('job:long', () => 'next', { atMostForMs: 60_000 })).status, 'ran', 'released once past the minimum');
}

async function renewedThenEndsBeforeMinimum(): Promise<void> {
  const [a, b] = [client(), client()];
  // Ends after the first renewal (about a third into the 1.5 s minimum), before the minimum.
  const job = a.runOnce('job:mid', () => sleep(900).then(() => 'done'), { atLeastForMs: 1_500, atMostForMs: 60_000 });
  await sleep(1_100);
  assert.deepEqual(await b.runOnce('job:mid', () => 'twice', { atMostForMs: 60_000 }), { status: 'skipped' });
  assert.equal((await job).status, 'ran');
  // Resolved once the minimum passed, and released then (not left to the renewed, longer lease).
  assert.equal((await b.runOnce('job:mid', () => 'next', { atMostForMs: 60_000 })).status, 'ran');
}

describe('runOnce (memory://)', () => {
  test('a job ending after a renewal but before atLeastForMs: held to the minimum, then released', renewedThenEndsBeforeMinimum);
  test('a job running past atLeastForMs is renewed, and released when it ends', longJobStaysHeld);
  test('another instance holding the job lock: skipped at once, fn not called', skipsWhenHeld);
  test('atLeastForMs keeps the next instance out after fn returned at once, even after close()', atLeastKeepsOthersOut);
  test('atMostForMs ends the hold and aborts the signal fn was given', atMostEndsTheHold);
  test("fn's error propagates and the lock still respects atLeastForMs", errorsPropagateAndKeepTheMinimum);
  test('bad input: typed InvalidArgumentError naming the argument', typedErrors);
});

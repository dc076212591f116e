import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { LockLostError, type Locker, type Lock } from '../../../src/index.js';
import { T, type SuiteContext } from '../suite.js';

/** `runOnce`: the scheduled-job lock (skip when held; held at least / at most so long). */
export function runOnceCases(ctx: SuiteContext): void {
  describe('runOnce: the scheduled-job lock', () => {
    test('another instance holding the job: skipped at once, fn not called', T, () => runOnceSkip(ctx));

    test('atLeastForMs keeps the next instance out after a job that returned at once, then frees', T, () => runOnceAtLeast(ctx));

    test('atMostForMs ends the hold: the signal aborts and the next instance runs', T, () => runOnceAtMost(ctx));
  });
}

/** Try the job until an instance runs it (bounded only to stop a hung case). */
async function runsEventually(locker: Locker, name: string): Promise<void> {
  for (let i = 0; i < 1_200; i += 1) {
    if ((await locker.runOnce(name, () => 'next', { atMostForMs: 10_000 })).status === 'ran') return;
    await sleep(50);
  }
  assert.fail(`'${name}' never freed`);
}

async function runOnceSkip({ client, id }: SuiteContext): Promise<void> {
  const name = id('once-skip');
  const [a, b] = [client(), client()];
  let release!: () => void;
  const gate = new Promise<void>((resolve) => (release = resolve));
  let started!: () => void;
  const running = new Promise<void>((resolve) => (started = resolve));
  const first = a.runOnce(
    name,
    async () => {
      started();
      await gate;
      return 'one';
    },
    { atMostForMs: 30_000 },
  );
  await running;
  let called = false;
  assert.deepEqual(await b.runOnce(name, () => (called = true), { atMostForMs: 30_000 }), { status: 'skipped' });
  assert.equal(called, false);
  release();
  const done = await first;
  assert.equal(done.status === 'ran' && done.value, 'one');
  assert.equal((await b.runOnce(name, () => 'two', { atMostForMs: 30_000 })).status, 'ran', 'no minimum: freed at once');
}

async function runOnceAtLeast({ client, id, shortTtl }: SuiteContext): Promise<void> {
  const name = id('once-min');
  const [a, b] = [client(), client()];
  const atLeastForMs = Math.max(1_500, 3 * shortTtl);
  const ran = await a.runOnce(name, () => 'fast', { atLeastForMs, atMostForMs: 60_000 });
  assert.equal(ran.status, 'ran');
  assert.deepEqual(await b.runOnce(name, () => 'twice', { atMostForMs: 60_000 }), { status: 'skipped' });
  await runsEventually(b, name);
}

/** A job that ends only when its signal aborts (a ref'd interval keeps the process up meanwhile). */
function untilAborted(lock: Lock): Promise<string> {
  return new Promise((resolve) => {
    const keepAlive = setInterval(() => undefined, 1_000);
    lock.signal.addEventListener(
      'abort',
      () => {
        clearInterval(keepAlive);
        resolve('stopped');
      },
      { once: true },
    );
  });
}

async function runOnceAtMost({ client, id, shortTtl }: SuiteContext): Promise<void> {
  const name = id('once-max');
  const [a, b] = [client(), client()];
  const error = await a.runOnce(name, untilAborted, { atMostForMs: 2 * shortTtl }).then(
    () => assert.fail('a job past atMostForMs does not resolve'),
    (e: unknown) => e,
  );
  assert.ok(error instanceof LockLostError, String(error));
  assert.equal(error.result, 'stopped');
  await runsEventually(b, name);
}

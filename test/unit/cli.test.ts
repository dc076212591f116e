import assert from 'node:assert/strict';
import { test } from 'node:test';
import { createLocker } from '../../src/index.js';
import { runDemo } from '../../src/cli/demo.js';
import { main } from '../../src/cli/main.js';
import { EXIT, runWithLock } from '../../src/cli/run.js';
import { FaultyBackend } from './faulty.js';
import { parseDuration } from '../../src/cli/duration.js';
import { jainIndex, longestStreak, percentiles } from '../../src/cli/bench.js';

test('the demo: without a lock the balance goes negative, with a lock it never does', async () => {
  const lines: string[] = [];
  const { unlocked, locked } = await runDemo({ write: (l) => lines.push(l) });
  assert.ok(unlocked.finalBalance < 0);
  assert.equal(locked.finalBalance, 50);
  assert.equal(locked.withdrawals, 1);
  assert.equal(locked.tokens.length, 1);
  assert.ok(lines.some((l) => l.includes('fencing tokens')));
});

test('locksmith run passes the token to the child and exits with its status', async () => {
  const code = await main([
    'run',
    'cli:run',
    '--backend',
    'memory://cli',
    '--',
    'sh',
    '-c',
    'test -n "$LOCKSMITH_TOKEN" && test "$LOCKSMITH_LOCK_ID" = cli:run && exit 7',
  ]);
  assert.equal(code, 7);
});

test('locksmith run --no-wait exits 75 when another holds the lock', async () => {
  const other = createLocker('memory://cli');
  const lock = await other.lock('cli:busy');
  const code = await main(['run', 'cli:busy', '--backend', 'memory://cli', '--no-wait', '--', 'true']);
  assert.equal(code, EXIT.NOT_OBTAINED);
  const waited = await main(['run', 'cli:busy', '--backend', 'memory://cli', '--wait', '200ms', '--', 'true']);
  assert.equal(waited, EXIT.NOT_OBTAINED);
  await lock.release();
  await other.close();
});

test('locksmith run stops the child when the lock is lost and exits 76', async () => {
  // A backend that stops answering renewals: the 300 ms lease runs out while `sleep 30` runs.
  const backend = new FaultyBackend('cli-lost');
  backend.extendError = new Error('backend unreachable');
  const locker = createLocker(backend, { ttlMs: 300 });
  const started = performance.now();
  const code = await runWithLock(locker, {
    lockId: 'cli:lost',
    command: ['sleep', '30'],
    ttlMs: 300,
    waitMs: 0,
    fair: false,
    graceMs: 200,
    progress: () => undefined,
  });
  assert.equal(code, EXIT.LOST);
  assert.ok(performance.now() - started < 25_000, 'the child was stopped, not waited for');
  await locker.close();
});

test('locksmith rejects bad arguments with the usage status', async () => {
  assert.equal(await main(['run', 'x', '--ttl', '10', '--', 'true']), EXIT.USAGE);
  assert.equal(await main(['run', 'x', '--backend', 'nope://', '--', 'true']), EXIT.USAGE);
  assert.equal(await main(['frobnicate']), EXIT.USAGE);
});

test('locksmith status prints holder and token', async () => {
  const locker = createLocker('memory://cli-status');
  const lock = await locker.lock('st');
  const chunks: string[] = [];
  const write = process.stdout.write.bind(process.stdout);
  process.stdout.write = ((c: string | Uint8Array) => {
    chunks.push(String(c));
    return true;
  }) as typeof process.stdout.write;
  try {
    assert.equal(await main(['status', 'st', '--backend', 'memory://cli-status', '--json']), 0);
  } finally {
    process.stdout.write = write;
  }
  const state = JSON.parse(chunks.join('')) as { holders: { token: string }[] };
  assert.equal(state.holders[0]?.token, String(lock.token));
  await locker.close();
});

test('durations need a unit', () => {
  assert.equal(parseDuration('10s', 'x'), 10_000);
  assert.equal(parseDuration('250ms', 'x'), 250);
  assert.equal(parseDuration('1.5m', 'x'), 90_000);
  assert.throws(() => parseDuration('10', 'x'), /unit/);
  assert.throws(() => parseDuration('0s', 'x'), /> 0/);
});

test('benchmark statistics: Jain index, longest streak, percentiles', () => {
  assert.equal(jainIndex([5, 5, 5, 5]), 1);
  assert.equal(jainIndex([20, 0, 0, 0]), 0.25);
  assert.equal(longestStreak([1, 1, 2, 1, 1, 1, 3]), 3);
  const p = percentiles([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
  assert.equal(p.p50, 5);
  assert.equal(p.p99, 10);
});

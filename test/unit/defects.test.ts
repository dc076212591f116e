/**
 * Regression tests for core defects: each fails on the code before its fix. Cross-backend ones live in the conformance suite.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { randomBytes } from 'node:crypto';
import { BackendUnavailableError, createLocker, InvalidArgumentError, minTtlMs } from '../../src/index.js';
import { MemoryBackend } from '../../src/backends/memory/index.js';
import { FaultyBackend } from './faulty.js';
import { waitingOn } from '../helpers.js';

const table = (): string => `defects-${randomBytes(4).toString('hex')}`;

test(
  'a release wakes only the waiter it lets in (1,000 fair and unfair waiters, one wake-up per hand-off)',
  { timeout: 120_000 },
  async () => {
    for (const fair of [true, false]) {
      const name = table();
      const probe = new MemoryBackend(name);
      const holder = createLocker(`memory://${name}`);
      const held = await holder.lock('hot', { fair });
      const locker = createLocker(`memory://${name}`);
      let queued = 0;
      locker.on('waiting', () => void (queued += 1));
      const n = 1_000;
      const done = Array.from({ length: n }, () => locker.lock('hot', { fair }).then((l) => l.release()));
      while (queued < n) await new Promise((r) => setImmediate(r));
      const before = probe.wakeups;
      await held.release();
      await Promise.all(done);
      const wakeups = probe.wakeups - before;
      assert.ok(wakeups <= n + 5, `${wakeups} wake-ups for ${n} hand-offs (fair: ${fair})`);
      await Promise.all([holder.close(), locker.close(), probe.close()]);
    }
  },
);

test('10,000 waiters on one key all get through, with no MaxListenersExceededWarning', { timeout: 120_000 }, async () => {
  const warnings: string[] = [];
  const onWarning = (w: Error): void => void warnings.push(`${w.name}: ${w.message}`);
  process.on('warning', onWarning);
  try {
    const name = table();
    const holder = createLocker(`memory://${name}`);
    const held = await holder.lock('k');
    const locker = createLocker(`memory://${name}`);
    const shared = new AbortController();
    let queued = 0;
    locker.on('waiting', () => void (queued += 1));
    const n = 10_000;
    let granted = 0;
    const done = Array.from({ length: n }, (_, i) =>
      locker.lock('k', i % 2 === 0 ? { signal: shared.signal } : {}).then(async (l) => {
        granted += 1;
        await l.release();
      }),
    );
    while (queued < n) await new Promise((r) => setImmediate(r));
    await held.release();
    await Promise.all(done);
    assert.equal(granted, n);
    await Promise.all([holder.close(), locker.close()]);
  } finally {
    process.off('warning', onWarning);
  }
  assert.deepEqual(
    warnings.filter((w) => w.includes('MaxListeners')),
    [],
  );
});

test('memory:// keeps no entry for an idle lock id, and tokens still increase', async () => {
  const name = table();
  const probe = new MemoryBackend(name);
  const locker = createLocker(`memory://${name}`);
  const n = 200_000;
  let last = 0n;
  for (let i = 0; i < n; i++) {
    const lock = await locker.lock(`id-${i}`);
    assert.ok(lock.token > last);
    last = lock.token;
    await lock.release();
  }
  assert.equal(probe.entries, 0, 'released ids leave nothing behind');
  const again = await locker.lock('id-0');
  assert.ok(again.token > last, 'a forgotten id still gets a larger token');
  await again.release();
  await Promise.all([locker.close(), probe.close()]);
});

test('expired holds of vanished clients are swept on close', async () => {
  const name = table();
  const probe = new MemoryBackend(name);
  const backend = new FaultyBackend(name);
  const locker = createLocker(backend, { ttlMs: 50, autoExtend: false });
  for (let i = 0; i < 100; i++) await locker.lock(`gone-${i}`);
  backend.releaseError = new Error('vanished');
  await new Promise((r) => setTimeout(r, 120));
  await locker.close();
  await probe.close();
  assert.equal(probe.entries, 0);
});

test('withLock keeps the callback error and attaches the release failure', async () => {
  const backend = new FaultyBackend(table());
  const locker = createLocker(backend);
  const boom = new Error('callback failed');
  const err = await locker
    .withLock('x', () => {
      backend.releaseError = new Error('release failed');
      throw boom;
    })
    .catch((e: unknown) => e);
  assert.equal(err, boom);
  const attached = (err as { releaseError?: unknown }).releaseError;
  assert.ok(attached instanceof BackendUnavailableError);
  assert.equal((attached.cause as Error).message, 'release failed');
  backend.releaseError = undefined;
  await locker.close();
});

test('the minimum ttl is the smallest with a positive validity, and it works', async () => {
  const min = minTtlMs(0.01);
  assert.ok(min > 5 && min < 20, `minimum ${min}`);
  assert.throws(() => createLocker('memory://', { ttlMs: min - 1 }), InvalidArgumentError);
  const locker = createLocker(`memory://${table()}`, { ttlMs: min });
  const lock = await locker.tryLock('tiny');
  assert.ok(lock, 'a free lock is granted at the minimum ttl');
  await lock.release();
  await locker.close();
});

test('a nested acquisition must say reentrant; with true it re-enters, with false it waits', async () => {
  const locker = createLocker(`memory://${table()}`);
  const order: string[] = [];
  await locker.withLock('r', async () => {
    await assert.rejects(locker.lock('r'), (e: unknown) => e instanceof InvalidArgumentError && e.argument === 'reentrant');
    const inner = await locker.lock('r', { reentrant: true });
    assert.equal(inner.reentered, true);
    await inner.release();
    const waiter = locker.lock('r', { reentrant: false }).then((l) => {
      order.push('forked');
      return l.release();
    });
    void waiter;
    await waitingOn(locker, 'r');
    order.push('outer');
  });
  await new Promise((r) => setTimeout(r, 50));
  assert.deepEqual(order, ['outer', 'forked']);
  await locker.close();
});

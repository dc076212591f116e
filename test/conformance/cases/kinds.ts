import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Locker } from '../../../src/index.js';
import { waitingOn } from '../../helpers.js';
import { T, type SuiteContext } from '../suite.js';

/** Fairness, read-write locks, semaphores, lockDelay. */
export function kindCases(ctx: SuiteContext): void {
  const { caps } = ctx;
  if (caps.fair) {
    describe('fairness', () => {
      test('fair mode grants 10 waiters in arrival order', T, () => fairModeGrants10Waiters(ctx));

      test('fair mode: a client cannot re-take the lock while others wait (no streak)', T, () => fairModeClientCannotRe(ctx));
    });
  }

  if (caps.shared) {
    describe('read-write locks', () => {
      test('many readers hold together', T, () => manyReadersHoldTogether(ctx));

      test('a writer holds alone: no reader or writer beside it, and it waits for readers', T, () => writerHoldsAloneNoReader(ctx));

      test('a waiting writer is not starved by a stream of readers', T, () => waitingWriterStarvedByStream(ctx));

      test('read and write holds get increasing tokens', T, () => readWriteHoldsGetIncreasing(ctx));
    });
  }

  if (caps.permits) {
    describe('semaphores', () => {
      test('a semaphore of 3 permits never has more than 3 holders among 10 clients', T, () => semaphore3PermitsNeverHas(ctx));

      test('tryAcquire gets each free permit and null when all are taken', T, () => tryAcquireGetsEachFreePermit(ctx));

      test("a crashed holder's permit comes back after its ttl", T, () => crashedHoldersPermitComesBack(ctx));
    });
  }

  if (caps.lockDelay) {
    describe('lockDelay', () => {
      test('after a holder vanishes, nobody gets the lock for lockDelay past its ttl', T, () => afterHolderVanishesNobodyGets(ctx));

      test('the lock delay ends and the lock is granted again', T, () => lockDelayEndsLockGranted(ctx));

      test('a clean release does not impose the lock delay', T, () => cleanReleaseImposeLockDelay(ctx));
    });
  }

  describe('one id is one lock across kinds; no id is a prefix of another', () => {
    test('ids that look like paths or internal names are independent locks', T, () => idsLookLikePathsOr(ctx));

    if (caps.shared) {
      test('a mutex and a read-write lock of the same id exclude each other', T, () => mutexReadWriteLockSame(ctx));
    }

    if (caps.permits) {
      test('a mutex and a semaphore of the same id exclude each other', T, () => mutexSemaphoreSameIdExclude(ctx));

      test("a mutex id that ends like a semaphore's internals does not block that semaphore", T, () => mutexIdEndsLikeSemaphores(ctx));
    }
  });
}

async function fairModeGrants10Waiters(ctx: SuiteContext): Promise<void> {
  const { client, id } = ctx;
  const lockId = id('fifo');
  const holder = await client().lock(lockId, { fair: true });
  const order: number[] = [];
  const done: Promise<void>[] = [];
  for (let i = 0; i < 10; i++) {
    const c = client();
    const waiting = waitingOn(c, lockId);
    done.push(
      c.lock(lockId, { fair: true, timeoutMs: 120_000 }).then(async (lock) => {
        order.push(i);
        await lock.release();
      }),
    );
    await waiting;
  }
  await holder.release();
  await Promise.all(done);
  assert.deepEqual(order, [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
}

async function fairModeClientCannotRe(ctx: SuiteContext): Promise<void> {
  const { client, id } = ctx;
  const lockId = id('streak');
  const a = client();
  const order: string[] = [];
  const first = await a.lock(lockId, { fair: true });
  const queued: Promise<void>[] = [];
  for (const name of ['b', 'c']) {
    const c = client();
    const waiting = waitingOn(c, lockId);
    queued.push(
      c.lock(lockId, { fair: true, timeoutMs: 120_000 }).then(async (lock) => {
        order.push(name);
        await sleep(5);
        await lock.release();
      }),
    );
    await waiting;
  }
  await first.release();
  const again = await a.lock(lockId, { fair: true, timeoutMs: 120_000 });
  order.push('a');
  await again.release();
  await Promise.all(queued);
  assert.deepEqual(order, ['b', 'c', 'a']);
}

async function manyReadersHoldTogether(ctx: SuiteContext): Promise<void> {
  const { client, id } = ctx;
  const lockId = id('readers');
  const readers = await Promise.all([client(), client(), client()].map((c) => c.readWriteLock(lockId).read({ timeoutMs: 30_000 })));
  assert.ok(readers.every((r) => r.held));
  await Promise.all(readers.map((r) => r.release()));
}

async function writerHoldsAloneNoReader(ctx: SuiteContext): Promise<void> {
  const { client, id } = ctx;
  const lockId = id('writer');
  const w = await client().readWriteLock(lockId).write();
  assert.equal(await client().readWriteLock(lockId).tryRead(), null);
  assert.equal(await client().readWriteLock(lockId).tryWrite(), null);
  await w.release();
  const r = await client().readWriteLock(lockId).read();
  assert.equal(await client().readWriteLock(lockId).tryWrite(), null);
  await r.release();
}

async function waitingWriterStarvedByStream(ctx: SuiteContext): Promise<void> {
  const { client, id } = ctx;
  const lockId = id('no-starve');
  const r1 = await client().readWriteLock(lockId).read();
  const wc = client();
  const waiting = waitingOn(wc, lockId);
  const writer = wc.readWriteLock(lockId).write({ timeoutMs: 60_000 });
  await waiting;
  // A reader arriving after the writer must queue behind it.
  assert.equal(await client().readWriteLock(lockId).tryRead(), null);
  const lateReader = client().readWriteLock(lockId).read({ timeoutMs: 60_000 });
  await r1.release();
  const w = await writer;
  assert.equal(w.held, true);
  await w.release();
  const r2 = await lateReader;
  await r2.release();
}

async function readWriteHoldsGetIncreasing(ctx: SuiteContext): Promise<void> {
  const { client, id } = ctx;
  const lockId = id('rw-tokens');
  const rw = client().readWriteLock(lockId);
  const r = await rw.read();
  await r.release();
  const w = await rw.write();
  await w.release();
  assert.ok(w.token > r.token);
}

async function semaphore3PermitsNeverHas(ctx: SuiteContext): Promise<void> {
  const { client, id } = ctx;
  const lockId = id('sem');
  let inside = 0;
  let maxInside = 0;
  await Promise.all(
    Array.from({ length: 10 }, async () => {
      const sem = client().semaphore(lockId, { permits: 3 });
      for (let i = 0; i < 2; i++) {
        const permit = await sem.acquire({ timeoutMs: 120_000 });
        inside += 1;
        maxInside = Math.max(maxInside, inside);
        await sleep(5);
        inside -= 1;
        await permit.release();
      }
    }),
  );
  assert.ok(maxInside <= 3, `max holders ${maxInside}`);
  assert.ok(maxInside >= 1);
}

async function tryAcquireGetsEachFreePermit(ctx: SuiteContext): Promise<void> {
  const { client, id } = ctx;
  const lockId = id('sem-try');
  const sem = (): ReturnType<Locker['semaphore']> => client().semaphore(lockId, { permits: 2 });
  const p1 = await sem().tryAcquire();
  const p2 = await sem().tryAcquire();
  assert.ok(p1 && p2);
  assert.notEqual(p1.token, p2.token);
  assert.equal(await sem().tryAcquire(), null);
  await p1.release();
  const p3 = await sem().tryAcquire();
  assert.ok(p3);
  await Promise.all([p2.release(), p3.release()]);
}

async function crashedHoldersPermitComesBack(ctx: SuiteContext): Promise<void> {
  const { client, id, shortTtl, crash } = ctx;
  const lockId = id('sem-crash');
  const doomed = client({ ttlMs: shortTtl });
  await doomed.semaphore(lockId, { permits: 1 }).acquire();
  await crash(doomed);
  const permit = await client().semaphore(lockId, { permits: 1 }).acquire({ timeoutMs: 60_000 });
  assert.equal(permit.held, true);
  await permit.release();
}

async function afterHolderVanishesNobodyGets(ctx: SuiteContext): Promise<void> {
  const { client, id, shortTtl, crash } = ctx;
  const lockId = id('lock-delay');
  const doomed = client({ ttlMs: shortTtl, autoExtend: false });
  await doomed.lock(lockId, { lockDelayMs: 10_000 });
  await crash(doomed);
  await sleep(shortTtl * 2);
  assert.equal(await client().tryLock(lockId), null, 'still blocked by the lock delay');
}

async function lockDelayEndsLockGranted(ctx: SuiteContext): Promise<void> {
  const { client, id, shortTtl, crash } = ctx;
  const lockId = id('lock-delay-end');
  const doomed = client({ ttlMs: shortTtl, autoExtend: false });
  await doomed.lock(lockId, { lockDelayMs: shortTtl });
  await crash(doomed);
  const next = await client().lock(lockId, { timeoutMs: 60_000 });
  assert.equal(next.held, true);
  await next.release();
}

async function cleanReleaseImposeLockDelay(ctx: SuiteContext): Promise<void> {
  const { client, id } = ctx;
  const lockId = id('lock-delay-release');
  const lock = await client().lock(lockId, { lockDelayMs: 60_000 });
  await lock.release();
  const next = await client().tryLock(lockId);
  assert.ok(next);
  await next.release();
}

async function idsLookLikePathsOr(ctx: SuiteContext): Promise<void> {
  const { client, id } = ctx;
  const base = id('paths');
  const names = [base, `${base}/locks`, `${base}/leases`, `${base}/lock-`, `${base}/__READ__`, `${base}/x/y`];
  const locks = await Promise.all(names.map((n) => client().lock(n, { timeoutMs: 30_000 })));
  for (const [i, n] of names.entries()) {
    const state = await client().inspect(n);
    assert.deepEqual(
      state.holders.map((h) => h.token),
      [locks[i]!.token],
      `inspect('${n}') shows exactly its own holder`,
    );
  }
  await Promise.all(locks.map((l) => l.release()));
}

async function mutexReadWriteLockSame(ctx: SuiteContext): Promise<void> {
  const { client, id } = ctx;
  const lockId = id('mutex-rw');
  const m = await client().lock(lockId);
  assert.equal(await client().readWriteLock(lockId).tryRead(), null);
  assert.equal(await client().readWriteLock(lockId).tryWrite(), null);
  await m.release();
  const r = await client().readWriteLock(lockId).read({ timeoutMs: 30_000 });
  assert.equal(await client().tryLock(lockId), null);
  await r.release();
}

async function mutexSemaphoreSameIdExclude(ctx: SuiteContext): Promise<void> {
  const { client, id } = ctx;
  const lockId = id('mutex-sem');
  const m = await client().lock(lockId);
  assert.equal(await client().semaphore(lockId, { permits: 3 }).tryAcquire(), null);
  await m.release();
  const p = await client().semaphore(lockId, { permits: 3 }).acquire({ timeoutMs: 30_000 });
  assert.equal(await client().tryLock(lockId), null);
  const state = await client().inspect(lockId);
  assert.deepEqual(
    state.holders.map((h) => h.kind),
    ['semaphore'],
  );
  await p.release();
  const again = await client().tryLock(lockId);
  assert.ok(again);
  await again.release();
}

async function mutexIdEndsLikeSemaphores(ctx: SuiteContext): Promise<void> {
  const { client, id } = ctx;
  const base = id('sem-internals');
  const held = await Promise.all(['locks', 'leases'].map((s) => client().lock(`${base}/${s}`)));
  const p = await client().semaphore(base, { permits: 1 }).tryAcquire();
  assert.ok(p, 'the semaphore is free');
  const state = await client().inspect(base);
  assert.equal(state.holders.length, 1);
  await p.release();
  await Promise.all(held.map((l) => l.release()));
}

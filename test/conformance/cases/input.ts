import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { createLocker, InvalidArgumentError, LockerClosedError, LockLostError, LockTimeoutError, minTtlMs } from '../../../src/index.js';
import { blackHole, waitingOn } from '../../helpers.js';
import { T, type SuiteContext } from '../suite.js';

/** Bad input, close(). */
export function inputCases(ctx: SuiteContext): void {
  const { client, id, caps, target } = ctx;
  describe('bad input gets a typed error', () => {
    const bad = async (p: Promise<unknown>, argument: string): Promise<void> => {
      await assert.rejects(p, (e: unknown) => {
        assert.ok(e instanceof InvalidArgumentError, `expected InvalidArgumentError, got ${String(e)}`);
        assert.equal(e.code, 'INVALID_ARGUMENT');
        assert.equal(e.argument, argument);
        return true;
      });
    };

    test('an empty lockId', T, async () => {
      await bad(client().lock(''), 'lockId');
      await bad(client().tryLock(''), 'lockId');
    });

    test('a lockId that is not a string', T, async () => {
      await bad(client().lock(42 as unknown as string), 'lockId');
      await bad(client().lock(undefined as unknown as string), 'lockId');
    });

    test('a lockId over the byte limit, while exactly the limit works', T, async () => {
      await bad(client().lock('é'.repeat(513)), 'lockId');
      const lock = await client().lock(`${id('max')}`.padEnd(1024, 'x'));
      await lock.release();
    });

    test('lock ids with spaces, slashes and unicode work and stay distinct', T, async () => {
      const base = id('odd');
      const names = [`${base} with spaces`, `${base}/a/b`, `${base}:ключ:鍵`, `${base}:{braces}`];
      const locks = await Promise.all(names.map((n) => client().lock(n)));
      for (const [i, l] of locks.entries()) assert.equal(l.lockId, names[i]);
      await Promise.all(locks.map((l) => l.release()));
    });

    test('ttl ≤ 0, NaN, Infinity or not a number', T, async () => {
      for (const ttlMs of [0, -1, Number.NaN, Number.POSITIVE_INFINITY, '1000' as unknown as number]) {
        await bad(client().lock(id('ttl'), { ttlMs }), 'ttlMs');
        assert.throws(() => createLocker('memory://', { ttlMs }), InvalidArgumentError);
      }
    });

    test('negative timeoutMs and waitMs', T, async () => {
      await bad(client().lock(id('neg'), { timeoutMs: -1 }), 'timeoutMs');
      await bad(client().tryLock(id('neg'), { waitMs: -5 }), 'waitMs');
    });

    test('an empty owner', T, async () => {
      await bad(client().lock(id('owner'), { owner: '' }), 'owner');
    });

    test('a signal that is not an AbortSignal', T, async () => {
      await bad(client().lock(id('sig'), { signal: {} as AbortSignal }), 'signal');
    });

    if (caps.permits) {
      test('permits < 1 or not an integer', T, async () => {
        for (const permits of [0, -2, 1.5, Number.NaN]) {
          assert.throws(
            () => client().semaphore(id('perm'), { permits }),
            (e) => e instanceof InvalidArgumentError && e.argument === 'permits',
          );
        }
      });
    }

    test('a malformed backend URL or an unknown scheme', T, () => {
      assert.throws(
        () => createLocker('not a url'),
        (e) => e instanceof InvalidArgumentError && e.argument === 'url',
      );
      assert.throws(
        () => createLocker('gopher://127.0.0.1:1'),
        (e) => e instanceof InvalidArgumentError && e.argument === 'url',
      );
      assert.throws(() => createLocker(''), InvalidArgumentError);
    });
  });

  describe('close()', () => {
    test('close() rejects waiting calls with LockerClosedError', T, async () => {
      const lockId = id('close-waiters');
      const held = await client().lock(lockId);
      const locker = client();
      const waiting = waitingOn(locker, lockId);
      const p = locker.lock(lockId);
      await waiting;
      await locker.close();
      await assert.rejects(p, LockerClosedError);
      await held.release();
    });

    test('close() releases held locks, aborts their signals, and refuses new calls', T, async () => {
      const lockId = id('close-held');
      const locker = client();
      const lock = await locker.lock(lockId);
      await locker.close();
      assert.ok(lock.signal.aborted);
      assert.ok(lock.signal.reason instanceof LockLostError);
      await assert.rejects(locker.lock(lockId), LockerClosedError);
      const next = await client().tryLock(lockId);
      assert.ok(next, 'released on close');
      await next.release();
    });

    test('close() leaves no timer of its own behind', T, async () => {
      const timers = (): number => process.getActiveResourcesInfo().filter((r) => r === 'Timeout').length;
      const before = timers();
      const locker = target.createLocker({ ttlMs: 2_000 });
      const lock = await locker.lock(id('timers'));
      assert.ok(lock.held);
      await locker.close();
      await sleep(50);
      assert.ok(timers() <= before, `timers before ${before}, after close ${timers()}`);
    });
  });

  describe('wait bounds: at least one attempt, then wait at most the bound', () => {
    test('a bound shorter than one attempt still obtains a free lock, on every call', T, async () => {
      const locker = client();
      // Connected first: the bound covers connecting too, and this case is about the attempt.
      await (await locker.lock(id('warm-up'))).release();
      for (let i = 0; i < 10; i++) {
        const lockId = id('short-bound');
        const tried = await locker.tryLock(lockId, { waitMs: 1 });
        assert.ok(tried, `tryLock({ waitMs: 1 }) on a free lock (call ${i}) got nothing`);
        await tried.release();
        const locked = await locker.lock(lockId, { timeoutMs: 1 });
        assert.ok(locked.token > tried.token);
        await locked.release();
      }
    });

    test('a bound shorter than one attempt on a held lock: not obtained, nothing left behind', T, async () => {
      const lockId = id('short-bound-held');
      const held = await client().lock(lockId);
      const locker = client();
      await (await locker.lock(id('warm-up'))).release();
      assert.equal(await locker.tryLock(lockId, { waitMs: 1 }), null);
      await assert.rejects(locker.lock(lockId, { timeoutMs: 1 }), LockTimeoutError);
      if (caps.fair) await assert.rejects(locker.lock(lockId, { timeoutMs: 1, fair: true }), LockTimeoutError);
      await held.release();
      const next = await client().tryLock(lockId, caps.fair ? { fair: true } : {});
      assert.ok(next, 'no queue entry of the timed-out calls stands in front');
      await next.release();
    });
  });

  describe('tiny ttls, many waiters, black-hole servers', () => {
    test('a ttl that leaves no valid lease is rejected, stating the minimum', T, async () => {
      const min = minTtlMs(0.01);
      for (const ttlMs of [1, 5, min - 1]) {
        await assert.rejects(client().lock(id('tiny'), { ttlMs }), (e: unknown) => {
          assert.ok(e instanceof InvalidArgumentError);
          assert.equal(e.argument, 'ttlMs');
          assert.match(e.message, new RegExp(`minimum is ${min} ms`));
          return true;
        });
        await assert.rejects(client().tryLock(id('tiny'), { ttlMs }), InvalidArgumentError);
        assert.throws(() => target.createLocker({ ttlMs }), InvalidArgumentError);
      }
    });

    test('hundreds of concurrent waits on one locker raise no MaxListenersExceededWarning', T, async () => {
      const warnings: string[] = [];
      const onWarning = (w: Error): void => {
        warnings.push(`${w.name}: ${w.message}`);
      };
      process.on('warning', onWarning);
      try {
        const lockId = id('listeners');
        const held = await client().lock(lockId);
        const locker = client();
        const shared = new AbortController();
        const waits = Array.from({ length: 200 }, (_, i) =>
          locker.lock(lockId, { timeoutMs: 60_000, ...(i % 2 === 0 ? { signal: shared.signal } : {}) }).then((l) => l.release()),
        );
        await sleep(200);
        await held.release();
        await Promise.all(waits);
        await sleep(20);
      } finally {
        process.off('warning', onWarning);
      }
      assert.deepEqual(
        warnings.filter((w) => w.includes('MaxListeners')),
        [],
      );
    });

    const blackHoleUrl = target.blackHoleUrl?.bind(target);
    if (blackHoleUrl) {
      describe('a server that accepts and never answers', () => {
        const slowConnect = { connectTimeoutMs: 60_000 };

        test('timeoutMs bounds the connect phase: LockTimeoutError, not a wait for the connect timeout', T, async () => {
          const hole = await blackHole();
          try {
            const locker = createLocker(blackHoleUrl(hole.port), slowConnect);
            await assert.rejects(locker.lock(id('bh-timeout'), { timeoutMs: 300 }), LockTimeoutError);
            assert.equal(await locker.tryLock(id('bh-try'), { waitMs: 300 }), null);
            await locker.close();
          } finally {
            await hole.close();
          }
        });

        test("the caller's signal ends a wait in the connect phase with its reason", T, async () => {
          const hole = await blackHole();
          try {
            const locker = createLocker(blackHoleUrl(hole.port), slowConnect);
            const reason = new Error('caller left');
            const ctl = new AbortController();
            const p = locker.lock(id('bh-abort'), { signal: ctl.signal });
            setTimeout(() => ctl.abort(reason), 200);
            await assert.rejects(p, (e) => e === reason);
            await locker.close();
          } finally {
            await hole.close();
          }
        });

        test('close() during the connect phase rejects the waiters with LockerClosedError and returns', { timeout: 30_000 }, async () => {
          const hole = await blackHole();
          try {
            const locker = createLocker(blackHoleUrl(hole.port), slowConnect);
            const p = locker.lock(id('bh-close'));
            await sleep(200);
            await locker.close();
            await assert.rejects(p, LockerClosedError);
          } finally {
            await hole.close();
          }
        });
      });
    }
  });
}

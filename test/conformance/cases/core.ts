import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { performance } from 'node:perf_hooks';
import { FencedResource, LockerClosedError, LockLostError, LockNotHeldError, LockTimeoutError } from '../../../src/index.js';
import { lossOf } from '../../helpers.js';
import { waitingOn } from '../../helpers.js';
import { T, type SuiteContext } from '../suite.js';

/** Exclusion, tokens, tryLock, timeouts, aborts, the handle. */
export function coreCases(ctx: SuiteContext): void {
  const { client, id, caps, shortTtl } = ctx;
  describe('mutual exclusion and tokens', () => {
    test('lock() returns a handle with lockId, ownerId, bigint token, live signal and future validUntil', T, async () => {
      const lockId = id('handle');
      const lock = await client().lock(lockId);
      assert.equal(lock.lockId, lockId);
      assert.equal(typeof lock.ownerId, 'string');
      assert.ok(lock.ownerId.length > 0);
      assert.equal(typeof lock.token, 'bigint');
      assert.ok(lock.token > 0n);
      assert.equal(lock.signal.aborted, false);
      assert.ok(lock.validUntil > performance.now());
      assert.equal(lock.held, true);
      await lock.release();
      assert.equal(lock.held, false);
    });

    test('16 concurrent contenders never overlap: a fenced read-modify-write counter loses nothing', T, async () => {
      const lockId = id('exclusion');
      const counter = new FencedResource(0);
      const rounds = 3;
      let inside = 0;
      let maxInside = 0;
      await Promise.all(
        Array.from({ length: 16 }, async () => {
          const locker = client();
          for (let i = 0; i < rounds; i++) {
            await locker.withLock(lockId, async (lock) => {
              inside += 1;
              maxInside = Math.max(maxInside, inside);
              const v = counter.read(lock.token);
              await sleep(1);
              counter.write(lock.token, v + 1);
              inside -= 1;
            });
          }
        }),
      );
      assert.equal(maxInside, 1);
      assert.equal(counter.rejected, 0);
      assert.equal(counter.peek(), 16 * rounds);
    });

    test('tokens strictly increase across owners', T, async () => {
      const lockId = id('tokens');
      const clients = [client(), client(), client()];
      const tokens: bigint[] = [];
      for (let i = 0; i < 9; i++) {
        const lock = await clients[i % 3]!.lock(lockId);
        tokens.push(lock.token);
        await lock.release();
      }
      for (let i = 1; i < tokens.length; i++) assert.ok(tokens[i]! > tokens[i - 1]!, `token ${tokens[i]} after ${tokens[i - 1]}`);
    });

    test('tokens increase per lockId independently of other lock ids', T, async () => {
      const a = id('tok-a');
      const b = id('tok-b');
      const locker = client();
      const seen: Record<string, bigint[]> = { [a]: [], [b]: [] };
      for (const lockId of [a, b, a, b, a]) {
        const lock = await locker.lock(lockId);
        seen[lockId]!.push(lock.token);
        await lock.release();
      }
      for (const list of Object.values(seen)) {
        for (let i = 1; i < list.length; i++) assert.ok(list[i]! > list[i - 1]!);
      }
    });

    test('a released lock goes to the waiting client', T, async () => {
      const lockId = id('handoff');
      const a = client();
      const b = client();
      const held = await a.lock(lockId);
      const waiting = waitingOn(b, lockId);
      const next = b.lock(lockId, { timeoutMs: 60_000 });
      await waiting;
      await held.release();
      const got = await next;
      assert.ok(got.token > held.token);
      await got.release();
    });

    test('inspect() shows the holder and its token', T, async () => {
      const lockId = id('inspect');
      const locker = client();
      const lock = await locker.lock(lockId);
      const state = await locker.inspect(lockId);
      assert.equal(state.lockId, lockId);
      assert.ok(state.holders.some((h) => h.token === lock.token));
      await lock.release();
      const after = await locker.inspect(lockId);
      assert.equal(after.holders.length, 0);
    });
  });

  describe('tryLock, timeouts and aborts', () => {
    test('tryLock returns null while another client holds the lock', T, async () => {
      const lockId = id('try-held');
      const held = await client().lock(lockId);
      assert.equal(await client().tryLock(lockId), null);
      await held.release();
    });

    test('tryLock succeeds when the lock is free', T, async () => {
      const lockId = id('try-free');
      const lock = await client().tryLock(lockId);
      assert.ok(lock);
      assert.equal(lock.held, true);
      await lock.release();
    });

    test('tryLock with waitMs gets the lock released within the wait', T, async () => {
      const lockId = id('try-wait');
      const a = client();
      const b = client();
      const held = await a.lock(lockId);
      const waiting = waitingOn(b, lockId);
      const attempt = b.tryLock(lockId, { waitMs: 60_000 });
      await waiting;
      await held.release();
      const got = await attempt;
      assert.ok(got);
      await got.release();
    });

    test('tryLock with waitMs resolves null when the lock stays held', T, async () => {
      const lockId = id('try-wait-null');
      const held = await client().lock(lockId);
      assert.equal(await client().tryLock(lockId, { waitMs: 300 }), null);
      assert.equal(held.held, true);
      await held.release();
    });

    test('timeoutMs rejects with LockTimeoutError', T, async () => {
      const lockId = id('timeout');
      const held = await client().lock(lockId);
      const err = await client()
        .lock(lockId, { timeoutMs: 300 })
        .then(
          () => assert.fail('should time out'),
          (e: unknown) => e,
        );
      assert.ok(err instanceof LockTimeoutError);
      assert.equal(err.code, 'LOCK_TIMEOUT');
      await held.release();
    });

    test('an abort before the call rejects with signal.reason unchanged', T, async () => {
      const reason = new Error('caller gave up');
      const ctl = new AbortController();
      ctl.abort(reason);
      await assert.rejects(client().lock(id('abort-before'), { signal: ctl.signal }), (e) => e === reason);
    });

    test('an abort during the wait rejects with signal.reason unchanged and leaves no queue entry', T, async () => {
      const lockId = id('abort-during');
      const a = client();
      const b = client();
      const held = await a.lock(lockId);
      const reason = new Error('stop waiting');
      const ctl = new AbortController();
      const waiting = waitingOn(b, lockId);
      const p = b.lock(lockId, { signal: ctl.signal, fair: caps.fair });
      await waiting;
      ctl.abort(reason);
      await assert.rejects(p, (e) => e === reason);
      await held.release();
      // The aborted waiter must not block the next one (a leaked fair-queue entry would).
      const c = await client().lock(lockId, { timeoutMs: 60_000, fair: caps.fair });
      await c.release();
    });

    test('a timed-out waiter leaves no queue entry behind', T, async () => {
      const lockId = id('timeout-clean');
      const held = await client().lock(lockId);
      await assert.rejects(client().lock(lockId, { timeoutMs: 200, fair: caps.fair }), LockTimeoutError);
      await held.release();
      const next = await client().tryLock(lockId, { waitMs: 60_000, fair: caps.fair });
      assert.ok(next);
      await next.release();
    });
  });

  describe('release and the handle', () => {
    test('release() is idempotent', T, async () => {
      const lock = await client().lock(id('idem'));
      await lock.release();
      await lock.release();
      await Promise.all([lock.release(), lock.release()]);
    });

    test('await using releases at the end of the scope', T, async () => {
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
    });

    test('withLock returns the callback value and releases', T, async () => {
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
    });

    test('withLock releases when the callback throws and rethrows its error', T, async () => {
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
    });

    test('extend() after release rejects LockNotHeldError', T, async () => {
      const lock = await client().lock(id('extend-released'));
      await lock.release();
      await assert.rejects(lock.extend(), LockNotHeldError);
    });

    test('extend() renews the lease and moves validUntil forward', T, async () => {
      const lock = await client({ autoExtend: false }).lock(id('extend'), { ttlMs: 5_000 });
      const before = lock.validUntil;
      await sleep(20);
      await lock.extend();
      assert.ok(lock.validUntil > before);
      await lock.release();
    });

    test('events: waiting, acquired, extended and released are emitted', T, async () => {
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
    });
  });

  describe('one rule for zero waits, closed lockers and lost work (issue 9, item 12)', () => {
    test('timeoutMs: 0 makes one attempt: a free lock is granted, a held one rejects LockTimeoutError at once', T, async () => {
      const lockId = id('zero-wait');
      const first = await client().lock(lockId, { timeoutMs: 0 });
      assert.equal(first.held, true);
      await assert.rejects(client().lock(lockId, { timeoutMs: 0 }), LockTimeoutError);
      await first.release();
    });

    test('waitMs is an alias of timeoutMs on lock() and tryLock()', T, async () => {
      const lockId = id('alias');
      const held = await client().lock(lockId);
      await assert.rejects(client().lock(lockId, { waitMs: 100 }), LockTimeoutError);
      assert.equal(await client().tryLock(lockId, { timeoutMs: 100 }), null);
      await held.release();
    });

    test('extend() after the locker closed rejects LockLostError with reason closed', T, async () => {
      const locker = client();
      const lock = await locker.lock(id('extend-closed'));
      await locker.close();
      await assert.rejects(lock.extend(), (e: unknown) => e instanceof LockLostError && e.reason === 'closed');
      await assert.rejects(locker.lock(id('after-close')), LockerClosedError);
    });

    test('withLock rejects LockLostError carrying the result when the lock was lost while fn ran', T, async () => {
      const locker = client({ autoExtend: false });
      const lockId = id('with-lost');
      const err = await locker
        .withLock(
          lockId,
          async (lock) => {
            await lossOf(lock);
            return 42;
          },
          { ttlMs: shortTtl },
        )
        .then(
          () => assert.fail('should reject'),
          (e: unknown) => e,
        );
      assert.ok(err instanceof LockLostError);
      assert.equal(err.result, 42);
    });

    test('withLock with rejectOnLoss: false resolves with the result after a loss', T, async () => {
      const locker = client({ autoExtend: false });
      const v = await locker.withLock(
        id('with-lost-ok'),
        async (lock) => {
          await lossOf(lock);
          return 'done';
        },
        { ttlMs: shortTtl, rejectOnLoss: false },
      );
      assert.equal(v, 'done');
    });

    test('extend() after release rejects LockNotHeldError, not a backend error', T, async () => {
      const lock = await client().lock(id('extend-after-release'));
      await lock.release();
      await assert.rejects(lock.extend(), LockNotHeldError);
    });
  });
}

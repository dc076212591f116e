/**
 * The shared conformance suite: the same behaviours, asserted against every backend running
 * on a real engine. Capability flags decide which cases are registered (an engine without
 * read-write locks does not get the rw cases); nothing is skipped at run time.
 *
 * Cases assert behaviour, never timings: waits have generous bounds so a loaded machine
 * does not fail them, and every expiry case waits for the event it is about.
 */
import assert from 'node:assert/strict';
import { after, afterEach, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { randomBytes } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import {
  createLocker,
  FencedResource,
  InvalidArgumentError,
  LockerClosedError,
  LockLostError,
  LockNotHeldError,
  LockTimeoutError,
  StaleTokenError,
  type Capabilities,
  type Locker,
  type LockerOptions,
} from '../../src/index.js';
import { abandon } from '../../src/testing.js';
import { lossOf } from '../helpers.js';

/** What a backend's test file hands to {@link conformance}. */
export interface ConformanceTarget {
  /** Engine name shown in test titles. */
  readonly name: string;
  /** A new, independent client (its own connections) of the engine under test. */
  createLocker(options?: Partial<LockerOptions>): Locker;
  /** What the engine can do; cases it cannot do are not registered. */
  readonly capabilities: Capabilities;
  /** Shortest ttl the engine handles reliably in expiry cases (default 500 ms). */
  readonly shortTtlMs?: number;
  /** Make a holder vanish without releasing (default: `abandon(locker)`). */
  crash?(locker: Locker): Promise<void>;
}

const T = { timeout: 120_000 };

/** Register the conformance cases for `target` (call at module top level). */
export function conformance(target: ConformanceTarget): void {
  const caps = target.capabilities;
  const shortTtl = target.shortTtlMs ?? 500;
  const crash = target.crash ?? ((l: Locker) => abandon(l));
  const open: Locker[] = [];
  const unhandled: unknown[] = [];
  const onUnhandled = (reason: unknown): void => {
    unhandled.push(reason);
  };
  process.on('unhandledRejection', onUnhandled);

  /** A fresh client, closed after the case. */
  const client = (options?: Partial<LockerOptions>): Locker => {
    const l = target.createLocker(options);
    open.push(l);
    return l;
  };
  /** A lock id no other case (or earlier run on the same server) uses. */
  const id = (label: string): string => `conf:${label}:${randomBytes(6).toString('hex')}`;

  afterEach(async () => {
    await Promise.allSettled(open.splice(0).map((l) => l.close()));
  });

  /** Resolve when `locker` emits `waiting` for `lockId` (the acquisition is queued). */
  const waitingOn = (locker: Locker, lockId: string): Promise<void> =>
    new Promise((resolve) => {
      const on = (e: { lockId: string }): void => {
        if (e.lockId === lockId) {
          locker.off('waiting', on);
          resolve();
        }
      };
      locker.on('waiting', on);
    });

  const aborted = lossOf;

  describe(`conformance: ${target.name}`, () => {
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

    describe('leases, crashes and loss', () => {
      test('auto-extension keeps the lock across several ttls', T, async () => {
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
      });

      test('a crashed holder loses the lock after its ttl and another client acquires it', T, async () => {
        const lockId = id('crash');
        const doomed = client({ ttlMs: shortTtl });
        const lock = await doomed.lock(lockId);
        await crash(doomed);
        const next = await client().lock(lockId, { timeoutMs: 60_000 });
        assert.ok(next.token > lock.token);
        await next.release();
      });

      test("the holder's signal aborts with LockLostError before validUntil when the lease is not renewed", T, async () => {
        const lock = await client({ autoExtend: false }).lock(id('abort-early'), { ttlMs: shortTtl * 2 });
        const validUntil = lock.validUntil;
        const reason = await aborted(lock);
        const at = performance.now();
        assert.ok(reason instanceof LockLostError);
        assert.equal(reason.code, 'LOCK_LOST');
        assert.ok(at <= validUntil, `aborted at ${at.toFixed(1)}, validUntil ${validUntil.toFixed(1)}`);
        assert.equal(lock.held, false);
      });

      test('the lost event carries the LockLostError', T, async () => {
        const locker = client({ autoExtend: false });
        const lockId = id('lost-event');
        const lost = new Promise<unknown>((resolve) => locker.once('lost', (e) => resolve(e.error)));
        const lock = await locker.lock(lockId, { ttlMs: shortTtl });
        await aborted(lock);
        assert.ok((await lost) instanceof LockLostError);
      });

      test('extend() after the loss rejects LockLostError', T, async () => {
        const lock = await client({ autoExtend: false }).lock(id('extend-lost'), { ttlMs: shortTtl });
        await aborted(lock);
        await assert.rejects(lock.extend(), LockLostError);
      });

      test('release and extend by the former holder after a takeover do not disturb the new holder', T, async () => {
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
      });

      test('a fenced resource rejects the former holder after a takeover', T, async () => {
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
      });
    });

    describe('reentrancy', () => {
      test('nested withLock on the same lockId re-enters instead of deadlocking', T, async () => {
        const lockId = id('nested');
        const locker = client();
        const tokens: bigint[] = [];
        await locker.withLock(lockId, async (outer) => {
          tokens.push(outer.token);
          await locker.withLock(
            lockId,
            async (inner) => {
              tokens.push(inner.token);
              assert.equal(inner.reentered, true);
            },
            { timeoutMs: 5_000 },
          );
        });
        assert.equal(tokens[0], tokens[1]);
      });

      test('the inner release of a nested withLock does not free the lock', T, async () => {
        const lockId = id('nested-hold');
        const locker = client();
        const other = client();
        await locker.withLock(lockId, async () => {
          await locker.withLock(lockId, async () => undefined);
          assert.equal(await other.tryLock(lockId), null);
        });
        const after = await other.tryLock(lockId);
        assert.ok(after);
        await after.release();
      });

      test('nested withLock on a different lockId is independent', T, async () => {
        const a = id('nest-a');
        const b = id('nest-b');
        const locker = client();
        await locker.withLock(a, async (la) => {
          await locker.withLock(b, async (lb) => {
            assert.equal(lb.reentered, false);
            assert.notEqual(la.lockId, lb.lockId);
          });
        });
      });

      test('an explicit owner re-enters within one client', T, async () => {
        const lockId = id('owner');
        const locker = client();
        const first = await locker.lock(lockId, { owner: 'worker-7' });
        const second = await locker.lock(lockId, { owner: 'worker-7', timeoutMs: 5_000 });
        assert.equal(second.token, first.token);
        await second.release();
        assert.equal(await client().tryLock(lockId), null);
        await first.release();
        const free = await client().tryLock(lockId);
        assert.ok(free);
        await free.release();
      });

      test('a different owner does not re-enter', T, async () => {
        const lockId = id('owner-other');
        const locker = client();
        const first = await locker.lock(lockId, { owner: 'a' });
        assert.equal(await locker.tryLock(lockId, { owner: 'b' }), null);
        await first.release();
      });

      if (caps.reentrant) {
        test('an explicit owner re-enters across clients (server-side count)', T, async () => {
          const lockId = id('owner-cross');
          const first = await client().lock(lockId, { owner: 'shared-owner' });
          const second = await client().lock(lockId, { owner: 'shared-owner', timeoutMs: 5_000 });
          assert.equal(second.token, first.token);
          await second.release();
          assert.equal(await client().tryLock(lockId), null, 'still held once');
          await first.release();
          const free = await client().tryLock(lockId);
          assert.ok(free);
          await free.release();
        });
      }
    });

    if (caps.fair) {
      describe('fairness', () => {
        test('fair mode grants 10 waiters in arrival order', T, async () => {
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
        });

        test('fair mode: a client cannot re-take the lock while others wait (no streak)', T, async () => {
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
        });
      });
    }

    if (caps.shared) {
      describe('read-write locks', () => {
        test('many readers hold together', T, async () => {
          const lockId = id('readers');
          const readers = await Promise.all([client(), client(), client()].map((c) => c.readWriteLock(lockId).read({ timeoutMs: 30_000 })));
          assert.ok(readers.every((r) => r.held));
          await Promise.all(readers.map((r) => r.release()));
        });

        test('a writer holds alone: no reader or writer beside it, and it waits for readers', T, async () => {
          const lockId = id('writer');
          const w = await client().readWriteLock(lockId).write();
          assert.equal(await client().readWriteLock(lockId).tryRead(), null);
          assert.equal(await client().readWriteLock(lockId).tryWrite(), null);
          await w.release();
          const r = await client().readWriteLock(lockId).read();
          assert.equal(await client().readWriteLock(lockId).tryWrite(), null);
          await r.release();
        });

        test('a waiting writer is not starved by a stream of readers', T, async () => {
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
        });

        test('read and write holds get increasing tokens', T, async () => {
          const lockId = id('rw-tokens');
          const rw = client().readWriteLock(lockId);
          const r = await rw.read();
          await r.release();
          const w = await rw.write();
          await w.release();
          assert.ok(w.token > r.token);
        });
      });
    }

    if (caps.permits) {
      describe('semaphores', () => {
        test('a semaphore of 3 permits never has more than 3 holders among 10 clients', T, async () => {
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
        });

        test('tryAcquire gets each free permit and null when all are taken', T, async () => {
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
        });

        test("a crashed holder's permit comes back after its ttl", T, async () => {
          const lockId = id('sem-crash');
          const doomed = client({ ttlMs: shortTtl });
          await doomed.semaphore(lockId, { permits: 1 }).acquire();
          await crash(doomed);
          const permit = await client().semaphore(lockId, { permits: 1 }).acquire({ timeoutMs: 60_000 });
          assert.equal(permit.held, true);
          await permit.release();
        });
      });
    }

    if (caps.lockDelay) {
      describe('lockDelay', () => {
        test('after a holder vanishes, nobody gets the lock for lockDelay past its ttl', T, async () => {
          const lockId = id('lock-delay');
          const doomed = client({ ttlMs: shortTtl, autoExtend: false });
          await doomed.lock(lockId, { lockDelayMs: 10_000 });
          await crash(doomed);
          await sleep(shortTtl * 2);
          assert.equal(await client().tryLock(lockId), null, 'still blocked by the lock delay');
        });

        test('the lock delay ends and the lock is granted again', T, async () => {
          const lockId = id('lock-delay-end');
          const doomed = client({ ttlMs: shortTtl, autoExtend: false });
          await doomed.lock(lockId, { lockDelayMs: shortTtl });
          await crash(doomed);
          const next = await client().lock(lockId, { timeoutMs: 60_000 });
          assert.equal(next.held, true);
          await next.release();
        });

        test('a clean release does not impose the lock delay', T, async () => {
          const lockId = id('lock-delay-release');
          const lock = await client().lock(lockId, { lockDelayMs: 60_000 });
          await lock.release();
          const next = await client().tryLock(lockId);
          assert.ok(next);
          await next.release();
        });
      });
    }

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
            assert.throws(() => client().semaphore(id('perm'), { permits }), (e) => e instanceof InvalidArgumentError && e.argument === 'permits');
          }
        });
      }

      test('a malformed backend URL or an unknown scheme', T, () => {
        assert.throws(() => createLocker('not a url'), (e) => e instanceof InvalidArgumentError && e.argument === 'url');
        assert.throws(() => createLocker('gopher://127.0.0.1:1'), (e) => e instanceof InvalidArgumentError && e.argument === 'url');
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

    after(() => {
      process.off('unhandledRejection', onUnhandled);
    });

    test('no unhandled rejection during the whole run', async () => {
      await sleep(50);
      assert.deepEqual(unhandled, []);
    });
  });
}

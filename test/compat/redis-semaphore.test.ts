/**
 * redis-semaphore's behaviours (from its own tests and README), checked against
 * locksmith-dlm/compat/redis-semaphore on real Redis servers: one Redis, then three Redlock
 * masters. Deviations on purpose are named in the titles (docs/migrating/redis-semaphore.md).
 */
import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { randomBytes } from 'node:crypto';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { Redis } from 'ioredis';
import {
  LostLockError,
  MultiSemaphore,
  Mutex,
  RedlockMutex,
  RedlockSemaphore,
  Semaphore,
  TimeoutError,
  type Lock,
} from '../../src/compat/redis-semaphore.js';
import { COMPAT_PREFIX, lockerFor } from '../../src/compat/clients.js';
import { lockKeys } from '../../src/backends/redis/index.js';
import { startRedis } from '../../scripts/servers/redis.js';
import { startRedlock } from '../../scripts/servers/redlock.js';
import { eventually, useServer } from '../helpers.js';
import { jobs } from './programs/redis-semaphore-program.js';

const T = { timeout: 60_000 };
// Registered before the servers' own hooks: the clients end while Redis still answers.
const opened: Redis[] = [];
after(() => {
  for (const c of opened) c.disconnect();
});
const single = await useServer(() => startRedis());
const multi = await useServer(() => startRedlock({ count: 3 }));
function connect(port: number): Redis {
  const c = new Redis({ host: '127.0.0.1', port, maxRetriesPerRequest: 1 });
  c.on('error', () => undefined);
  opened.push(c);
  return c;
}
const client = connect(single.nodes[0]!.port);
const masters = multi.nodes.map((n) => connect(n.port));
/** redis-semaphore's own test timings. */
const timeoutOptions = { lockTimeout: 300, acquireTimeout: 100, refreshInterval: 80, retryInterval: 10 };
const key = (label: string): string => `${label}-${randomBytes(4).toString('hex')}`;
/** Another party deletes the hold from Redis (an expiry, or a takeover): the next refresh is refused. */
const wipe = (lockId: string): Promise<number> => client.del(lockKeys(COMPAT_PREFIX, lockId)[0]);
/** A loss callback that records what it saw. */
function recorder(): { calls: { error: unknown; acquired: boolean }[]; onLockLost: (this: Lock, err: LostLockError) => void } {
  const calls: { error: unknown; acquired: boolean }[] = [];
  return {
    calls,
    onLockLost(this: Lock, err: LostLockError) {
      calls.push({ error: err, acquired: this.isAcquired });
    },
  };
}

test('fails on invalid arguments with its messages', () => {
  assert.throws(() => new Mutex(client, ''), { message: '"key" is required' });
  assert.throws(() => new Mutex(client, 1 as unknown as string), { message: '"key" must be a string' });
  assert.throws(() => new Mutex(client, 'k', { identifier: '' }), { message: 'identifier must be not empty random string' });
  assert.throws(() => new Mutex(client, 'k', { acquiredExternally: true }), {
    message: 'acquiredExternally=true meanless without custom identifier',
  });
});

test('a random UUID is the identifier unless a custom one is given', () => {
  assert.match(new Mutex(client, 'k').identifier, /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
  assert.equal(new Mutex(client, 'k', { identifier: 'mine' }).identifier, 'mine');
});

test('acquires and releases; isAcquired follows; another mutex is excluded meanwhile', T, async () => {
  const k = key('m');
  const mutex = new Mutex(client, k, timeoutOptions);
  await mutex.acquire();
  assert.equal(mutex.isAcquired, true);
  assert.equal(await new Mutex(client, k, timeoutOptions).tryAcquire(), false);
  await mutex.release();
  assert.equal(mutex.isAcquired, false);
  const other = new Mutex(client, k, timeoutOptions);
  assert.equal(await other.tryAcquire(), true);
  await other.release();
});

test('acquire rejects with TimeoutError after acquireTimeout; tryAcquire resolves false', T, async () => {
  const k = key('timeout');
  const holder = new Mutex(client, k, timeoutOptions);
  await holder.acquire();
  await assert.rejects(new Mutex(client, k, timeoutOptions).acquire(), (err) => {
    assert.ok(err instanceof TimeoutError);
    assert.equal(err.message, `Acquire mutex ${k} timeout`);
    return true;
  });
  assert.equal(await new Mutex(client, k, timeoutOptions).tryAcquire(), false);
  assert.equal(await new Mutex(client, k, { ...timeoutOptions, acquireAttemptsLimit: 1 }).tryAcquire(), false);
  await holder.release();
});

test('acquire aborts when the given signal is aborted', T, async () => {
  const k = key('abort');
  const holder = new Mutex(client, k, timeoutOptions);
  await holder.acquire();
  const reason = new Error('stop');
  await assert.rejects(new Mutex(client, k, { ...timeoutOptions, acquireTimeout: 10_000 }).acquire(AbortSignal.timeout(50)), {
    name: 'TimeoutError',
  });
  const controller = new AbortController();
  const pending = new Mutex(client, k, { ...timeoutOptions, acquireTimeout: 10_000 }).acquire(controller.signal);
  controller.abort(reason);
  await assert.rejects(pending, (err) => err === reason);
  await holder.release();
});

test('refreshes the lock until release: held well past lockTimeout', T, async () => {
  const k = key('refresh');
  const mutex = new Mutex(client, k, timeoutOptions);
  await mutex.acquire();
  await sleep(900);
  assert.equal(mutex.isAcquired, true);
  assert.equal(await new Mutex(client, k, timeoutOptions).tryAcquire(), false);
  await mutex.release();
});

test('stopRefresh() lets the lock expire after lockTimeout, and reports no loss', T, async () => {
  const k = key('stop');
  const lost = recorder();
  const mutex = new Mutex(client, k, { ...timeoutOptions, onLockLost: lost.onLockLost });
  await mutex.acquire();
  mutex.stopRefresh();
  const next = new Mutex(client, k, { ...timeoutOptions, acquireTimeout: 5_000 });
  await next.acquire();
  assert.deepEqual(lost.calls, []);
  await next.release();
  await mutex.release();
});

test('onLockLost is called, with isAcquired already false, when the lock is lost between refreshes', T, async () => {
  const k = key('lost');
  const lost = recorder();
  const mutex = new Mutex(client, k, { ...timeoutOptions, onLockLost: lost.onLockLost });
  await mutex.acquire();
  await wipe(`mutex:${k}`);
  await eventually('the loss callback', () => lost.calls.length > 0);
  assert.ok(lost.calls[0]!.error instanceof LostLockError);
  assert.equal(lost.calls[0]!.acquired, false);
  assert.equal(mutex.isAcquired, false);
  await mutex.release();
});

test('without onLockLost, a loss ends the process with the LostLockError (the default throws)', T, async () => {
  const program = fileURLToPath(new URL('./programs/lost-default.ts', import.meta.url));
  const child = spawnSync(process.execPath, ['--import', 'tsx', program, String(single.nodes[0]!.port)], {
    encoding: 'utf8',
    timeout: 30_000,
  });
  assert.notEqual(child.status, 0, 'the process must not end normally');
  assert.match(child.stderr, /LostLockError: Lost mutex for key lost-default-/);
});

test('a release while a refresh is in flight reports no loss', T, async () => {
  const lost = recorder();
  const mutex = new Mutex(client, key('race'), {
    lockTimeout: 1_000,
    acquireTimeout: 1_000,
    refreshInterval: 5,
    onLockLost: lost.onLockLost,
  });
  await mutex.acquire();
  await sleep(100);
  await mutex.release();
  await sleep(100);
  assert.deepEqual(lost.calls, []);
});

test('is reusable: three acquire/release life cycles of one object', T, async () => {
  const k = key('reuse');
  const mutex = new Mutex(client, k, timeoutOptions);
  for (let i = 0; i < 3; i++) {
    await mutex.acquire();
    assert.equal(await new Mutex(client, k, timeoutOptions).tryAcquire(), false);
    await mutex.release();
    const probe = new Mutex(client, k, timeoutOptions);
    assert.equal(await probe.tryAcquire(), true);
    await probe.release();
  }
});

test('acquiredExternally joins the hold of that identifier (same token) and refreshes it', T, async () => {
  const k = key('external');
  const scheduler = new Mutex(client, k, { ...timeoutOptions, refreshInterval: 0 });
  await scheduler.acquire();
  const handler = new Mutex(client, k, { ...timeoutOptions, identifier: scheduler.identifier, acquiredExternally: true });
  await handler.acquire();
  assert.equal(handler.token, scheduler.token);
  await sleep(500);
  assert.equal(handler.isAcquired, true, 'the handler refreshes past lockTimeout');
  await handler.release();
  const stranger = new Mutex(client, key('nobody'), { ...timeoutOptions, identifier: 'not-a-holder', acquiredExternally: true });
  await assert.rejects(stranger.acquire(), TimeoutError);
});

test('identifier (deviation: read after an acquisition, the hold owner id) stays fixed, and later holds are found by it', T, async () => {
  const k = key('pinned');
  const mutex = new Mutex(client, k, { ...timeoutOptions, refreshInterval: 0 });
  await mutex.acquire();
  await mutex.release();
  const id = mutex.identifier;
  assert.equal(mutex.identifier, id);
  await mutex.acquire();
  assert.equal(mutex.identifier, id);
  const handler = new Mutex(client, k, { ...timeoutOptions, identifier: id, acquiredExternally: true });
  await handler.acquire();
  assert.equal(handler.token, mutex.token);
  await handler.release();
  await mutex.release();
});

test('lock objects of two lockTimeouts, acquired by turns, each hold a lease of their own lockTimeout', T, async () => {
  const k = key('ttls');
  const taken: { lock: Lock; lockId: string; ttl: number }[] = [];
  for (const [i, ttl] of [20_000, 40_000, 20_000, 40_000].entries()) {
    const options = { lockTimeout: ttl, refreshInterval: 0 };
    const mutex = new Mutex(client, `${k}-${i}`, options);
    await mutex.acquire();
    taken.push({ lock: mutex, lockId: `mutex:${k}-${i}`, ttl });
    const semaphore = new Semaphore(client, k, 4, options);
    await semaphore.acquire();
    taken.push({ lock: semaphore, lockId: `semaphore:${k}`, ttl });
  }
  // What the server holds: each hold's lease as written, read back through the shim's own locker.
  const locker = lockerFor([client]);
  for (const { lock, lockId, ttl } of taken) {
    const h = (await locker.inspect(lockId)).holders.find((x) => x.token === lock.token);
    assert.ok(h?.leaseEndsAt !== undefined && h.acquiredAt !== undefined, lockId);
    assert.equal(h.leaseEndsAt - h.acquiredAt, ttl, `${lockId} ${lock.token}`);
  }
  await Promise.all(taken.map((t) => t.lock.release()));
});

test('every acquisition carries a fencing token, increasing across holders', T, async () => {
  const k = key('token');
  const a = new Mutex(client, k, timeoutOptions);
  await a.acquire();
  const first = a.token;
  await a.release();
  const b = new Mutex(client, k, timeoutOptions);
  await b.acquire();
  assert.equal(typeof first, 'bigint');
  assert.ok(b.token! > first!);
  await b.release();
});

test('fails on invalid arguments with its messages', () => {
  assert.throws(() => new Semaphore(client, 'k', 0), { message: '"maxCount" is required' });
  assert.throws(() => new Semaphore(client, 'k', '3' as unknown as number), { message: '"maxCount" must be a number' });
  assert.throws(() => new MultiSemaphore(client, 'k', 3, 0), { message: '"permits" is required' });
});

test('acquires at most maxCount permits; the next one times out until a permit is released', T, async () => {
  const k = key('limit');
  const holders = Array.from({ length: 3 }, () => new Semaphore(client, k, 3, timeoutOptions));
  for (const s of holders) await s.acquire();
  const extra = new Semaphore(client, k, 3, timeoutOptions);
  await assert.rejects(extra.acquire(), { name: 'TimeoutError', message: `Acquire semaphore ${k} timeout` });
  await holders[0]!.release();
  assert.equal(await extra.tryAcquire(), true);
  await Promise.all([...holders, extra].map((s) => s.release()));
});

test('refreshes permits until release, and stopRefresh lets them expire', T, async () => {
  const k = key('sem-refresh');
  const s = new Semaphore(client, k, 1, timeoutOptions);
  await s.acquire();
  await sleep(700);
  assert.equal(await new Semaphore(client, k, 1, timeoutOptions).tryAcquire(), false);
  s.stopRefresh();
  const next = new Semaphore(client, k, 1, { ...timeoutOptions, acquireTimeout: 5_000 });
  await next.acquire();
  await next.release();
  await s.release();
});

test('onLockLost is called when the permit is lost between refreshes', T, async () => {
  const k = key('sem-lost');
  const lost = recorder();
  const s = new Semaphore(client, k, 2, { ...timeoutOptions, onLockLost: lost.onLockLost });
  await s.acquire();
  await wipe(`semaphore:${k}`);
  await eventually('the loss callback', () => lost.calls.length > 0);
  assert.ok(lost.calls[0]!.error instanceof LostLockError);
  assert.equal(s.isAcquired, false);
});

test('is reusable with refresh enabled and disabled', T, async () => {
  for (const refreshInterval of [80, 0]) {
    const s = new Semaphore(client, key('sem-reuse'), 1, { ...timeoutOptions, refreshInterval });
    for (let i = 0; i < 3; i++) {
      await s.acquire();
      assert.equal(s.isAcquired, true);
      await s.release();
    }
  }
});

test('MultiSemaphore takes its permits all at once and shares them with Semaphore', T, async () => {
  const k = key('multi');
  const pair = new MultiSemaphore(client, k, 3, 2, timeoutOptions);
  await pair.acquire();
  // One hold of two permits (the Redis backend takes several at once): one token.
  assert.equal(pair.tokens.length, 1);
  const one = new Semaphore(client, k, 3, timeoutOptions);
  assert.equal(await one.tryAcquire(), true);
  assert.equal(await new Semaphore(client, k, 3, timeoutOptions).tryAcquire(), false);
  assert.equal(await new MultiSemaphore(client, k, 3, 2, timeoutOptions).tryAcquire(), false);
  await pair.release();
  const again = new MultiSemaphore(client, k, 3, 2, timeoutOptions);
  assert.equal(await again.tryAcquire(), true);
  await Promise.all([one.release(), again.release()]);
});

test('MultiSemaphore: a refused multi-acquisition holds none of its permits afterwards', T, async () => {
  const k = key('multi-none');
  const one = new Semaphore(client, k, 3, timeoutOptions);
  await one.acquire();
  assert.equal(await new MultiSemaphore(client, k, 3, 3, timeoutOptions).tryAcquire(), false);
  const two = new MultiSemaphore(client, k, 3, 2, timeoutOptions);
  assert.equal(await two.tryAcquire(), true, 'the refused acquirer released what it had taken');
  await Promise.all([one.release(), two.release()]);
});

test('MultiSemaphore: concurrent multi-acquirers never deadlock and never exceed maxCount', T, async () => {
  const k = key('multi-dl');
  let inUse = 0;
  let peak = 0;
  const worker = async (permits: number): Promise<void> => {
    for (let i = 0; i < 4; i++) {
      const s = new MultiSemaphore(client, k, 4, permits, { ...timeoutOptions, acquireTimeout: 30_000 });
      await s.acquire();
      inUse += permits;
      peak = Math.max(peak, inUse);
      await sleep(3);
      inUse -= permits;
      await s.release();
    }
  };
  await Promise.all([worker(3), worker(3), worker(2), worker(2), worker(3)]);
  assert.ok(peak <= 4, `peak ${peak}`);
});

test('a program written for redis-semaphore runs unchanged but for the import', T, async () => {
  const result = await jobs(single.nodes[0]!.port);
  assert.equal(result.counter, 10);
  assert.ok(result.maxWorkers <= 3 && result.maxWorkers >= 1);
  assert.ok(result.maxPair <= 4 && result.maxPair >= 2);
  assert.equal(result.skipped, 1);
});

test('RedlockMutex acquires and releases across the masters, excluding others', T, async () => {
  const k = key('rm');
  const mutex = new RedlockMutex(masters, k, timeoutOptions);
  await mutex.acquire();
  assert.equal(await new RedlockMutex(masters, k, timeoutOptions).tryAcquire(), false);
  await sleep(500);
  assert.equal(mutex.isAcquired, true, 'refreshed past lockTimeout');
  await mutex.release();
  const next = new RedlockMutex(masters, k, timeoutOptions);
  assert.equal(await next.tryAcquire(), true);
  await next.release();
});

test('RedlockSemaphore acquires at most maxCount permits', T, async () => {
  const k = key('rs');
  const holders = Array.from({ length: 2 }, () => new RedlockSemaphore(masters, k, 2, timeoutOptions));
  for (const s of holders) await s.acquire();
  await assert.rejects(new RedlockSemaphore(masters, k, 2, timeoutOptions).acquire(), TimeoutError);
  await holders[1]!.release();
  const next = new RedlockSemaphore(masters, k, 2, { ...timeoutOptions, acquireTimeout: 5_000 });
  await next.acquire();
  await Promise.all([holders[0]!.release(), next.release()]);
});

test('a held RedlockMutex survives one master down, and reports the loss when the quorum dies', T, async () => {
  const [, b, c] = multi.nodes;
  const lost = recorder();
  const mutex = new RedlockMutex(masters, key('quorum'), {
    ...timeoutOptions,
    lockTimeout: 600,
    refreshInterval: 100,
    onLockLost: lost.onLockLost,
  });
  await mutex.acquire();
  await c!.kill();
  await sleep(700);
  assert.equal(mutex.isAcquired, true, 'a majority still renews it');
  await b!.kill();
  await eventually('the loss callback', () => lost.calls.length > 0);
  assert.equal(mutex.isAcquired, false);
  await Promise.all([b!.restart(), c!.restart()]);
});

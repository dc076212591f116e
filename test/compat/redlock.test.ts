/**
 * node-redlock's behaviours (from its own tests and README), checked against
 * locksmith-dlm/compat/redlock on real Redis servers: one Redis, then five Redlock masters.
 * Where the shim differs on purpose, the case names the deviation (docs/migrating/node-redlock.md).
 */
import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import Redlock, { ExecutionError, ResourceLockedError, type ExecutionStats } from '../../src/compat/redlock.js';
import { startRedis } from '../../scripts/servers/redis.js';
import { startRedlock } from '../../scripts/servers/redlock.js';
import { useServer } from '../helpers.js';
import { lockKeys } from '../../src/backends/redis/index.js';
import { COMPAT_PREFIX } from '../../src/compat/clients.js';
import { transfer } from './programs/node-redlock-program.js';

const T = { timeout: 60_000 };
// Registered before the servers' own hooks: the clients end while Redis still answers.
const clients: Redis[] = [];
after(() => {
  for (const c of clients) c.disconnect();
});
const single = await useServer(() => startRedis());
const multi = await useServer(() => startRedlock({ count: 3 }));

function client(port: number, extra: Record<string, unknown> = {}): Redis {
  const c = new Redis({ host: '127.0.0.1', port, maxRetriesPerRequest: 1, ...extra });
  c.on('error', () => undefined);
  clients.push(c);
  return c;
}
const singlePort = single.nodes[0]!.port;
const res = (label: string): string => `{redlock}${label}:${randomBytes(4).toString('hex')}`;

/** Every vote against in the error's attempts. */
async function votesAgainst(err: ExecutionError): Promise<Error[]> {
  const stats: ExecutionStats[] = await Promise.all(err.attempts);
  return stats.flatMap((s) => [...s.votesAgainst.values()]);
}

/** Rejects with an ExecutionError whose every vote against is a ResourceLockedError. */
async function assertLocked(p: Promise<unknown>): Promise<void> {
  const err = await rejection(p);
  assert.ok(err instanceof ExecutionError, String(err));
  const votes = await votesAgainst(err);
  assert.ok(votes.length > 0);
  for (const v of votes) assert.ok(v instanceof ResourceLockedError);
}

/** The rejection of `p` (fails when it resolves). */
async function rejection(p: Promise<unknown>): Promise<unknown> {
  try {
    await p;
  } catch (err) {
    return err;
  }
  assert.fail('expected a rejection');
}

const redlock = (): Redlock => new Redlock([client(singlePort)]);

test('an error event without a listener of the user does not throw', () => {
  assert.equal(redlock().emit('error', new Error('nobody listens')), true);
});

test('refuses a non-integer duration', T, async () => {
  await assert.rejects(redlock().acquire([res('float')], 1.5), { message: 'Duration must be an integer value in milliseconds.' });
});

test('acquires, extends and releases a single lock (extend returns a new lock; the old one is spent)', T, async () => {
  const r = redlock();
  const key = res('a');
  const lock = await r.acquire([key], 10_000);
  assert.equal(typeof lock.value, 'string');
  assert.ok(lock.expiration > Date.now() && lock.expiration <= Date.now() + 10_000);
  await assertLocked(r.acquire([key], 10_000, { retryCount: 0 }));
  const extended = await lock.extend(30_000);
  assert.ok(extended.expiration > Date.now() + 20_000);
  assert.equal(lock.expiration, 0, 'the old lock object is spent');
  await assert.rejects(lock.extend(1_000), { name: 'ExecutionError', message: 'Cannot extend an already-expired lock.' });
  await extended.release();
  const again = await r.acquire([key], 1_000, { retryCount: 0 });
  await again.release();
});

test('acquires, extends and releases a multi-resource lock; each resource is excluded', T, async () => {
  const r = redlock();
  const [a1, a2] = [res('a1'), res('a2')];
  let lock = await r.acquire([a1, a2], 10_000);
  for (const key of [a1, a2]) await assertLocked(r.acquire([key], 1_000, { retryCount: 0 }));
  lock = await lock.extend(20_000);
  await lock.release();
  const both = await r.acquire([a2, a1], 1_000, { retryCount: 0 });
  await both.release();
});

test('locks automatically expire: acquire() does not renew', T, async () => {
  const r = redlock();
  const key = res('d');
  const lock = await r.acquire([key], 300);
  await sleep(400);
  assert.ok(lock.expiration < Date.now());
  const next = await r.acquire([key], 1_000, { retryCount: 0 });
  assert.ok(next.token > lock.token, 'the fencing token moved on');
  await next.release();
});

test(
  'individual locks are exclusive: the failure is an ExecutionError of ResourceLockedError votes, and the error event sees it',
  T,
  async () => {
    const r = redlock();
    const seen: unknown[] = [];
    r.on('error', (e) => seen.push(e));
    const key = res('c');
    const lock = await r.acquire([key], 10_000);
    await assertLocked(r.acquire([key], 10_000, { retryCount: 2, retryDelay: 50 }));
    assert.ok(seen.some((e) => e instanceof ResourceLockedError));
    await lock.release();
  },
);

test('overlapping multi-locks are exclusive, and a refused one takes none of its resources', T, async () => {
  const r = redlock();
  const [c1, c2, c3] = [res('c1'), res('c2'), res('c3')];
  const lock = await r.acquire([c1, c2], 10_000);
  await assertLocked(r.acquire([c2, c3], 10_000, { retryCount: 0 }));
  const c3Lock = await r.acquire([c3], 1_000, { retryCount: 0 });
  await c3Lock.release();
  await lock.release();
});

test('a waiting acquire gets the lock when the holder releases within the retry window', T, async () => {
  const r = redlock();
  const key = res('wait');
  const held = await r.acquire([key], 10_000);
  const waiting = r.acquire([key], 10_000, { retryCount: 50, retryDelay: 200 });
  await sleep(50);
  await held.release();
  const lock = await waiting;
  assert.ok(lock.token > held.token);
  await lock.release();
});

test('the using helper acquires, extends past the duration, and releases', T, async () => {
  const r = redlock();
  const key = res('x');
  const result = await r.using([key], 700, { automaticExtensionThreshold: 200 }, async (signal) => {
    await sleep(1_200);
    assert.equal(signal.aborted, false, 'the signal must not be aborted');
    assert.equal(signal.error, undefined);
    await assertLocked(r.acquire([key], 1_000, { retryCount: 0 }));
    return 42;
  });
  assert.equal(result, 42);
  const free = await r.acquire([key], 1_000, { retryCount: 0 });
  await free.release();
});

test('the using helper is exclusive', T, async () => {
  const r = redlock();
  const key = res('y');
  let locked = false;
  const routine = async (): Promise<void> => {
    assert.equal(locked, false, 'the resource must not already be locked');
    locked = true;
    await sleep(100);
    locked = false;
  };
  await Promise.all([r.using([key], 5_000, routine), r.using([key], 5_000, routine), r.using([key], 5_000, routine)]);
});

test('using refuses a duration within 100 ms of automaticExtensionThreshold', T, async () => {
  await assert.rejects(
    redlock().using([res('t')], 550, async () => 1),
    {
      message: 'A lock `duration` must be at least 100ms greater than the `automaticExtensionThreshold` setting.',
    },
  );
});

test('when a renewal is refused inside using, the signal aborts with signal.error set and an error event', T, async () => {
  const r = redlock();
  const key = res('lost');
  const errors: unknown[] = [];
  r.on('error', (e) => errors.push(e));
  const aborted = await r.using([key], 700, { automaticExtensionThreshold: 100 }, async (signal) => {
    const rival = client(singlePort);
    // Another party deletes what the lock stands on: a refused renewal is a loss.
    await rival.del(lockKeys(COMPAT_PREFIX, key)[0]);
    for (let i = 0; i < 100 && !signal.aborted; i++) await sleep(50);
    return signal;
  });
  assert.equal(aborted.aborted, true);
  assert.ok(aborted.error instanceof ExecutionError);
  assert.ok(errors.length > 0, 'the error event reported it');
});

test('deviation: releasing an expired lock resolves instead of throwing', T, async () => {
  const lock = await redlock().acquire([res('exp')], 200);
  await sleep(300);
  await lock.release();
});

test('a lock carries a bigint fencing token per resource, increasing across holders', T, async () => {
  const r = redlock();
  const [a, b] = [res('tok-a'), res('tok-b')];
  const first = await r.acquire([a, b], 1_000);
  assert.equal(typeof first.token, 'bigint');
  assert.equal(first.tokens.size, 2);
  assert.equal(first.token, first.tokens.get(a));
  await first.release();
  const second = await r.acquire([a], 1_000);
  assert.ok(second.token > first.token);
  await second.release();
});

test('locks fail with an ExecutionError and an error event when Redis is unreachable', T, async () => {
  const dead = client(1, { enableOfflineQueue: false, lazyConnect: true, retryStrategy: () => null });
  const r = new Redlock([dead]);
  const seen: unknown[] = [];
  r.on('error', (e) => seen.push(e));
  await assert.rejects(r.acquire([res('down')], 1_000, { retryCount: 0 }), ExecutionError);
  assert.ok(seen.length > 0);
});

test('a program written for node-redlock runs unchanged but for the import', T, async () => {
  const log: string[] = [];
  const balances = await transfer(singlePort, log);
  assert.deepEqual(balances, { alice: 94, bob: 6 });
  assert.deepEqual(log, ['report locked', 'report extended']);
});

const masters = (): Redis[] => multi.nodes.map((n) => client(n.port));

test('acquires, extends and releases across the masters; a second client is excluded', T, async () => {
  const r = new Redlock(masters());
  const other = new Redlock(masters());
  const key = res('m');
  let lock = await r.acquire([key], 10_000);
  await assertLocked(other.acquire([key], 1_000, { retryCount: 0 }));
  lock = await lock.extend(10_000);
  await lock.release();
  const next = await other.acquire([key], 1_000, { retryCount: 0 });
  await next.release();
});

test('succeeds when a minority of masters fail, fails with per-node votes when a majority fail', T, async () => {
  const [a, b, c] = multi.nodes;
  const r = new Redlock(masters());
  await c!.kill();
  const lock = await r.acquire([res('minority')], 5_000, { retryCount: 0 });
  await lock.release();
  await b!.kill();
  const err = await rejection(r.acquire([res('majority')], 5_000, { retryCount: 0 }));
  assert.ok(err instanceof ExecutionError, String(err));
  assert.ok((await votesAgainst(err)).length >= 2);
  await Promise.all([b!.restart(), c!.restart()]);
  assert.ok(a);
});

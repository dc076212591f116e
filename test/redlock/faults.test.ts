/**
 * Redlock on five real redis-servers under failures: masters killed (kill -9) while a lock
 * is held, a majority killed, an event-loop stall pushing
 * the elapsed time past the ttl, one master paused (SIGSTOP) through a whole hold.
 * Every test leaves all five masters running (restarted empty) for the next.
 */
import { afterEach, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { createLocker, LockLostError, QuorumError, type Locker, type LockerOptions } from '../../src/index.js';
import type { RedlockTicket } from '../../src/backends/redlock/index.js';
import type { Backend } from '../../src/backend.js';
import { startRedlock } from '../../scripts/servers/redlock.js';
import { Redis } from 'ioredis';
import { eventually, lossOf, seamRequest, useServer } from '../helpers.js';

const server = await useServer(() => startRedlock({ count: 5 }));
const T = { timeout: 120_000 };
const open: Locker[] = [];

function client(options?: Partial<LockerOptions>, url = server.url): Locker {
  const l = createLocker(url, options);
  open.push(l);
  return l;
}
const id = (label: string): string => `rl:${label}:${randomBytes(6).toString('hex')}`;

/** Kill -9 the masters at `indexes` (a restart later brings them back empty). */
async function kill(indexes: readonly number[]): Promise<void> {
  await Promise.all(indexes.map((i) => server.nodes[i]?.kill()));
}
async function restart(indexes: readonly number[]): Promise<void> {
  await Promise.all(indexes.map((i) => server.nodes[i]?.restart()));
}

afterEach(async () => {
  await Promise.allSettled(open.splice(0).map((l) => l.close()));
  for (const n of server.nodes) {
    try {
      n.resume();
    } catch {
      /* killed: the restart below brings it back */
    }
  }
  await restart([0, 1, 2, 3, 4]);
});

describe('redlock: masters killed while a lock is held', () => {
  test('2 of 5 killed: the holder keeps its lock through renewals, and new acquisitions work', T, async () => {
    const lockId = id('two-dead');
    const holderLocker = client({ ttlMs: 600 });
    const holder = await holderLocker.lock(lockId);
    let renewals = 0;
    holderLocker.on('extended', (e) => {
      if (e.lockId === lockId) renewals += 1;
    });
    await kill([0, 1]);
    await eventually('three renewals with two masters dead', () => renewals >= 3);
    assert.equal(holder.held, true);
    assert.equal(await client().tryLock(lockId), null, 'the three live masters still refuse another client');
    await holder.release();
    const next = await client().lock(lockId, { timeoutMs: 30_000 });
    assert.ok(next.token > holder.token);
    const other = await client().lock(id('two-dead-other'), { timeoutMs: 30_000 });
    await next.release();
    await other.release();
  });

  test('3 of 5 killed: acquisitions fail with QuorumError naming every master; the holder loses its lock', T, async () => {
    const lockId = id('three-dead');
    const holder = await client({ ttlMs: 600 }).lock(lockId);
    const lost = lossOf(holder);
    const other = client();
    await other.backend();
    await kill([0, 1, 2]);
    const err = await other.lock(id('three-dead-new'), { timeoutMs: 30_000 }).then(
      () => assert.fail('granted without a majority'),
      (e: unknown) => e,
    );
    assert.ok(err instanceof QuorumError, String(err));
    assert.equal(err.nodes.length, 5);
    const dead = new Set([0, 1, 2].map((i) => `${server.nodes[i]?.host}:${server.nodes[i]?.port}`));
    for (const n of err.nodes) {
      if (dead.has(n.node)) assert.ok(n.outcome === 'error' || n.outcome === 'timeout', `${n.node}: ${n.outcome}`);
      else assert.equal(n.outcome, 'granted', `${n.node}: ${n.outcome}`);
    }
    const reason = await lost;
    assert.ok(reason instanceof LockLostError, String(reason));
    assert.equal(holder.held, false);
    const late = await client()
      .backend()
      .then(
        () => assert.fail('connected without a majority'),
        (e: unknown) => e,
      );
    assert.ok(late instanceof QuorumError, `a new client cannot connect to a majority either: ${String(late)}`);
  });
});

describe('redlock: validity', () => {
  test('replies that arrive only after the ttl (an event-loop stall) never make a grant; every master is cleaned', T, async () => {
    // The per-master timeout is at most ttl/10, so only a client-side stall can push an
    // attempt past its ttl: the masters answer during the stall and the validity is gone.
    const locker = client({}, `${server.url}?nodeTimeoutMs=40`);
    const backend = (await locker.backend()) as Backend<RedlockTicket>;
    const lockId = id('slow');
    await locker.inspect(lockId);
    const attempt = backend.tryAcquire(seamRequest<RedlockTicket>(lockId, 'slow-owner', { ttlMs: 400, fair: false, wait: false }));
    const until = performance.now() + 700;
    while (performance.now() < until) {
      // A synchronous stall longer than the ttl.
    }
    const result = await attempt;
    assert.equal(result.granted, false, 'the majority answered, but after the ttl: no grant');
    const state = await locker.inspect(lockId);
    assert.deepEqual(state.holders, [], 'the late keys were released on every master');
    const next = await client().tryLock(lockId);
    assert.ok(next, 'another client gets the lock at once');
    await next.release();
  });

  test('an attempt aborted in flight takes back what it set once the late replies come', T, async () => {
    const locker = client({}, `${server.url}?nodeTimeoutMs=10000`);
    const backend = (await locker.backend()) as Backend<RedlockTicket>;
    const lockId = id('aborted');
    const ctl = new AbortController();
    for (const i of [0, 1, 2]) server.nodes[i]?.pause();
    const attempt = backend.tryAcquire(seamRequest<RedlockTicket>(lockId, 'gone', { ttlMs: 120_000, fair: false, signal: ctl.signal }));
    await sleep(200);
    const reason = new Error('caller left');
    ctl.abort(reason);
    await assert.rejects(attempt, (e) => e === reason);
    for (const i of [0, 1, 2]) server.nodes[i]?.resume();
    // The paused masters now run the attempt's SET (a 120 s lease): it must be taken back.
    await eventually('the aborted attempt left nothing behind', async () => (await locker.inspect(lockId)).holders.length === 0);
    const next = await client().tryLock(lockId);
    assert.ok(next);
    await next.release();
  });

  test('maxExtensions caps the renewals: the next one gives the lock up', T, async () => {
    const locker = client({ ttlMs: 300 }, `${server.url}?maxExtensions=2`);
    let renewals = 0;
    locker.on('extended', () => {
      renewals += 1;
    });
    const lock = await locker.lock(id('cap'));
    const reason = await lossOf(lock);
    assert.ok(reason instanceof LockLostError, String(reason));
    assert.equal(renewals, 2);
  });
});

describe('redlock: one slow master', () => {
  test('a release announced while an attempt waits for a slow master still ends the wait after it', T, async () => {
    const lockId = id('release-in-flight');
    const holder = await client({ ttlMs: 60_000 }).lock(lockId);
    // B polls once a minute and the holder's keys last a minute: only the announcement can
    // end B's wait within the test.
    const backend = (await client({}, `${server.url}?nodeTimeoutMs=200&pollMs=60000`).backend()) as Backend<RedlockTicket>;
    const req = seamRequest<RedlockTicket>(lockId, 'waiter-b', { ttlMs: 60_000, fair: false });
    const first = await backend.tryAcquire(req);
    assert.equal(first.granted, false);
    const ticket = first.granted ? undefined : first.contended.ticket;
    await backend.waitForChange(lockId, ticket, AbortSignal.timeout(20_000)); // subscribed now
    const live = server.nodes.slice(0, 4).map((n) => new Redis({ host: n.host, port: n.port }));
    try {
      const evalsHere = async (r: Redis): Promise<number> =>
        Number(/cmdstat_evalsha:calls=(\d+)/.exec(await r.info('commandstats'))?.[1] ?? 0);
      const before = await Promise.all(live.map(evalsHere));
      server.nodes[4]?.pause();
      // B's second attempt: refused by the four live masters, then it waits out master 4's timeout.
      const second = backend.tryAcquire({ ...req, ticket });
      await eventually('the live masters ran the second attempt', async () =>
        (await Promise.all(live.map(evalsHere))).every((c, i) => c > (before[i] ?? 0)),
      );
      // The release lands (and is announced) while B's attempt is still in flight.
      await holder.release();
      const again = await second;
      assert.equal(again.granted, false, 'refused: the holder still held when the live masters ran it');
      // Ends at once on the announcement B saw during the attempt (else: a minute's poll).
      await backend.waitForChange(lockId, again.granted ? undefined : again.contended.ticket, AbortSignal.timeout(20_000));
    } finally {
      for (const r of live) r.disconnect();
    }
  });

  test('lock and release resolve on a majority while a master is paused; its late grant is taken back', T, async () => {
    // A per-master timeout far beyond the test: only the majority rule can let lock() and
    // release() resolve while master 4 answers nothing.
    const url = `${server.url}?nodeTimeoutMs=60000`;
    const locker = client({ ttlMs: 600_000 }, url);
    const other = client({ ttlMs: 600_000 }, url);
    await Promise.all([locker.backend(), other.backend()]);
    const lockId = id('slow-master');
    const slow = server.nodes[4];
    assert.ok(slow);
    slow.pause();
    const lock = await locker.lock(lockId);
    await lock.release();
    const next = await other.tryLock(lockId);
    assert.ok(next, 'free for another client while the paused master has not even seen the grant');
    await next.release();
    slow.resume();
    // Master 4 now runs what waited on its connections, each in order: the first holder's
    // attempt and release, the other client's attempt and release. Whichever attempt it runs
    // first is a late grant there (it stores its token in the register), and the release
    // behind it on the same connection must delete it.
    const direct = new Redis({ host: slow.host, port: slow.port, lazyConnect: true });
    try {
      await direct.connect();
      const base = `locksmith:{${lockId}}`;
      await eventually('the late grant on the slow master is deleted', async () => (await direct.exists(`${base}:rl`, `${base}:ri`)) === 0);
      const register = BigInt((await direct.get(`${base}:rt`)) ?? '0');
      assert.ok(register >= lock.token, `the slow master ran a late grant (register ${register}, first token ${lock.token})`);
    } finally {
      direct.disconnect();
    }
  });
});

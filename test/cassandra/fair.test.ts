/**
 * The design of docs/backends/cassandra.md on a real Cassandra node, beyond the shared conformance suite: the theorems
 * (at most one holder; in a tryLock race at least one wins), the design's own stress-test
 * shape, the time service under ±5 s clock skew, the TTL rounding, bad input, the
 * hand-off (woken in process, polled across processes) and a waiter that sorts before the
 * holder (see docs/backends/cassandra.md).
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { createCassandraBackend, type CassandraBackend } from '../../src/backends/cassandra/index.js';
import { parseCassandraUrl } from '../../src/backends/cassandra/config.js';
import { cellTtlSeconds, queueEntry } from '../../src/backends/cassandra/tables.js';
import {
  BackendUnavailableError,
  createLocker,
  FencedResource,
  InvalidArgumentError,
  LockLostError,
  type Locker,
} from '../../src/index.js';
import { freePort, type RunningServer } from '../../scripts/servers/harness.js';
import { startCassandra } from '../../scripts/servers/cassandra.js';
import { request } from './request.js';
import cassandra from 'cassandra-driver';
import { guardControlRefresh, guardHosts } from '../../src/backends/cassandra/workarounds.js';
import { startFaultProxy } from '../../src/testing.js';
import { eventually, waitingOn } from '../helpers.js';

let server: RunningServer | undefined;
const opened: Array<{ close(): Promise<void> }> = [];
const T = { timeout: 180_000 };

before(
  async () => {
    server = await startCassandra({ nodes: 1 });
  },
  { timeout: 600_000 },
);

after(async () => {
  await Promise.allSettled(opened.map((o) => o.close()));
  await server?.stop();
});

function url(query = ''): string {
  if (!server) throw new Error('cassandra did not start');
  return `${server.url}?create=true${query ? `&${query}` : ''}`;
}
function locker(query = '', options: Parameters<typeof createLocker>[1] = {}): Locker {
  const l = createLocker(url(query), options);
  opened.push(l);
  return l;
}
async function backend(query = '', clockOffsetMs = 0): Promise<CassandraBackend> {
  const offset = BigInt(clockOffsetMs) * 1000n;
  const b = await createCassandraBackend(url(query), { clock: () => BigInt(Date.now()) * 1000n + offset });
  opened.push(b);
  return b;
}
const id = (label: string): string => `cass:${label}:${randomBytes(5).toString('hex')}`;

test('cell TTLs round up to whole seconds plus one, so a cell outlives the lease it backs', () => {
  assert.equal(cellTtlSeconds(1), 2);
  assert.equal(cellTtlSeconds(1000), 2);
  assert.equal(cellTtlSeconds(1001), 3);
  assert.equal(cellTtlSeconds(60_000), 61);
  for (const ms of [1, 250, 999, 1000, 1500, 9_999, 60_000]) {
    // Worst case the server expires a cell (ttl − 1) s after writing it.
    assert.ok((cellTtlSeconds(ms) - 1) * 1000 >= ms, `${ms}`);
  }
});

test('queue entries are the 20-digit zero-padded µs time followed by the owner, sorting by time then owner', () => {
  assert.equal(queueEntry(42n, 'abc'), '00000000000000000042abc');
  const entries = [queueEntry(1_700_000_000_000_001n, 'b'), queueEntry(999n, 'z'), queueEntry(1_700_000_000_000_001n, 'a')];
  assert.deepEqual([...entries].sort(), [
    queueEntry(999n, 'z'),
    queueEntry(1_700_000_000_000_001n, 'a'),
    queueEntry(1_700_000_000_000_001n, 'b'),
  ]);
});

test('URL parsing: hosts, port, keyspace and defaults; bad parameters are InvalidArgumentError', () => {
  const s = parseCassandraUrl(new URL('cassandra://10.0.0.1,10.0.0.2:9043/locks'));
  assert.deepEqual(s.hosts, ['10.0.0.1', '10.0.0.2']);
  assert.equal(s.port, 9043);
  assert.equal(s.keyspace, 'locks');
  assert.equal(s.consistency, 'quorum');
  for (const bad of [
    // The shadow lock is a benchmark baseline now (bench/cassandra-shadow.ts), not an option.
    'cassandra://h/k?algorithm=shadow',
    'cassandra://h/k?algorithm=fair',
    'cassandra://h/k?consistency=two',
    'cassandra://h/k?shardSize=1',
    'cassandra://h/k?bogus=1',
    'cassandra://h/bad-keyspace',
  ]) {
    assert.throws(() => parseCassandraUrl(new URL(bad)), InvalidArgumentError, bad);
  }
});

test('an unreachable cluster is a BackendUnavailableError within the connect timeout', T, async () => {
  const port = await freePort();
  const l = createLocker(`cassandra://127.0.0.1:${port}/locksmith`, { connectTimeoutMs: 2_000 });
  opened.push(l);
  await assert.rejects(l.lock('x', { timeoutMs: 60_000 }), BackendUnavailableError);
});

// After node restarts the driver runs control-connection refreshes from timers, promises
// dropped, several at once (each restart leaves it one more health listener on the host);
// racing, they crashed fault workers with unhandled TypeErrors (NODEJS-681). Here: refreshes
// started the driver's way, then the node unreachable and back through a proxy, 4 times.
test('racing control-connection refreshes after outages never surface as unhandled rejections', T, async () => {
  if (!server) throw new Error('cassandra did not start');
  const proxy = await startFaultProxy({ targetHost: '127.0.0.1', targetPort: Number(new URL(server.url).port) });
  opened.push(proxy);
  const client = new cassandra.Client({
    contactPoints: [proxy.address],
    localDataCenter: 'datacenter1',
    policies: { reconnection: new cassandra.policies.reconnection.ExponentialReconnectionPolicy(100, 1_000, false) },
  });
  assert.equal(guardControlRefresh(client), true, 'the driver has the refresh to guard');
  // Outages orphan a host the driver's own shutdown misses (src/backends/cassandra/workarounds.ts):
  // without the backend's sweep this test's process would never exit.
  const afterShutdown = guardHosts(client);
  const unhandled: unknown[] = [];
  const onUnhandled = (reason: unknown): void => void unhandled.push(reason);
  process.on('unhandledRejection', onUnhandled);
  try {
    await client.connect();
    const control: unknown = Reflect.get(client, 'controlConnection');
    const refresh: unknown = typeof control === 'object' && control !== null ? Reflect.get(control, '_refresh') : undefined;
    assert.ok(typeof refresh === 'function');
    for (let i = 0; i < 20; i++) setTimeout(() => void Reflect.apply(refresh, control, []), i * 5);
    await sleep(1_000);
    for (let i = 0; i < 4; i++) {
      proxy.setMode('reset');
      await sleep(1_000);
      proxy.setMode('pass');
      await sleep(1_000);
    }
    assert.deepEqual(unhandled.map(String), []);
    // The driver reconnects on its own schedule (100 ms to 1 s here, slower on a loaded machine).
    await eventually('the client serves again after the outages', async () => {
      const rows = await client.execute('SELECT release_version FROM system.local');
      return rows.rowLength === 1;
    });
    assert.deepEqual(unhandled.map(String), []);
  } finally {
    process.off('unhandledRejection', onUnhandled);
    await client.shutdown();
    afterShutdown();
  }
});

test(
  'theorem 1 under the design stress shape: 3 lockers × 4 workers × 6 ops on 2 ids, one owner in the main row, shared value unchanged, over-long holders lose the lock and are told',
  T,
  async () => {
    const ids = [id('stress-a'), id('stress-b')];
    const shared = new Map<string, string>(ids.map((i) => [i, 'idle']));
    const inspector = locker();
    let checked = 0;
    let lostAsExpected = 0;
    const lockers = [locker('', { ttlMs: 2_000 }), locker('', { ttlMs: 2_000 }), locker('', { ttlMs: 2_000 })];
    await Promise.all(
      lockers.flatMap((l, li) =>
        Array.from({ length: 4 }, async (_, w) => {
          for (let op = 0; op < 6; op++) {
            const lockId = ids[(li + w + op) % ids.length]!;
            // Every 12th operation outlives its ttl without renewal: the lock must be lost, and said so.
            const overlong = (li * 4 + w) % 12 === op;
            const lock = await l.lock(lockId, { timeoutMs: 150_000, autoExtend: !overlong, ttlMs: overlong ? 1_000 : 2_000 });
            const mine = `${lock.ownerId}:${op}`;
            assert.equal(shared.get(lockId), 'idle', 'someone else is inside');
            shared.set(lockId, mine);
            const state = await inspector.inspect(lockId);
            assert.deepEqual(
              state.holders.map((h) => h.ownerId),
              [lock.ownerId],
              'exactly one owner in the main row, and it is us',
            );
            checked += 1;
            await sleep(5 + Math.random() * 20);
            if (overlong) {
              shared.set(lockId, 'idle');
              const reason = await new Promise<unknown>((resolve) => {
                if (lock.signal.aborted) resolve(lock.signal.reason);
                else lock.signal.addEventListener('abort', () => resolve(lock.signal.reason), { once: true });
              });
              assert.ok(reason instanceof LockLostError, 'the holder is told that its lock is gone');
              lostAsExpected += 1;
              await lock.release();
              continue;
            }
            assert.equal(shared.get(lockId), mine, 'the shared value changed under the lock');
            assert.equal(lock.signal.aborted, false);
            shared.set(lockId, 'idle');
            await lock.release();
          }
        }),
      ),
    );
    assert.equal(checked, 3 * 4 * 6);
    assert.equal(lostAsExpected, 6);
  },
);

test('theorems 2 and 3: in each of 12 tryLock races of 6 clients, exactly one wins', T, async () => {
  const clients = await Promise.all(Array.from({ length: 6 }, () => backend()));
  for (let round = 0; round < 12; round++) {
    const lockId = id(`race-${round}`);
    const results = await Promise.all(clients.map((b, i) => b.tryAcquire(request(lockId, `racer-${round}-${i}`, { wait: false }))));
    const winners = results.filter((r) => r.granted);
    assert.ok(winners.length >= 1, `round ${round}: nobody won (theorem 3)`);
    assert.equal(winners.length, 1, `round ${round}: ${winners.length} winners (theorem 2)`);
    for (const r of results) if (r.granted) assert.equal(await clients[0]!.release(r.grant), true);
    // A failed tryLock leaves nothing behind: the next one on the free lock wins at once.
    const after = await clients[1]!.inspect(lockId);
    assert.equal(after.waiters, 0);
    assert.equal(after.holders.length, 0);
  }
});

test('shard rotation under contention (shardSize=2): 6 clients × 5 fenced increments, no overlap, nothing left behind', T, async () => {
  const lockId = id('rotation');
  const counter = new FencedResource(0);
  let inside = 0;
  let maxInside = 0;
  const clients = Array.from({ length: 6 }, () => locker('shardSize=2', { ttlMs: 3_000 }));
  await Promise.all(
    clients.map(async (l) => {
      for (let i = 0; i < 5; i++) {
        await l.withLock(
          lockId,
          async (lock) => {
            inside += 1;
            maxInside = Math.max(maxInside, inside);
            const v = counter.read(lock.token);
            await sleep(2);
            counter.write(lock.token, v + 1);
            inside -= 1;
          },
          { timeoutMs: 150_000, fair: true },
        );
      }
    }),
  );
  assert.equal(maxInside, 1);
  assert.equal(counter.rejected, 0);
  assert.equal(counter.peek(), 30);
  // 30 grants over shards of 2: the queue moved 15 times and nobody is left in it.
  const state = await clients[0]!.inspect(lockId);
  assert.equal(state.lastToken !== undefined && state.lastToken >= 30n, true);
  assert.equal(state.holders.length, 0);
  assert.equal(state.waiters, 0);
});

test('a waiter that waits several ttls keeps its place: its queue cell is rewritten before it expires', T, async () => {
  const lockId = id('long-wait');
  const holder = await locker('', { ttlMs: 1_000 }).lock(lockId);
  const early = locker('', { ttlMs: 1_000 });
  const late = locker('', { ttlMs: 1_000 });
  const order: string[] = [];
  const queued = (l: Locker): Promise<void> => new Promise((resolve) => l.once('waiting', () => resolve()));
  const q1 = queued(early);
  const p1 = early.lock(lockId, { timeoutMs: 120_000, fair: true }).then(async (l) => {
    order.push('early');
    await l.release();
  });
  await q1;
  // 1 s leases are written as 2 s cells: 5 s is more than two cell lifetimes.
  await sleep(5_000);
  const q2 = queued(late);
  const p2 = late.lock(lockId, { timeoutMs: 120_000, fair: true }).then(async (l) => {
    order.push('late');
    await l.release();
  });
  await q2;
  const state = await early.inspect(lockId);
  assert.equal(state.waiters, 2, 'both waiters are in the queue');
  assert.equal(holder.signal.aborted, false);
  await holder.release();
  await Promise.all([p1, p2]);
  assert.deepEqual(order, ['early', 'late']);
});

test('extend() of a holder whose cells expired rejects LockLostError and rewrites nothing', T, async () => {
  const b = await backend();
  const lockId = id('expired-extend');
  const r = await b.tryAcquire(request(lockId, 'short', { ttlMs: 500 }));
  assert.ok(r.granted);
  // 500 ms is written as a 2 s cell; wait it out on the server.
  await sleep(2_600);
  await assert.rejects(b.extend(r.grant, 500), LockLostError);
  assert.equal((await b.inspect(lockId)).holders.length, 0);
  assert.equal(await b.release(r.grant), false);
});

test('clients with clocks skewed by ±5 s: the shared time never goes backwards and the queue keeps arrival order', T, async () => {
  const fast = await backend('timeRefreshMs=200', +5_000);
  const slow = await backend('timeRefreshMs=200', -5_000);
  await sleep(600);
  // Never backwards, on either client, while both keep feeding the register.
  let lastFast = 0n;
  let lastSlow = 0n;
  for (let i = 0; i < 40; i++) {
    const f = fast.timeService.now();
    const s = slow.timeService.now();
    assert.ok(f > lastFast && s > lastSlow, 'time went backwards');
    lastFast = f;
    lastSlow = s;
    await sleep(25);
  }
  // The slow client's time follows the fastest feeder, within the refresh bound.
  const realPlus5 = BigInt(Date.now() + 5_000) * 1000n;
  const lag = Number(realPlus5 - slow.timeService.now()) / 1000;
  assert.ok(lag < 2_000, `slow client lags the shared time by ${lag} ms`);

  // Queue order: one skewed client queues first, the other a second later; without the
  // time service the slow client's entry (10 s "earlier") would jump ahead of the fast one's.
  for (const [firstOffset, secondOffset] of [
    [+5_000, -5_000],
    [-5_000, +5_000],
  ] as const) {
    const lockId = id('skew-order');
    const holder = locker();
    const held = await holder.lock(lockId);
    const order: string[] = [];
    // Each locker owns (and closes) its backend.
    const l1 = createLocker(await backend('timeRefreshMs=200', firstOffset));
    const l2 = createLocker(await backend('timeRefreshMs=200', secondOffset));
    opened.push(l1, l2);
    await sleep(600);
    const waiting = (l: Locker): Promise<void> => new Promise((resolve) => l.once('waiting', () => resolve()));
    const w1 = waiting(l1);
    const p1 = l1.lock(lockId, { timeoutMs: 120_000, fair: true }).then(async (lock) => {
      order.push('first');
      await lock.release();
    });
    await w1;
    await sleep(1_000);
    const w2 = waiting(l2);
    const p2 = l2.lock(lockId, { timeoutMs: 120_000, fair: true }).then(async (lock) => {
      order.push('second');
      await lock.release();
    });
    await w2;
    await held.release();
    await Promise.all([p1, p2]);
    assert.deepEqual(order, ['first', 'second'], `offsets ${firstOffset} / ${secondOffset}`);
  }
});

test('a release wakes the next waiter of the same process at once, long before its first poll', T, async () => {
  // pollMs=10000 puts the waiter's first poll at least 5 s after its last attempt, and a
  // 60 s ttl its first queue-cell rewrite 20 s out: only the release's wake-up is left.
  const query = 'pollMs=10000';
  const lockId = id('wake');
  const a = locker(query, { ttlMs: 60_000 });
  const b = locker(query, { ttlMs: 60_000 });
  const held = await a.lock(lockId);
  const waiting = waitingOn(b, lockId);
  const next = b.lock(lockId, { timeoutMs: 120_000 });
  await waiting;
  const queuedAt = performance.now();
  await held.release();
  const got = await next;
  const tookMs = performance.now() - queuedAt;
  assert.ok(got.token > held.token);
  assert.ok(tookMs < 4_000, `the waiter got the lock ${tookMs.toFixed(0)} ms after queueing: by a poll, not by the release`);
  await got.release();
});

test('without local wake-ups (as from another process) the next in line still takes over, by its poll', T, async () => {
  const lockId = id('isolated');
  const [ba, bb] = await Promise.all([
    createCassandraBackend(url(), { localWakeups: false }),
    createCassandraBackend(url(), { localWakeups: false }),
  ]);
  const a = createLocker(ba);
  const b = createLocker(bb);
  opened.push(a, b);
  const order: string[] = [];
  const held = await a.lock(lockId);
  const waiting = waitingOn(b, lockId);
  const next = b.lock(lockId, { timeoutMs: 120_000 }).then((l) => {
    order.push('b');
    return l;
  });
  await waiting;
  order.push('a released');
  await held.release();
  const got = await next;
  assert.deepEqual(order, ['a released', 'b']);
  assert.ok(got.token > held.token);
  await got.release();
});

test('a chain of 12 local waiters is served in arrival order, each woken by the one before', T, async () => {
  const lockId = id('chain');
  const query = 'pollMs=10000';
  const holder = await locker(query, { ttlMs: 60_000 }).lock(lockId);
  const order: number[] = [];
  const done: Promise<void>[] = [];
  for (let i = 0; i < 12; i++) {
    const l = locker(query, { ttlMs: 60_000 });
    const waiting = waitingOn(l, lockId);
    done.push(
      l.lock(lockId, { timeoutMs: 120_000 }).then(async (lock) => {
        order.push(i);
        await lock.release();
      }),
    );
    await waiting;
  }
  const releasedAt = performance.now();
  await holder.release();
  await Promise.all(done);
  const tookMs = performance.now() - releasedAt;
  assert.deepEqual(order, [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]);
  // Twelve polls would take at least a minute; twelve wake-ups take a blink.
  assert.ok(tookMs < 20_000, `12 hand-offs took ${tookMs.toFixed(0)} ms: they waited for polls`);
});

test('it never holds beside the holder, never runs the counter ahead, and inspect() shows the holder its own token', T, async () => {
  if (!server) throw new Error('cassandra did not start');
  // A fresh keyspace, so that the time-service cell holds only what these clients push.
  const ks = `rogue_${randomBytes(4).toString('hex')}`;
  const at = (query: string): string => `${server!.url.replace(/\/locksmith$/, `/${ks}`)}?create=true&shardSize=2&${query}`;
  // The rogue's clock is 5 s behind and it never refreshes the shared time again, so its
  // queue entries sort 5 s before everyone else's: the design's caveat about a time taken
  // long before the cell is written.
  const rogue = await createCassandraBackend(at('timeRefreshMs=60000'), { clock: () => BigInt(Date.now() - 5_000) * 1000n });
  opened.push(rogue);
  const lockers = [createLocker(at('')), createLocker(at(''))];
  opened.push(...lockers);
  const lockId = id('rogue');
  const held = await lockers[0]!.lock(lockId, { ttlMs: 30_000 });
  let r = await rogue.tryAcquire(request(lockId, 'rogue', { ttlMs: 30_000 }));
  const first = r.granted ? undefined : r.contended.ticket;
  assert.ok(first?.algorithm === 'fair' && first.ahead === 0, 'the rogue is first in line (the case under test)');
  for (let i = 0; i < 10; i++) {
    assert.equal(r.granted, false, `attempt ${i}: the rogue holds beside the holder`);
    if (r.granted) break;
    r = await rogue.tryAcquire(request(lockId, 'rogue', { ttlMs: 30_000, ticket: r.contended.ticket }));
  }
  assert.equal(r.granted, false, 'the rogue holds beside the holder');
  const state = await lockers[1]!.inspect(lockId);
  assert.deepEqual(
    state.holders.map((h) => [h.ownerId, h.token]),
    [[held.ownerId, held.token]],
    'inspect() shows exactly the holder, with its own token',
  );
  assert.ok(state.lastToken !== undefined && state.lastToken <= held.token + 1n, `the counter ran ahead to ${state.lastToken}`);
  await held.release();
  while (!r.granted) {
    r = await rogue.tryAcquire(request(lockId, 'rogue', { ttlMs: 30_000, ticket: r.contended.ticket }));
    if (!r.granted) await rogue.waitForChange(lockId, r.contended.ticket, new AbortController().signal);
  }
  assert.ok(r.grant.token > held.token);
  assert.equal(await rogue.release(r.grant), true);
});

/**
 * The benchmark matrix over the contender interface, on memory:// (fast): locksmith and a
 * "peer" (the same lock, seen through a client that cannot report queueing) run the same
 * rows; the rows notice a lock that does not exclude, a drain that does not end, and a
 * peer without a queued event; the comparison names the best peer.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { createLocker } from '../../src/index.js';
import {
  benchHandoff,
  benchHot,
  benchHotRounds,
  benchLatencies,
  benchWaiters,
  formatComparison,
  jsonLines,
  lockerContender,
  runComparison,
  runMatrix,
  type BenchClient,
  type Contender,
} from '../../src/bench-matrix/index.js';

let n = 0;
const memory = (): string => `memory://bench-unit-${++n}`;

/** locksmith on one memory:// namespace. */
function locksmith(fair = false): Contender {
  const url = memory();
  return lockerContender(fair ? 'locksmith (fair)' : 'locksmith', () => createLocker(url), fair);
}

/** The same lock as a peer library that has no "waiting" event. */
function silentPeer(name: string): Contender {
  const inner = locksmith();
  return {
    name,
    peer: true,
    reportsQueued: false,
    async client(): Promise<BenchClient> {
      const c = await inner.client();
      return { acquire: (lockId, o = {}) => c.acquire(lockId, o.signal ? { signal: o.signal } : {}), close: () => c.close() };
    },
  };
}

/** A "lock" that grants everybody at once: the hot row must see the overlaps. */
const noLock: Contender = {
  name: 'no lock',
  peer: true,
  reportsQueued: false,
  client: () => ({ acquire: async () => ({ release: async () => undefined }), close: async () => undefined }),
};

const quick = {
  iterations: 10,
  rounds: 2,
  handoffRounds: 4,
  contenders: [1, 4],
  durationMs: 150,
  criticalMs: 1,
  keys: 200,
  waiters: 30,
  idleMs: 50,
  handoff: { idleMinMs: 2, idleMaxMs: 5 },
  waitersSettleMs: 100,
};

test('runMatrix runs every row for a locksmith contender and a peer, with the same options', async () => {
  const results = await runComparison([locksmith(true), silentPeer('peer')], quick);
  assert.deepEqual(
    results.map((r) => [r.name, r.peer]),
    [
      ['locksmith (fair)', false],
      ['peer', true],
    ],
  );
  for (const r of results) {
    assert.equal(r.uncontended.n, 20, 'two measured rounds of ten cycles (the warm-up round not counted)');
    assert.equal(r.uncontended.release.n, 20);
    assert.equal(r.handoff.n, 4);
    assert.equal(r.handoff.release.n, 4, 'the release() with a waiter is timed too');
    assert.deepEqual(
      r.hot.map((h) => h.contenders),
      [1, 4],
    );
    for (const h of r.hot) {
      assert.equal(h.overlaps, 0, `${r.name}: one holder at a time`);
      assert.ok(h.ops > 0);
    }
    assert.equal(r.keys?.keys, 200);
    assert.equal(r.waiters?.drained, 30, `${r.name}: every waiter got the lock`);
  }
  assert.equal(results[0]?.fair, true, 'the contender says it is fair');
  assert.deepEqual(results[1]?.handoff.idleMs, [2, 5], 'every library gets the same idle waiter, event or not');
  assert.equal(results[1]?.waiters?.queuedBy, 'delay');
  const fair = results[0]?.hot.find((h) => h.contenders === 4);
  assert.equal(fair?.longestStreak, 1, 'fair grants rotate');
});

test('the comparison prints both tables, the hand-off notes and ratios against the best peer', async () => {
  const results = await runComparison([locksmith(), silentPeer('peer A'), silentPeer('peer B')], { ...quick, contenders: [2] });
  const text = formatComparison(results).join('\n');
  assert.match(text, /\| locksmith \| [\d.]+ \/ [\d.]+ \|/);
  assert.match(text, /\| peer B \| 2 \|/);
  assert.match(text, /peer A: hand-off holder and waiter in one process, waiter idle 2–5 ms, release\(\) took p50/);
  assert.match(text, /locksmith \/ best peer: uncontended p50 [\d.]+× \(peer [AB]\)/);
  assert.match(text, /hot x2 ops\/s [\d.]+× \(peer [AB]\)/);
  assert.ok(!/peer A \/ best peer/.test(text), 'peers get no ratio line');
  const lines = jsonLines(results, { engine: 'memory' }).map((l) => JSON.parse(l) as { library: string; engine: string });
  assert.deepEqual(
    lines.map((l) => [l.library, l.engine]),
    [
      ['locksmith', 'memory'],
      ['peer A', 'memory'],
      ['peer B', 'memory'],
    ],
  );
});

test('the hot-lock row counts grants that overlap another holder', async () => {
  const r = await benchHot(noLock, 3, 100, 1);
  assert.ok(r.overlaps > 0, 'a lock that excludes nobody is caught');
});

test('the hot-lock row counts a wait still open at the end as the longest wait', async () => {
  let made = 0;
  // Client 0 never gets the lock (it waits until the row aborts it); the others always do.
  const starving: Contender = {
    name: 'starving',
    reportsQueued: false,
    client() {
      const me = made++;
      return {
        acquire: (_lockId, o = {}) =>
          me === 0 && o.signal
            ? new Promise((_, reject) => o.signal?.addEventListener('abort', () => reject(o.signal?.reason), { once: true }))
            : Promise.resolve({ release: async () => undefined }),
        close: async () => undefined,
      };
    },
  };
  const r = await benchHot(starving, 2, 200, 1);
  assert.ok(r.longestWaitMs >= 190, `the starved wait counts (${r.longestWaitMs} ms)`);
  assert.ok(r.jain <= 0.5 + 1e-9, 'one contender took every grant');
});

test('the hand-off row leaves the waiter idle, then times release() and the hand-off', async () => {
  const r = await benchHandoff(locksmith(), 5, false, { idleMinMs: 0, idleMaxMs: 0 });
  assert.equal(r.n, 5);
  assert.equal(r.processes, 1);
  assert.equal(r.release.n, 5);
});

/** `c` with every client it opens noted in `opened` and every acquisition in `order` (`label` of its lock id). */
function traceInto(
  order: string[],
  c: Contender,
  label: (c: Contender, id: string) => string = (x) => x.name,
  opened: string[] = [],
): Contender {
  return {
    ...c,
    async client() {
      opened.push(c.name);
      const inner = await c.client();
      return { acquire: (id, o) => (order.push(label(c, id)), inner.acquire(id, o)), close: () => inner.close() };
    },
  };
}

test('the latency rows alternate: every library gets the same rounds, the warm-up round unmeasured', async () => {
  const order: string[] = [];
  const traced = (c: Contender): Contender => traceInto(order, c);
  const res = await benchLatencies([traced(locksmith()), traced(silentPeer('peer'))], { cycles: 3, rounds: 2, handoffRounds: 0 });
  assert.equal(res.get('locksmith')?.uncontended.n, 6);
  assert.equal(res.get('peer')?.uncontended.n, 6);
  const runs = order.filter((x, i) => x !== order[i - 1]);
  assert.ok(runs.length >= 4, `the libraries take turns (${runs.join(', ')})`);
});

test('the waiters row counts server operations through the probe and gives up a drain at its budget', async () => {
  let probed = 0;
  const base = locksmith();
  const held: Contender = {
    name: 'never released',
    reportsQueued: true,
    async client() {
      const c = await base.client();
      // Releases that do nothing: the waiters can never drain.
      return {
        acquire: async (lockId, o) => ({ ...(await c.acquire(lockId, o)), release: async () => undefined }),
        close: () => c.close(),
      };
    },
  };
  const r = await benchWaiters(held, 10, { idleMs: 50, probe: async () => (probed += 7), drainBudgetMs: 100, perClient: 5 });
  assert.equal(r.drained, 0);
  // Node's timers run off the loop's cached clock and can fire up to a millisecond early by performance.now().
  assert.ok(r.drainMs >= 95, `the drain gave up after its budget (${r.drainMs} ms)`);
  assert.ok(r.idleOpsPerSec !== undefined && r.idleOpsPerSec > 0);
});

test('runMatrix still takes a Locker factory (what `locksmith bench` passes)', async () => {
  const url = memory();
  const r = await runMatrix(() => createLocker(url), { ...quick, fair: true, keys: 0, waiters: 0 });
  assert.equal(r.name, 'locksmith (fair)');
  assert.equal(r.fair, true);
  assert.equal(r.keys, undefined);
  assert.equal(r.waiters, undefined);
});

test("a contender's limits skip the rows it cannot run; the comparison shows them as n/a", async () => {
  const slow: Contender = { ...silentPeer('one process per lock'), limits: { maxContenders: 1, keys: false, waiters: false } };
  const [mine, peer] = await runComparison([locksmith(), slow], quick);
  assert.deepEqual(
    mine?.hot.map((h) => h.contenders),
    [1, 4],
  );
  assert.deepEqual(
    peer?.hot.map((h) => h.contenders),
    [1],
  );
  assert.equal(peer?.keys, undefined);
  assert.equal(peer?.waiters, undefined);
  assert.ok(mine?.keys && mine.waiters);
  const text = formatComparison(mine && peer ? [mine, peer] : [], quick).join('\n');
  assert.match(
    text,
    /\| one process per lock \| [\d.]+ \/ [\d.]+ \| [\d.]+ \| [\d.]+ \/ [\d.]+ \| [\d.]+ \| n\/a \| n\/a \| n\/a \| n\/a \| n\/a \|/,
  );
  assert.match(text, /hot x1 ops\/s [\d.]+× \(one process per lock\)/);
  assert.doesNotMatch(text, /hot x4 ops\/s/);
});

test('the hot-lock rows alternate: each library runs its slices in turn, on the same clients, summed', async () => {
  const order: string[] = [];
  const opened: string[] = [];
  const traced = (c: Contender): Contender => traceInto(order, c, undefined, opened);
  const res = await benchHotRounds([traced(locksmith(true)), traced(silentPeer('peer'))], 3, 240, 1, 3);
  assert.deepEqual(opened.filter((x) => x === 'locksmith (fair)').length, 3, 'one set of clients for all the slices');
  const runs = order.filter((x, i) => x !== order[i - 1]);
  assert.ok(runs.length >= 6, `3 rounds × 2 libraries take turns (${runs.length} turns)`);
  const mine = res.get('locksmith (fair)');
  assert.ok(mine && mine.ops > 0 && mine.overlaps === 0, 'grants counted over the slices');
  assert.equal(mine.contenders, 3);
  assert.ok(mine.jain > 0.9, `a fair lock stays fair over the slices (Jain ${mine.jain})`);
  assert.ok(Math.abs(mine.opsPerSec - mine.ops / 0.24) < 1e-6, 'ops/s over the whole row');
});

test('a comparison runs the hot-lock rows in alternating rounds', async () => {
  const order: string[] = [];
  const traced = (c: Contender): Contender => traceInto(order, c, (x, id) => `${x.name}:${id.split(':')[1] ?? ''}`);
  await runComparison([traced(locksmith()), traced(silentPeer('peer'))], { ...quick, contenders: [2], keys: 0, waiters: 0, hotRounds: 2 });
  const hot = order.filter((x) => x.endsWith(':hot')).map((x) => x.split(':')[0]);
  const turns = hot.filter((x, i) => x !== hot[i - 1]);
  // Two rounds, the order rotated: A B | B A.
  assert.ok(turns.length >= 3, `the libraries take turns in the hot rows (${turns.join(', ')})`);
});

test('the hand-off row times one round trip of the holder after the same idle, and prints release() against it', async () => {
  const url = memory();
  let trips = 0;
  // memory:// has no server: a round trip here is a resolved promise, counted.
  const pinging = lockerContender(
    'locksmith',
    () => createLocker(url),
    false,
    async () => (trips += 1),
  );
  const results = await runComparison([pinging, silentPeer('peer')], { ...quick, contenders: [], keys: 0, waiters: 0 });
  const [mine, peer] = results;
  assert.equal(mine?.roundTrip?.idle.n, 4, 'one reference per hand-off sample');
  assert.equal(mine.roundTrip.warm.n, 4);
  assert.equal(trips, 8, 'an idle round trip and a warm one per sample');
  assert.equal(peer?.roundTrip, undefined, 'a client without roundTrip gets none');
  const text = formatComparison(results).join('\n');
  assert.match(text, /locksmith: release\(\) with a waiter p50 \/ idle round trip p50: [\d.]+ ms = [\d.]+×/);
  assert.doesNotMatch(text, /peer: release\(\) with a waiter p50 \/ idle round trip/);
});

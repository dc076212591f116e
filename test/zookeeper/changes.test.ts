/**
 * ZooKeeper's `changes()`: the lock ids under a prefix reported from child watches — `null`
 * first, then another client's acquire, release, a waiter joining, a semaphore permit and
 * `forceRelease`; an id outside the prefix never; a second `null` after the session is lost;
 * nothing left behind once the signal aborts (docs/backends/zookeeper.md, "Watching").
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, before, describe, test } from 'node:test';
import type { AcquireRequest, Grant } from '../../src/backend.js';
import { createZooKeeperBackend, type ZooKeeperBackend } from '../../src/backends/zookeeper/index.js';
import type { ZkGrantData, ZkTicket } from '../../src/backends/zookeeper/recipe.js';
import { eventually, faultProxy, seamRequest } from '../helpers.js';
import { startZooKeeper, type RunningZooKeeper } from '../../scripts/servers/zookeeper.js';

const T = { timeout: 60_000 };
/** "Within a couple of seconds", with room for a loaded machine. */
const SOON = 5_000;

let server: RunningZooKeeper;
let url: string;
const open: { close(): Promise<void> }[] = [];

before(async () => {
  server = await startZooKeeper({ nodes: 1 });
  url = `zookeeper://${server.connectString}/changes?sessionTimeoutMs=60000`;
});

after(async () => {
  await Promise.allSettled(open.splice(0).map((c) => c.close()));
  await server.stop();
});

function backend(): ZooKeeperBackend {
  const b = createZooKeeperBackend(url);
  open.push(b);
  return b;
}

let owners = 0;

async function attempt(b: ZooKeeperBackend, lockId: string, over: Partial<AcquireRequest<ZkTicket>> = {}) {
  return b.tryAcquire(seamRequest<ZkTicket>(lockId, `owner-${++owners}`, { wait: false, ttlMs: 60_000, ...over }));
}

async function hold(b: ZooKeeperBackend, lockId: string, over: Partial<AcquireRequest<ZkTicket>> = {}): Promise<Grant<ZkGrantData>> {
  const result = await attempt(b, lockId, over);
  assert.ok(result.granted, `${lockId} granted`);
  return result.grant;
}

/** Everything a `changes()` iteration yields, read in the background until it ends. */
class Feed {
  readonly seen: (string | null)[] = [];
  readonly ended: Promise<void>;
  readonly #ac = new AbortController();

  constructor(b: ZooKeeperBackend, prefix: string) {
    const iterable = b.changes({ prefix, signal: this.#ac.signal });
    this.ended = (async () => {
      for await (const id of iterable) this.seen.push(id);
    })();
  }

  /** Forget what was seen, run `action`, and wait for `lockId` to be reported. */
  async expect(lockId: string, action: () => Promise<unknown>): Promise<void> {
    this.seen.length = 0;
    await action();
    await eventually(`${lockId} reported`, () => this.seen.includes(lockId), SOON);
  }

  stop(): Promise<void> {
    this.#ac.abort();
    return this.ended;
  }
}

const unique = (label: string): string => `${label}-${randomBytes(4).toString('hex')}`;

async function feedOf(b: ZooKeeperBackend, prefix: string): Promise<Feed> {
  const feed = new Feed(b, prefix);
  await eventually('the first null', () => feed.seen.length > 0, SOON);
  assert.equal(feed.seen[0], null, 'null comes first');
  return feed;
}

async function mutexLifecycle(): Promise<void> {
  const prefix = unique('mx');
  const feed = await feedOf(backend(), `${prefix}/`);
  const other = backend();
  const lockId = `${prefix}/a "b"/ü`;
  let grant: Grant<ZkGrantData> | undefined;
  await feed.expect(lockId, async () => (grant = await hold(other, lockId)));
  await feed.expect(lockId, () => attempt(backend(), lockId, { wait: true }));
  await feed.expect(lockId, () => other.release(grant!));
  await feed.expect(lockId, () => other.forceRelease(lockId));
  // Outside the prefix: held, released, waited on — never reported.
  feed.seen.length = 0;
  const outside = `${prefix}-other`;
  const g = await hold(other, outside);
  await attempt(backend(), outside, { wait: true });
  await other.release(g);
  await feed.expect(`${prefix}/last`, () => hold(other, `${prefix}/last`));
  assert.ok(!feed.seen.includes(outside), 'an id outside the prefix is not reported');
  await feed.stop();
}

async function semaphorePermits(): Promise<void> {
  const prefix = unique('sem');
  const feed = await feedOf(backend(), prefix);
  const b = backend();
  const lockId = `${prefix}:pool`;
  const sem = { kind: 'semaphore' as const, permits: 2 };
  const first = await hold(b, lockId, sem);
  // The id's folders exist now: each later permit is a change inside them, not of the lock node.
  await feed.expect(lockId, () => hold(b, lockId, sem));
  await feed.expect(lockId, () => b.release(first));
  await feed.expect(lockId, () => attempt(backend(), lockId, { ...sem, wait: true }));
  await feed.stop();
}

async function abortLeavesNothing(): Promise<void> {
  const b = backend();
  const prefix = unique('ab');
  for (const n of [1, 2, 3]) await hold(b, `${prefix}/${n}`);
  await hold(b, `${unique('elsewhere')}`);
  const timers = process.getActiveResourcesInfo().filter((r) => r === 'Timeout').length;
  const feed = await feedOf(b, prefix);
  assert.equal(b.stats.changeFeeds, 1);
  // The chroot's watch and one per lock under the prefix, none for the lock outside it.
  assert.equal(b.stats.changeWatches, 4);
  await feed.stop();
  assert.equal(b.stats.changeFeeds, 0, 'no subscription left');
  assert.equal(b.stats.changeWatches, 0, 'no watch listener left');
  const after = process.getActiveResourcesInfo().filter((r) => r === 'Timeout').length;
  assert.ok(after <= timers, `no timer left behind (${timers} before, ${after} after)`);
}

async function nullAgainAfterExpiry(): Promise<void> {
  // Partitioned for longer than its session timeout, the session expires on the ensemble
  // (a kill from a second connection races the client's own reconnect, which can take the
  // session back before the close arrives): after the heal the client learns of the expiry
  // and the feed re-establishes on a new session.
  const node = server.nodes[0];
  assert.ok(node);
  const proxy = await faultProxy(node.port);
  const b = createZooKeeperBackend(`zookeeper://127.0.0.1:${proxy.port}/changes?sessionTimeoutMs=4000`);
  try {
    const prefix = unique('exp');
    const feed = await feedOf(b, prefix);
    const session = b.session;
    assert.ok(session, 'the backend has a session');
    feed.seen.length = 0;
    proxy.cut();
    await sleep(2 * session.sessionTimeoutMs + 1_000);
    proxy.heal();
    await eventually('the session ended', () => !session.alive, 30_000);
    await eventually('null again', () => feed.seen.includes(null), 30_000);
    assert.notEqual(b.session, session, 'a new session');
    const lockId = `${prefix}:after`;
    await feed.expect(lockId, () => hold(backend(), lockId));
    assert.equal(b.stats.changeWatches, 2, 'the chroot and the new lock, watched on the new session');
    await feed.stop();
  } finally {
    await b.close();
    await proxy.close();
  }
}

async function nullAgainAfterReconnect(): Promise<void> {
  const node = server.nodes[0];
  assert.ok(node);
  const proxy = await faultProxy(node.port);
  const b = createZooKeeperBackend(`zookeeper://127.0.0.1:${proxy.port}/changes?sessionTimeoutMs=8000`);
  try {
    const prefix = unique('rc');
    const feed = await feedOf(b, prefix);
    const session = b.session;
    feed.seen.length = 0;
    // Drops the connection; the client reconnects through the proxy at once, same session.
    proxy.heal();
    await eventually('null again', () => feed.seen.includes(null), 15_000);
    assert.equal(b.session, session, 'the same session');
    const lockId = `${prefix}:after`;
    await feed.expect(lockId, () => hold(backend(), lockId));
    await feed.stop();
  } finally {
    await b.close();
    await proxy.close();
  }
}

async function endsWhenClosed(): Promise<void> {
  const b = createZooKeeperBackend(url);
  const feed = await feedOf(b, unique('cl'));
  await b.close();
  await feed.ended;
  assert.equal(b.stats.changeFeeds, 0);
  assert.equal(b.stats.changeWatches, 0);
}

describe('zookeeper: changes() from watches', () => {
  test('acquire, a waiter joining, release and forceRelease are reported; other prefixes are not', T, mutexLifecycle);
  test('semaphore permits taken and given back, and a waiter at the gate, are reported', T, semaphorePermits);
  test('aborting ends the iteration and leaves no subscription, watch listener or timer', T, abortLeavesNothing);
  test('a lost session is re-established and reported by a second null', T, nullAgainAfterExpiry);
  test('a reconnect of the same session is reported by a second null', T, nullAgainAfterReconnect);
  test('closing the backend ends the iteration', T, endsWhenClosed);
});

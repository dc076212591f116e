/**
 * ZooKeeper: the predecessor deleted before the watch is set (Curator's NoNode case), the
 * lock folders reaped once empty, and `election.observe()` woken by watches instead of a
 * poll (docs/backends/zookeeper.md, "Layout" and "Elections").
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { createLocker, type LeaderInfo, type Locker } from '../../src/index.js';
import { createZooKeeperBackend, type ZooKeeperBackend } from '../../src/backends/zookeeper/index.js';
import { ZkSession } from '../../src/backends/zookeeper/session.js';
import type { ZkTicket } from '../../src/backends/zookeeper/recipe.js';
import { eventually, seamRequest } from '../helpers.js';
import { startZooKeeper, type RunningZooKeeper } from '../../scripts/servers/zookeeper.js';

const T = { timeout: 60_000 };
const CHROOT = '/locksmith-folders';

let server: RunningZooKeeper;
let look: ZkSession;
const open: { close(): Promise<void> }[] = [];

before(async () => {
  server = await startZooKeeper({ nodes: 1 });
  look = await ZkSession.open({ connectString: server.connectString, sessionTimeoutMs: 10_000, connectTimeoutMs: 30_000 });
});

after(async () => {
  await Promise.allSettled(open.splice(0).map((c) => c.close()));
  look.close();
  await server.stop();
});

const id = (label: string): string => `zk-${label}-${randomBytes(5).toString('hex')}`;

function backend(): ZooKeeperBackend {
  const b = createZooKeeperBackend(`zookeeper://${server.connectString}${CHROOT}?sessionTimeoutMs=4000`);
  open.push(b);
  return b;
}

function client(): Locker {
  const l = createLocker(backend());
  open.push(l);
  return l;
}

describe('zookeeper: the node ahead already gone when the watch is set', () => {
  // The fallback poll comes after 22.5 s at the earliest: the test's timeout is below it, so
  // only the NoNode answer to the watch request can end the wait in time.
  test('waitForChange resolves from the NoNode answer, with no notification, and the next attempt holds', { timeout: 20_000 }, async () => {
    const lockId = id('nonode');
    const a = backend();
    const b = backend();
    const first = await a.tryAcquire(seamRequest<ZkTicket>(lockId, 'a'));
    assert.ok(first.granted);
    const second = await b.tryAcquire(seamRequest<ZkTicket>(lockId, 'b'));
    assert.ok(!second.granted);
    const ticket = second.contended.ticket;
    assert.ok(ticket?.watch?.type === 'node', 'b waits on the node ahead');
    // The node ahead is deleted before b sets its watch on it.
    assert.equal(await a.release(first.grant), true);
    assert.equal(await look.exists(ticket.watch.path), null);
    const before = b.stats.waiterNotifications;
    await b.waitForChange(lockId, ticket, new AbortController().signal);
    assert.equal(b.stats.waiterNotifications, before, 'woken by the NoNode answer, not by a notification');
    const again = await b.tryAcquire(seamRequest<ZkTicket>(lockId, 'b', { ticket }));
    assert.ok(again.granted);
    await b.release(again.grant);
  });
});

describe('zookeeper: lock folders are reaped once empty', () => {
  const paths = (lockId: string): { base: string; gate: string; leases: string } => backend().paths(lockId);

  test("a released mutex leaves no folder behind; a waiter's folder stays while it waits", T, async () => {
    const lockId = id('mutex');
    const { base } = paths(lockId);
    const held = await client().lock(lockId);
    assert.notEqual(await look.exists(base), null);
    const next = client().lock(lockId, { timeoutMs: 30_000 });
    await eventually('the waiter queued', async () => (await look.children(base)).length === 2);
    await held.release();
    const second = await next;
    assert.notEqual(await look.exists(base), null, 'in use: not reaped');
    await second.release();
    await eventually('the empty lock folder is reaped', async () => (await look.exists(base)) === null);
    // A reaped folder is recreated, and tokens (czxids) keep increasing.
    const third = await client().lock(lockId);
    assert.ok(third.token > second.token);
    await third.release();
  });

  test('an id a semaphore used keeps its gate and leases folders (they decide whether a mutex takes the gate)', T, async () => {
    const lockId = id('sem');
    const p = paths(lockId);
    const permit = await client().semaphore(lockId, { permits: 2 }).acquire();
    await permit.release();
    const mutex = await client().lock(lockId);
    await mutex.release();
    assert.deepEqual(await look.children(p.leases), []);
    assert.notEqual(await look.exists(p.gate), null);
    assert.notEqual(await look.exists(p.base), null);
  });

  test('a waiter that gives up leaves no folder behind once the holder is gone too', T, async () => {
    const lockId = id('cancel');
    const { base } = paths(lockId);
    const held = await client().lock(lockId);
    await assert.rejects(client().lock(lockId, { timeoutMs: 200 }));
    await held.release();
    await eventually('the empty lock folder is reaped', async () => (await look.exists(base)) === null);
  });
});

describe('zookeeper: election.observe() is woken by watches', () => {
  test('leader changes are seen without polling (observeEveryMs far beyond the test)', T, async () => {
    const name = id('observe');
    const watcher = client().election(name, { id: 'watcher', observeEveryMs: 600_000 });
    const ctl = new AbortController();
    const seen: (LeaderInfo | undefined)[] = [];
    const done = (async () => {
      for await (const l of watcher.observe({ signal: ctl.signal })) seen.push(l);
    })();
    await eventually('the first view', () => seen.length >= 1);
    const a = await client().election(name, { id: 'a' }).campaign();
    await eventually('a leads', () => seen.some((l) => l?.id === 'a'));
    const b = client().election(name, { id: 'b' }).campaign();
    await a.resign();
    const term = await b;
    await eventually('b leads', () => seen.some((l) => l?.id === 'b'));
    await term.resign();
    await eventually('nobody leads', () => seen.at(-1) === undefined);
    ctl.abort();
    await done;
    const ids = seen.map((l) => l?.id);
    assert.equal(ids[0], undefined);
    assert.deepEqual(
      ids.filter((x) => x !== undefined),
      ['a', 'b'],
    );
  });
});

/**
 * Lock-delay on ZooKeeper (docs/backends/zookeeper.md, "Lock-delay"): a holder granted with
 * `lockDelayMs` leaves a marker on a second, longer session. When the holder vanishes (its
 * session expired behind a partition, its ttl lapsed) the marker keeps the lock unavailable
 * for the delay — to a waiter queued behind it and to a newcomer alike; a clean release takes
 * the marker with it and imposes nothing. Single node: no quorum is needed here.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { InvalidArgumentError, createLocker, type Locker } from '../../src/index.js';
import { createZooKeeperBackend, type ZooKeeperBackend } from '../../src/backends/zookeeper/index.js';
import { ZkSession } from '../../src/backends/zookeeper/session.js';
import { eventually, faultProxy, type FaultProxy } from '../helpers.js';
import { startZooKeeper, type RunningZooKeeper } from '../../scripts/servers/zookeeper.js';

const T = { timeout: 120_000 };
const CHROOT = '/locksmith-delay';

let server: RunningZooKeeper;
let look: ZkSession;
const open: Locker[] = [];
const proxies: FaultProxy[] = [];

before(async () => {
  server = await startZooKeeper({ nodes: 1 });
  look = await ZkSession.open({ connectString: server.connectString, sessionTimeoutMs: 10_000, connectTimeoutMs: 30_000 });
});

after(async () => {
  await Promise.allSettled(open.splice(0).map((l) => l.close()));
  await Promise.allSettled(proxies.splice(0).map((p) => p.close()));
  look.close();
  await server.stop();
});

const id = (label: string): string => `delay-${label}-${randomBytes(5).toString('hex')}`;

function backend(connectString = server.connectString): ZooKeeperBackend {
  return createZooKeeperBackend(`zookeeper://${connectString}${CHROOT}?sessionTimeoutMs=2000`);
}

function client(b: ZooKeeperBackend = backend()): Locker {
  const l = createLocker(b);
  open.push(l);
  return l;
}

/** The children of the lock's node: queue nodes and delay markers. */
async function nodesOf(b: ZooKeeperBackend, lockId: string): Promise<{ queue: string[]; markers: string[] }> {
  const children = (await look.children(b.paths(lockId).base).catch(() => [])) as string[];
  return { queue: children.filter((c) => !c.startsWith('_delay_')), markers: children.filter((c) => c.startsWith('_delay_')) };
}

test('a holder whose session expired behind a partition keeps the lock unavailable for the delay', T, async () => {
  const proxy = await faultProxy(server.nodes[0]!.port);
  proxies.push(proxy);
  const doomedBackend = backend(`127.0.0.1:${proxy.port}`);
  const [doomed, waiting, newcomer] = [client(doomedBackend), client(), client()];
  const lockId = id('partition');
  const held = await doomed.lock(lockId, { ttlMs: 30_000, lockDelayMs: 5_000 });
  let granted = false;
  const waiter = waiting.lock(lockId, { timeoutMs: 60_000 }).then((l) => ((granted = true), l));
  await eventually('the waiter is queued', async () => (await nodesOf(doomedBackend, lockId)).queue.length === 2);
  proxy.cut();
  // The ensemble expires the main session and deletes the holder's node; the marker stays.
  await eventually('the holder node is gone', async () => (await nodesOf(doomedBackend, lockId)).queue.length === 1, 60_000);
  // Back at once: the live client learns its session expired and keeps the marker for the delay.
  proxy.heal();
  assert.equal(granted, false, 'the waiter behind the vanished holder still waits');
  assert.equal(await newcomer.tryLock(lockId), null, 'a newcomer is refused during the delay');
  assert.equal((await nodesOf(doomedBackend, lockId)).markers.length, 1, 'the marker outlives the holder node');
  const next = await waiter;
  assert.equal(next.held, true);
  assert.ok(next.token > held.token);
  assert.deepEqual((await nodesOf(doomedBackend, lockId)).markers, [], 'the marker went at the end of the delay');
  await next.release();
});

test('a hold whose ttl lapsed keeps the delay although its client lives on; forceRelease ends it', T, async () => {
  const b = backend();
  const [a, other] = [client(b), client()];
  const lockId = id('lapse');
  await a.lock(lockId, { ttlMs: 500, autoExtend: false, lockDelayMs: 30_000 });
  await eventually('the lapsed node is gone', async () => (await nodesOf(b, lockId)).queue.length === 0);
  assert.equal(await other.tryLock(lockId), null, 'blocked by the delay after the lapse');
  assert.ok((await other.forceRelease(lockId, { reason: 'test: end the delay' })) >= 0);
  const next = await other.tryLock(lockId);
  assert.ok(next, 'a forced release ends the delay');
  await next.release();
});

test('a reader that lapsed with a delay blocks a writer but not another reader', T, async () => {
  const b = backend();
  const [a, other] = [client(b), client()];
  const lockId = id('reader');
  await a.readWriteLock(lockId).read({ ttlMs: 500, autoExtend: false, lockDelayMs: 30_000 });
  await eventually('the lapsed node is gone', async () => (await nodesOf(b, lockId)).queue.length === 0);
  const reader = await other.readWriteLock(lockId).tryRead();
  assert.ok(reader, 'a reader shares with the vanished reader');
  await reader.release();
  assert.equal(await other.readWriteLock(lockId).tryWrite(), null, 'a writer waits out the delay');
  assert.ok((await other.forceRelease(lockId, { reason: 'test: end the delay' })) >= 0);
  const writer = await other.readWriteLock(lockId).tryWrite();
  assert.ok(writer, 'free after the forced release');
  await writer.release();
});

test('a writer queued behind a live reader after another reader vanished still waits out the delay', T, async () => {
  const b = backend();
  const [a, c, w] = [client(b), client(), client()];
  const lockId = id('behind-reader');
  await a.readWriteLock(lockId).read({ ttlMs: 500, autoExtend: false, lockDelayMs: 30_000 });
  const live = await c.readWriteLock(lockId).read();
  await eventually('the lapsed reader is gone', async () => (await nodesOf(b, lockId)).queue.length === 1);
  let granted = false;
  const writer = w
    .readWriteLock(lockId)
    .write({ timeoutMs: 60_000 })
    .then((l) => ((granted = true), l));
  await eventually('the writer is queued', async () => (await nodesOf(b, lockId)).queue.length === 2);
  // The live reader's node was the writer's last blocker: its deletion is no hand-off here.
  await live.release();
  await sleep(1_000);
  assert.equal(granted, false, "the writer waits for the vanished reader's delay");
  assert.ok((await c.forceRelease(lockId, { reason: 'test: end the delay' })) >= 0);
  const held = await writer;
  assert.equal(held.held, true);
  await held.release();
});

test('a clean release imposes no delay: the waiter takes over and no marker is left', T, async () => {
  const b = backend();
  const [a, waiting] = [client(b), client()];
  const lockId = id('release');
  const held = await a.lock(lockId, { lockDelayMs: 30_000 });
  assert.equal((await nodesOf(b, lockId)).markers.length, 1, 'the holder has its marker');
  const waiter = waiting.lock(lockId, { timeoutMs: 20_000, lockDelayMs: 30_000 });
  await eventually('the waiter is queued', async () => (await nodesOf(b, lockId)).queue.length === 2);
  await held.release();
  const next = await waiter;
  assert.equal(next.held, true);
  await next.release();
  assert.deepEqual(await nodesOf(b, lockId), { queue: [], markers: [] });
  const again = await a.tryLock(lockId);
  assert.ok(again, 'free right after the release');
  await again.release();
});

test('a delay longer than the ensemble lets a session last is refused before anything is queued', T, async () => {
  const b = backend();
  const lockId = id('too-long');
  await assert.rejects(client(b).lock(lockId, { lockDelayMs: 120_000 }), InvalidArgumentError);
  assert.deepEqual(await nodesOf(b, lockId), { queue: [], markers: [] });
});

/**
 * Seeing ZooKeeper's locks through the seam (`list`, `inspect`, `forceRelease`): holders and
 * waiters of other processes with their identities, the node data format, paging with a
 * cursor while locks come and go, odd ids, prefixes, bad cursors, and breaking a lock on
 * purpose (docs/backends/zookeeper.md, "Node data", "Listing", "Breaking a lock").
 */
import assert from 'node:assert/strict';
import { hostname } from 'node:os';
import { after, before, describe, test } from 'node:test';
import { createLocker, InvalidArgumentError, LockLostError } from '../../src/index.js';
import type { AcquireRequest, Grant, ListPage, LockState } from '../../src/backend.js';
import { createZooKeeperBackend, type ZooKeeperBackend } from '../../src/backends/zookeeper/index.js';
import { frameReplies } from '../../src/backends/zookeeper/driver.js';
import { lockPaths, parseLeaseData } from '../../src/backends/zookeeper/layout.js';
import type { ZkGrantData, ZkTicket } from '../../src/backends/zookeeper/recipe.js';
import { ZkSession } from '../../src/backends/zookeeper/session.js';
import { decodeIdentity } from '../../src/observe/identity.js';
import { eventually, listSeam, seamRequest } from '../helpers.js';
import { exited, nextMessage, spawnChild } from '../file/helpers.js';
import { startZooKeeper, type RunningZooKeeper } from '../../scripts/servers/zookeeper.js';

const T = { timeout: 120_000 };
const CHROOT = '/observe';

let server: RunningZooKeeper;
let url: string;
const open: { close(): Promise<void> }[] = [];

before(async () => {
  server = await startZooKeeper({ nodes: 1 });
  // Seam holds are not renewed: a long session keeps them for the whole file.
  url = `zookeeper://${server.connectString}${CHROOT}?sessionTimeoutMs=60000`;
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

async function hold(b: ZooKeeperBackend, lockId: string, over: Partial<AcquireRequest<ZkTicket>> = {}): Promise<Grant<ZkGrantData>> {
  const result = await b.tryAcquire(seamRequest<ZkTicket>(lockId, `owner-${++owners}`, { wait: false, ttlMs: 60_000, ...over }));
  assert.ok(result.granted, `${lockId} granted`);
  return result.grant;
}

function page(b: ZooKeeperBackend, prefix: string, limit: number, cursor?: string): Promise<ListPage> {
  return b.list({ prefix, limit, cursor, signal: new AbortController().signal });
}

/** Every page of `prefix` with `limit` (test/helpers.ts). */
const listAll = async (b: ZooKeeperBackend, prefix: string, limit = 1_000): Promise<LockState[]> =>
  (await listSeam(b, prefix, limit)).locks;

const idsOf = async (b: ZooKeeperBackend, prefix: string): Promise<string[]> => (await listAll(b, prefix)).map((l) => l.lockId).sort();

describe('zookeeper: who holds and who waits, across processes', () => {
  test('a holder and a waiter in two other processes are listed with their identities', T, async () => {
    const b = backend();
    const lockId = 'obs:proc/one';
    const holder = spawnChild({ mode: 'hold', url, lockId, ttlMs: 30_000, name: 'holder-app' });
    const held = await nextMessage(holder, 'held');
    const waiter = spawnChild({ mode: 'hold', url, lockId, ttlMs: 30_000, name: 'waiter-app' });
    const waiting = await nextMessage(waiter, 'waiting');
    const listed = await page(b, 'obs:proc/', 10);
    assert.equal(listed.cursor, undefined);
    assert.deepEqual(
      listed.locks.map((l) => l.lockId),
      [lockId],
    );
    const [lock] = listed.locks;
    const [h] = lock?.holders ?? [];
    assert.ok(lock && h);
    assert.deepEqual(decodeIdentity(h.identity), { host: hostname(), pid: held.pid, name: 'holder-app' });
    assert.equal(h.token, BigInt(held.token));
    assert.equal(lock.lastToken, h.token);
    const now = Date.now();
    assert.ok(h.acquiredAt !== undefined && h.acquiredAt <= now + 1_000 && h.acquiredAt > now - 60_000, 'the server-clock ctime');
    assert.equal(lock.waiters, 1);
    const [w] = lock.queue ?? [];
    assert.ok(w);
    assert.deepEqual(decodeIdentity(w.identity), { host: hostname(), pid: waiting.pid, name: 'waiter-app' });
    assert.deepEqual([w.kind, w.fair], ['mutex', true]);
    assert.ok(w.ownerId !== '' && w.ownerId !== h.ownerId);
    assert.ok(w.since !== undefined && w.since >= h.acquiredAt, 'queued after the holder');
    const who = (s: LockState): unknown => [
      s.holders.map((x) => [x.ownerId, x.identity, x.token]),
      s.queue?.map((x) => [x.ownerId, x.identity]),
    ];
    assert.deepEqual(who(await b.inspect(lockId)), who(lock), 'inspect shows the same');
    holder.send('release');
    await nextMessage(holder, 'released');
    await nextMessage(waiter, 'held');
    const [next] = (await page(b, 'obs:proc/', 10)).locks;
    assert.equal(decodeIdentity(next?.holders[0]?.identity)?.name, 'waiter-app');
    assert.deepEqual(next?.queue, []);
    waiter.send('release');
    await nextMessage(waiter, 'released');
    assert.deepEqual(await page(b, 'obs:proc/', 10), { locks: [], cursor: undefined });
    holder.kill('SIGKILL');
    waiter.kill('SIGKILL');
    await Promise.all([exited(holder), exited(waiter)]);
  });
});

describe('zookeeper: what the nodes hold', () => {
  test('the identity is stored verbatim after the owner in every node, and older data still reads', T, async () => {
    const b = backend();
    const identity = '{"h":"hôst \\"q\\"","p":7,"n":"verbatim","m":{"k":[1,"ü"]}}';
    const other = '{"h":"x","p":8,"n":"w"}';
    const held = await hold(b, 'obs:verbatim', { identity, ownerId: 'line\nbreak owner' });
    const queued = await b.tryAcquire(seamRequest<ZkTicket>('obs:verbatim', 'queued-owner', { identity: other, kind: 'read' }));
    assert.equal(queued.granted, false);
    const s = await b.inspect('obs:verbatim');
    assert.deepEqual(
      s.holders.map((h) => [h.ownerId, h.identity]),
      [['line\nbreak owner', identity]],
    );
    assert.deepEqual(s.queue, [{ ownerId: 'queued-owner', kind: 'read', fair: true, identity: other, since: s.queue?.[0]?.since }]);
    const look = await ZkSession.open({ connectString: server.connectString, sessionTimeoutMs: 10_000, connectTimeoutMs: 30_000 });
    try {
      const node = await look.get(held.data.nodes[0] ?? '');
      assert.equal(node?.data?.toString('utf8'), `line\nbreak owner\0${identity}`, 'owner, NUL, identity');
    } finally {
      look.close();
    }
    // What locksmith wrote before identities, a semaphore lease, and Curator's IP address.
    assert.deepEqual(parseLeaseData(Buffer.from('old-owner')), { ownerId: 'old-owner', token: undefined });
    assert.deepEqual(parseLeaseData(Buffer.from('locksmith-lease/1\n42\nold')), { ownerId: 'old', token: 42n });
    assert.deepEqual(parseLeaseData(Buffer.from(`locksmith-lease/1\n42\nnew\0${other}`)), { ownerId: 'new', identity: other, token: 42n });
    assert.deepEqual(parseLeaseData(Buffer.from('locksmith-lease/1\n42 3\nsized')), { ownerId: 'sized', token: 42n, permits: 3 });
  });

  test('a semaphore holder and a mutex waiting behind it show their identities', T, async () => {
    const b = backend();
    const lockId = 'obs:sem';
    await hold(b, lockId, { kind: 'semaphore', permits: 1, identity: '{"n":"sem-1"}' });
    const mutex = await b.tryAcquire(seamRequest<ZkTicket>(lockId, 'mutex-owner', { identity: '{"n":"mutex"}' }));
    assert.equal(mutex.granted, false);
    const s = await b.inspect(lockId);
    assert.deepEqual(
      s.holders.map((h) => [h.kind, h.identity]),
      [['semaphore', '{"n":"sem-1"}']],
    );
    assert.deepEqual(
      s.queue?.map((w) => [w.kind, w.identity]),
      [['mutex', '{"n":"mutex"}']],
    );
  });
});

describe('zookeeper: listing in pages', () => {
  test('paging over 130 locks with limit 7 sees each exactly once while locks come and go', T, async () => {
    const b = backend();
    const ids = Array.from({ length: 130 }, (_, i) => `page:${String(i).padStart(3, '0')}`);
    for (const id of ids) await hold(b, id);
    // Idle lock nodes (left by a crashed holder, say) are interleaved and never listed.
    const look = await ZkSession.open({ connectString: server.connectString, sessionTimeoutMs: 10_000, connectTimeoutMs: 30_000 });
    for (let i = 0; i < 20; i++)
      await look.create(lockPaths(CHROOT, `page:${String(i * 6).padStart(3, '0')}:idle`).base, Buffer.alloc(0), 0);
    look.close();
    const seen = new Map<string, number>();
    const churn: Grant<ZkGrantData>[] = [];
    let cursor: string | undefined;
    let pages = 0;
    do {
      const p = await page(b, 'page:', 7, cursor);
      assert.ok(p.locks.length <= 7, `page of ${p.locks.length}`);
      for (const l of p.locks) seen.set(l.lockId, (seen.get(l.lockId) ?? 0) + 1);
      cursor = p.cursor;
      pages += 1;
      churn.push(await hold(b, `page:!${pages}`), await hold(b, `page:~${pages}`));
      while (churn.length > 4) await b.release(churn.shift()!);
    } while (cursor !== undefined);
    for (const id of ids) assert.equal(seen.get(id), 1, id);
    for (const [id, n] of seen) assert.equal(n, 1, `${id} seen ${n} times`);
    assert.ok(pages >= Math.ceil(ids.length / 7), `${pages} pages`);
  });

  test('a released lock leaves the list', T, async () => {
    const b = backend();
    const kept = await hold(b, 'gone:kept');
    await b.release(await hold(b, 'gone:released'));
    assert.deepEqual(await idsOf(b, 'gone:'), ['gone:kept']);
    await b.release(kept);
    assert.deepEqual(await idsOf(b, 'gone:'), []);
  });
});

describe('zookeeper: listing odd ids, prefixes and cursors', () => {
  test('odd ids (quotes, slashes, unicode, 1 KB, reserved names) list as themselves', T, async () => {
    const b = backend();
    const odd = [
      'odd/"q"',
      "odd/it's",
      'odd/a/b/../c',
      'odd/\\',
      'odd/ ',
      'odd/%41',
      'odd/é',
      'odd/e\u0301',
      'odd/😀',
      `odd/${'ü'.repeat(510)}`,
    ];
    assert.equal(Buffer.byteLength(odd.at(-1) ?? ''), 1024);
    for (const id of [...odd, '.', 'zookeeper', 'zookeeperx']) await hold(b, id);
    assert.deepEqual(await idsOf(b, 'odd/'), [...odd].sort());
    assert.deepEqual(await idsOf(b, 'odd/e'), ['odd/e\u0301'], 'a prefix is on the id, not on its bytes');
    assert.deepEqual(await idsOf(b, 'odd/😀'), ['odd/😀']);
    assert.deepEqual(await idsOf(b, 'zookeeper'), ['zookeeper', 'zookeeperx']);
    assert.deepEqual(await idsOf(b, '.'), ['.']);
  });

  test('a prefix keeps exactly the ids that start with it', T, async () => {
    const b = backend();
    for (const id of ['pfx:a:1', 'pfx:a:2', 'pfx:ab', 'pfx:b', 'pfy:a:1']) await hold(b, id);
    assert.deepEqual(await idsOf(b, 'pfx:a:'), ['pfx:a:1', 'pfx:a:2']);
    assert.deepEqual(await idsOf(b, 'pfx:a'), ['pfx:a:1', 'pfx:a:2', 'pfx:ab']);
    assert.deepEqual(await idsOf(b, 'pfx:'), ['pfx:a:1', 'pfx:a:2', 'pfx:ab', 'pfx:b']);
    assert.deepEqual(await page(b, 'pfz', 5), { locks: [], cursor: undefined });
    const all = await idsOf(b, '');
    for (const id of ['pfx:a:1', 'pfy:a:1']) assert.ok(all.includes(id), id);
  });

  test('a cursor this backend did not give is an InvalidArgumentError', T, async () => {
    const b = backend();
    for (const cursor of ['', 'garbage', 'zk1:', 'zk2:abc', 'zk1:a/b', 'zk1:%zz', 'zk1:%FF', 'zk1:é', 'zk1:zookeeper', 'zk1:.']) {
      await assert.rejects(page(b, '', 5, cursor), (err: unknown) => {
        assert.ok(err instanceof InvalidArgumentError, `${cursor}: ${String(err)}`);
        assert.equal(err.argument, 'cursor');
        return true;
      });
    }
    assert.ok(Array.isArray((await page(b, '', 5, 'zk1:pfx:a:1')).locks), 'a cursor it gave is fine');
  });
});

describe('zookeeper: breaking a lock on purpose', () => {
  test('forceRelease ends the hold, keeps the waiter queued, and the next grant has a larger token', T, async () => {
    const b = backend();
    const other = backend();
    const lockId = 'break:seam';
    const broken = await hold(b, lockId);
    const queued = await other.tryAcquire(seamRequest<ZkTicket>(lockId, 'next-owner'));
    assert.ok(!queued.granted);
    assert.equal(await other.forceRelease(lockId), 1);
    // The queue is the lock: the waiter's node is first now, so it is the holder (its
    // client learns at its next attempt or from the watch on the node ahead).
    const s = await other.inspect(lockId);
    assert.deepEqual(
      s.holders.map((h) => h.ownerId),
      ['next-owner'],
    );
    assert.deepEqual(s.queue, []);
    await assert.rejects(b.extend(broken, 10_000), LockLostError);
    assert.equal(await b.release(broken), false);
    const next = await other.tryAcquire(seamRequest<ZkTicket>(lockId, 'next-owner', { ticket: queued.contended.ticket }));
    assert.ok(next.granted);
    assert.ok(next.grant.token > broken.token, `${next.grant.token} > ${broken.token}`);
    await other.release(next.grant);
  });

  test('forceRelease counts holds; with nobody left, lastToken is above the broken token and below the next', T, async () => {
    const b = backend();
    for (let i = 0; i < 3; i++) await hold(b, 'break:sem', { kind: 'semaphore', permits: 3 });
    assert.equal(await b.forceRelease('break:sem'), 3);
    assert.equal(await b.forceRelease('break:never'), 0);
    assert.deepEqual(await b.inspect('break:never'), { lockId: 'break:never', holders: [], waiters: 0, queue: [] });
    const broken = await hold(b, 'break:alone');
    assert.equal(await b.forceRelease('break:alone'), 1);
    const s = await b.inspect('break:alone');
    assert.ok(s.lastToken !== undefined && s.lastToken > broken.token, `lastToken ${s.lastToken} > ${broken.token}`);
    const next = await hold(b, 'break:alone');
    assert.ok(next.token > s.lastToken, `${next.token} > ${s.lastToken}`);
  });

  test("a holder in another process loses the lock at its next renewal; the next token is ≥ the broken one's + 2", T, async () => {
    const b = backend();
    const lockId = 'break:proc';
    const holder = spawnChild({ mode: 'hold', url, lockId, ttlMs: 3_000 });
    const held = await nextMessage(holder, 'held');
    assert.equal(await b.forceRelease(lockId), 1);
    await eventually('the holder to see its lock lost', async () => {
      const reply = nextMessage(holder, 'write');
      holder.send('write');
      return (await reply).lost;
    });
    const locker = createLocker(url);
    open.push(locker);
    const lock = await locker.lock(lockId, { timeoutMs: 30_000 });
    assert.ok(lock.token >= BigInt(held.token) + 2n, `${lock.token} ≥ ${held.token} + 2`);
    await lock.release();
    holder.kill('SIGKILL');
    await exited(holder);
  });
});

describe('zookeeper: replies framed for the client library', () => {
  test('frameReplies hands over whole frames, however the socket splits them, and drops a partial one on a new socket', () => {
    const frames = [Buffer.from('a'), Buffer.alloc(0), Buffer.from('hello world'), Buffer.alloc(300, 7)].map((body) => {
      const f = Buffer.alloc(4 + body.length);
      f.writeInt32BE(body.length, 0);
      body.copy(f, 4);
      return f;
    });
    const stream = Buffer.concat(frames);
    for (let cut = 1; cut < stream.length; cut += 7) {
      const got: Buffer[] = [];
      const cm = {
        servers: [],
        socket: undefined,
        connect: () => undefined,
        pendingBuffer: null,
        onSocketData: (b: Buffer) => void got.push(Buffer.from(b)),
      };
      frameReplies(cm);
      for (let at = 0; at < stream.length; at += cut) cm.onSocketData(stream.subarray(at, at + cut));
      assert.deepEqual(got, frames, `cut every ${cut} bytes`);
      cm.onSocketData(stream.subarray(0, 6));
      (cm as { socket: unknown }).socket = {};
      const before = got.length;
      cm.onSocketData(frames[0] ?? Buffer.alloc(0));
      assert.deepEqual(got.slice(before), [frames[0]], 'the half frame of the old socket is gone');
    }
  });
});

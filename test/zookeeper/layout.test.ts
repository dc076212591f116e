/**
 * ZooKeeper's layout against a real 3-node ensemble: Curator-compatible node names and
 * protected creates, read-write and semaphore layouts, czxid tokens, lock ids as znode
 * names, and the URL. Failures and sessions are in zookeeper.test.ts.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { randomBytes, randomUUID } from 'node:crypto';
import { InvalidArgumentError, createLocker, type Locker } from '../../src/index.js';
import { ZooKeeperBackend, createZooKeeperBackend } from '../../src/backends/zookeeper/index.js';
import { ZkSession } from '../../src/backends/zookeeper/session.js';
import { createProtectedNode, type ProtectedCreateSession } from '../../src/backends/zookeeper/nodes.js';
import { decodeLockId, encodeLockId } from '../../src/backends/zookeeper/layout.js';
import { MODE, RC, ZkError } from '../../src/backends/zookeeper/driver.js';
import { startZooKeeper, type RunningZooKeeper } from '../../scripts/servers/zookeeper.js';

const T = { timeout: 180_000 };
const CHROOT = '/locksmith-tests';

let server: RunningZooKeeper;
const open: Locker[] = [];
const sessions: ZkSession[] = [];

before(async () => {
  server = await startZooKeeper({ nodes: 3 });
});

after(async () => {
  await Promise.allSettled(open.splice(0).map((l) => l.close()));
  for (const s of sessions.splice(0)) s.close();
  await server.stop();
});

const id = (label: string): string => `zk-${label}-${randomBytes(5).toString('hex')}`;

function backend(sessionTimeoutMs = 4_000, connectString = server.connectString): ZooKeeperBackend {
  return createZooKeeperBackend(`zookeeper://${connectString}${CHROOT}?sessionTimeoutMs=${sessionTimeoutMs}`);
}

function client(b: ZooKeeperBackend = backend(), options: Parameters<typeof createLocker>[1] = {}): Locker {
  const l = createLocker(b, options);
  open.push(l);
  return l;
}

/** A raw session for looking at (or writing into) the tree, like another ZooKeeper client would. */
async function raw(): Promise<ZkSession> {
  const s = await ZkSession.open({ connectString: server.connectString, sessionTimeoutMs: 10_000, connectTimeoutMs: 30_000 });
  sessions.push(s);
  return s;
}

test("nodes follow Curator's protected naming under <chroot>/<lockId>", T, async () => {
  const lockId = id('layout');
  const b = backend();
  const lock = await client(b).lock(lockId);
  const s = await raw();
  const children = await s.children(`${CHROOT}/${lockId}`);
  assert.equal(children.length, 1);
  assert.match(children[0] ?? '', /^_c_[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}-lock-\d{10}$/);
  const got = await s.get(`${CHROOT}/${lockId}/${children[0] ?? ''}`);
  assert.equal(BigInt(got?.stat.czxid ?? -1), lock.token, 'the token is the node czxid');
  await lock.release();
  assert.deepEqual(await s.children(`${CHROOT}/${lockId}`), []);
});

test('a node written the way Curator writes it excludes locksmith, and locksmith queues behind it', T, async () => {
  const lockId = id('curator');
  const s = await raw();
  const base = `${CHROOT}/${lockId}`;
  await s.create(CHROOT, Buffer.alloc(0), MODE.PERSISTENT).catch(() => undefined);
  await s.create(base, Buffer.alloc(0), MODE.PERSISTENT);
  // What InterProcessMutex.acquire() creates: EPHEMERAL_SEQUENTIAL `_c_<uuid>-lock-`.
  const curatorNode = await s.create(`${base}/_c_${randomUUID()}-lock-`, Buffer.from('10.0.0.7'), MODE.EPHEMERAL_SEQUENTIAL);
  const locker = client();
  assert.equal(await locker.tryLock(lockId), null, 'the Curator holder excludes locksmith');
  const queued = new Promise<void>((resolve) => locker.once('waiting', () => resolve()));
  const pending = locker.lock(lockId, { timeoutMs: 60_000 });
  await queued;
  // Curator's own check: a later node is not first, so a Curator client would wait too.
  const sorted = (await s.children(base)).sort((a, b) => a.slice(-10).localeCompare(b.slice(-10)));
  assert.equal(`${base}/${sorted[0] ?? ''}`, curatorNode);
  assert.equal(sorted.length, 2);
  await s.delete(curatorNode);
  const lock = await pending;
  // A Curator client arriving now creates a node that sorts after ours.
  const late = await s.create(`${base}/_c_${randomUUID()}-lock-`, Buffer.from('10.0.0.8'), MODE.EPHEMERAL_SEQUENTIAL);
  const now = (await s.children(base)).sort((a, b) => a.slice(-10).localeCompare(b.slice(-10)));
  assert.notEqual(`${base}/${now[0] ?? ''}`, late, 'the Curator newcomer is not first while locksmith holds');
  await lock.release();
  await s.delete(late);
});

test('read-write nodes use __READ__ / __WRIT__ and a reader waits only for the writer ahead', T, async () => {
  const lockId = id('rw');
  const s = await raw();
  const base = `${CHROOT}/${lockId}`;
  const r1 = await client().readWriteLock(lockId).read();
  const wLocker = client();
  const wQueued = new Promise<void>((resolve) => wLocker.once('waiting', () => resolve()));
  const w = wLocker.readWriteLock(lockId).write({ timeoutMs: 60_000 });
  await wQueued;
  const r2Locker = client();
  const r2Queued = new Promise<void>((resolve) => r2Locker.once('waiting', () => resolve()));
  const r2 = r2Locker.readWriteLock(lockId).read({ timeoutMs: 60_000 });
  await r2Queued;
  const names = (await s.children(base)).sort((a, b) => a.slice(-10).localeCompare(b.slice(-10)));
  assert.deepEqual(
    names.map((n) => (/__READ__|__WRIT__/.exec(n) ?? [''])[0]),
    ['__READ__', '__WRIT__', '__READ__'],
  );
  await r1.release();
  const wl = await w;
  await wl.release();
  const r2l = await r2;
  assert.ok(r2l.token > wl.token);
  await r2l.release();
});

test('semaphore nodes use the InterProcessSemaphoreV2 layout (locks/ and leases/)', T, async () => {
  const lockId = id('sem');
  const s = await raw();
  const sem = client().semaphore(lockId, { permits: 2 });
  const a = await sem.acquire();
  const b = await sem.acquire();
  assert.equal(await client().semaphore(lockId, { permits: 2 }).tryAcquire(), null);
  const leases = await s.children(`${CHROOT}/${lockId}/leases`);
  assert.equal(leases.length, 2);
  for (const l of leases) assert.match(l, /^_c_[0-9a-f-]{36}-lease-\d{10}$/);
  assert.deepEqual(await s.children(`${CHROOT}/${lockId}/locks`), [], 'the internal mutex is dropped after a lease');
  await a.release();
  await b.release();
});

test('tokens keep increasing after the lock parent is deleted (czxid, not the sequence suffix)', T, async () => {
  const lockId = id('czxid');
  const s = await raw();
  const locker = client();
  const first = await locker.lock(lockId);
  await first.release();
  await s.delete(`${CHROOT}/${lockId}`);
  const second = await locker.lock(lockId);
  const names = await s.children(`${CHROOT}/${lockId}`);
  assert.match(names[0] ?? '', /-lock-0000000000$/, 'the sequence restarted at 0');
  assert.ok(second.token > first.token, 'the token did not');
  await second.release();
});

test('a create whose reply is lost is found again by its uuid instead of leaking (protected mode)', T, async () => {
  const s = await raw();
  const parent = `${CHROOT}/${id('protected')}`;
  const uuid = randomUUID();
  let creates = 0;
  // The real create reaches the real server; only its reply is "lost" on the way back.
  const lossy: ProtectedCreateSession = {
    get alive() {
      return s.alive;
    },
    get sessionTimeoutMs() {
      return s.sessionTimeoutMs;
    },
    children: (path) => s.children(path),
    async create(path, data, mode) {
      const created = await s.create(path, data, mode);
      if (mode === MODE.EPHEMERAL_SEQUENTIAL && creates++ === 0) throw new ZkError('create', path, RC.CONNECTIONLOSS);
      return created;
    },
  };
  const path = await createProtectedNode(lossy, parent, 'lock-', uuid, Buffer.from('me'));
  const children = await s.children(parent);
  assert.equal(children.length, 1, 'exactly one node: the lost create was not repeated');
  assert.equal(`${parent}/${children[0] ?? ''}`, path);
  assert.ok(children[0]?.startsWith(`_c_${uuid}-lock-`));
  assert.equal(creates, 1);
});

test('a soft tryLock that finds the lock held leaves no node behind', T, async () => {
  const lockId = id('soft');
  const s = await raw();
  const held = await client().lock(lockId);
  for (let i = 0; i < 5; i++) assert.equal(await client().tryLock(lockId), null);
  assert.equal((await s.children(`${CHROOT}/${lockId}`)).length, 1);
  await held.release();
});

test('every lock id is one znode name: printable ASCII kept, `/`, `%` and the rest percent-encoded', () => {
  assert.equal(encodeLockId('account-42'), 'account-42');
  assert.equal(encodeLockId('user:42@eu'), 'user:42@eu');
  assert.equal(encodeLockId('locks/account-42'), 'locks%2Faccount-42');
  assert.equal(encodeLockId('50%'), '50%25');
  assert.equal(encodeLockId('a b'), 'a%20b');
  assert.equal(encodeLockId('счёт'), '%D1%81%D1%87%D1%91%D1%82');
  assert.equal(encodeLockId('.'), '%2E');
  assert.equal(encodeLockId('..'), '%2E%2E');
  assert.equal(encodeLockId('...'), '...');
  assert.equal(encodeLockId('zookeeper'), '%7Aookeeper');
  const ids = ['a/b', 'a%2Fb', 'a', 'a/locks', 'a/leases', 'x\u0000y', '.', '%2E', 'zookeeper', '%7Aookeeper', 'ключ/鍵 1', '/', '//'];
  const names = ids.map(encodeLockId);
  assert.equal(new Set(names).size, ids.length, 'one-to-one');
  for (const [i, n] of names.entries()) {
    assert.doesNotMatch(n, /\//, ids[i]);
    assert.equal(decodeLockId(n), ids[i]);
  }
});

test('createLocker accepts the ensemble URL (host list with percent-encoded colons) and a chroot', T, async () => {
  const locker = createLocker(`${server.url}/via-url?sessionTimeoutMs=5000`);
  open.push(locker);
  const lockId = id('url');
  const lock = await locker.lock(lockId);
  const s = await raw();
  assert.equal((await s.children(`/via-url/${lockId}`)).length, 1, 'the node is under the chroot');
  await lock.release();
});

test('an unknown or malformed URL parameter is an InvalidArgumentError, not silently ignored', T, async () => {
  const bad = (e: unknown): boolean => e instanceof InvalidArgumentError && e.argument === 'url';
  assert.throws(() => createZooKeeperBackend(`zookeeper://${server.connectString}/x?sessionTimeout=5000`), bad);
  assert.throws(() => createZooKeeperBackend(`zookeeper://${server.connectString}/x?sessionTimeoutMs=soon`), bad);
  assert.throws(
    () => createZooKeeperBackend('zookeeper://user:secret@127.0.0.1:2181/x'),
    (e: unknown) => bad(e) && !String(e).includes('secret'),
  );
  const locker = createLocker(`${server.url}/x?connectTimeout=100`);
  open.push(locker);
  await assert.rejects(locker.lock(id('bad-param')), bad);
});

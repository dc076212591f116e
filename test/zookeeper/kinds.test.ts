/**
 * One lock id is one lock across kinds on ZooKeeper (docs/backends/zookeeper.md, "One id,
 * one lock"): the gate that a semaphore brings, what every kind does with it, tokens that
 * follow the grant order across kinds, and clean-up at every stage. No quorum is needed,
 * so a single standalone node serves.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { createLocker, LockTimeoutError, type Lock, type Locker } from '../../src/index.js';
import { createZooKeeperBackend } from '../../src/backends/zookeeper/index.js';
import { ZkSession } from '../../src/backends/zookeeper/session.js';
import { encodeLockId, lockPaths } from '../../src/backends/zookeeper/layout.js';
import { startZooKeeper, type RunningZooKeeper } from '../../scripts/servers/zookeeper.js';
import { eventually, waitingOn } from '../helpers.js';

const T = { timeout: 120_000 };
const CHROOT = '/kinds';

let server: RunningZooKeeper;
let tree: ZkSession;
const lockers: Locker[] = [];

before(async () => {
  server = await startZooKeeper({ nodes: 1 });
  tree = await ZkSession.open({ connectString: server.connectString, sessionTimeoutMs: 10_000, connectTimeoutMs: 30_000 });
});

after(async () => {
  await Promise.allSettled(lockers.splice(0).map((l) => l.close()));
  tree.close();
  await server.stop();
});

const id = (label: string): string => `kinds/${label}/${randomBytes(5).toString('hex')}`;

function client(): Locker {
  const l = createLocker(createZooKeeperBackend(`zookeeper://${server.connectString}${CHROOT}?sessionTimeoutMs=6000`));
  lockers.push(l);
  return l;
}

/** Resolve `p`, remembering whether it has settled. */
function track<T>(p: Promise<T>): { readonly promise: Promise<T>; settled: () => boolean } {
  let done = false;
  const promise = p.finally(() => {
    done = true;
  });
  return { promise, settled: () => done };
}

/** Use `lockId` as a semaphore once, so that it has its gate. */
async function openGate(lockId: string): Promise<void> {
  await (await client().semaphore(lockId, { permits: 1 }).acquire()).release();
}

describe('zookeeper: the gate', () => {
  test('an id with slashes is one node under the chroot; a semaphore adds its gate and leases below it', T, async () => {
    const lockId = id('layout');
    const paths = lockPaths(CHROOT, lockId);
    assert.equal(paths.base, `${CHROOT}/${encodeLockId(lockId)}`);
    assert.doesNotMatch(paths.base.slice(CHROOT.length + 1), /\//);
    const m = await client().lock(lockId);
    assert.deepEqual(await tree.children(paths.gate), [], 'a mutex alone takes no gate');
    const queue = await tree.children(paths.base);
    assert.equal(queue.length, 1);
    assert.equal((await tree.get(`${paths.base}/${queue[0] ?? ''}`))?.stat.czxid, m.token, 'ungated: the token is the queue node czxid');
    await m.release();

    await openGate(lockId);
    const gated = await client().lock(lockId);
    const [queued] = (await tree.children(paths.base)).filter((n) => n.includes('-lock-'));
    const [gate] = await tree.children(paths.gate);
    assert.ok(queued && gate, 'a mutex now holds a queue node and a gate node');
    assert.equal(queued.slice(0, 40), gate.slice(0, 40), 'both carry the same protected uuid');
    assert.equal((await tree.get(`${paths.gate}/${gate}`))?.stat.czxid, gated.token, 'gated: the token is the gate node czxid');
    await gated.release();
    assert.deepEqual(await tree.children(paths.gate), []);
  });

  test('read and write holds exclude semaphore permits, both ways', T, async () => {
    const lockId = id('rw-sem');
    const rw = (): ReturnType<Locker['readWriteLock']> => client().readWriteLock(lockId);
    const sem = (): ReturnType<Locker['semaphore']> => client().semaphore(lockId, { permits: 3 });
    const r = await rw().read();
    assert.equal(await sem().tryAcquire(), null, 'a reader excludes permits');
    const r2 = await rw().tryRead();
    assert.ok(r2, 'readers still share');
    await Promise.all([r.release(), r2.release()]);
    const w = await rw().write();
    assert.equal(await sem().tryAcquire(), null, 'a writer excludes permits');
    await w.release();
    const p1 = await sem().acquire({ timeoutMs: 30_000 });
    const p2 = await sem().tryAcquire();
    assert.ok(p2, 'permits share among themselves');
    assert.equal(await rw().tryRead(), null, 'a permit excludes readers');
    assert.equal(await rw().tryWrite(), null, 'a permit excludes writers');
    await Promise.all([p1.release(), p2.release()]);
    const again = await rw().tryRead();
    assert.ok(again);
    await again.release();
  });

  test('a semaphore waits for holds queued before the gate existed, which never take it', T, async () => {
    const lockId = id('before-gate');
    const m0 = await client().lock(lockId);
    const m1Locker = client();
    const m1Queued = waitingOn(m1Locker, lockId);
    const m1 = track(m1Locker.lock(lockId, { timeoutMs: 60_000 }));
    await m1Queued;
    const sLocker = client();
    const sQueued = waitingOn(sLocker, lockId);
    const s = track(sLocker.semaphore(lockId, { permits: 5 }).acquire({ timeoutMs: 60_000 }));
    await sQueued;
    await m0.release();
    const m1Lock = await m1.promise;
    assert.equal(s.settled(), false, 'no permit while the mutex holds');
    assert.equal(await client().semaphore(lockId, { permits: 5 }).tryAcquire(), null);
    await m1Lock.release();
    const permit = await s.promise;
    assert.ok(permit.token > m1Lock.token && m1Lock.token > m0.token);
    await permit.release();
  });

  test(
    'tokens follow the grant order across kinds: a mutex queued before a permit, granted after it, gets the larger token',
    T,
    async () => {
      const lockId = id('tokens');
      await openGate(lockId);
      const m0 = await client().lock(lockId);
      const mLocker = client();
      const mQueued = waitingOn(mLocker, lockId);
      const m = track(mLocker.lock(lockId, { timeoutMs: 60_000 }));
      await mQueued;
      const sLocker = client();
      const sQueued = waitingOn(sLocker, lockId);
      const s = track(sLocker.semaphore(lockId, { permits: 2 }).acquire({ timeoutMs: 60_000 }));
      await sQueued;
      await m0.release();
      // The permit was at the gate before the mutex could queue there.
      const permit = await s.promise;
      assert.equal(m.settled(), false, 'the mutex waits for the permit');
      const state = await client().inspect(lockId);
      assert.deepEqual(
        state.holders.map((h) => [h.kind, h.token]),
        [['semaphore', permit.token]],
      );
      await permit.release();
      const mutex = await m.promise;
      assert.ok(permit.token > m0.token, `${permit.token} after ${m0.token}`);
      assert.ok(mutex.token > permit.token, `${mutex.token} after ${permit.token}`);
      const rLocker = client();
      const rQueued = waitingOn(rLocker, lockId);
      const reading = rLocker.readWriteLock(lockId).read({ timeoutMs: 60_000 });
      await rQueued;
      await mutex.release();
      const read = await reading;
      assert.ok(read.token > mutex.token);
      await read.release();
    },
  );

  test('an attempt whose caller gave up between stages creates no node after that', T, async () => {
    const lockId = id('late');
    const paths = lockPaths(CHROOT, lockId);
    await openGate(lockId);
    const c = client();
    await (await c.tryLock(id('warm')))?.release();
    const ctl = new AbortController();
    const created: string[] = [];
    const original = ZkSession.prototype.create;
    ZkSession.prototype.create = function (this: ZkSession, path: string, data: Buffer, mode: number) {
      created.push(path);
      // Give up right as the queue node goes out: the core answers at once, the attempt runs on.
      if (path.startsWith(`${paths.base}/`) && !path.startsWith(paths.gate)) ctl.abort(new Error('gave up'));
      return original.call(this, path, data, mode);
    };
    try {
      await assert.rejects(c.lock(lockId, { signal: ctl.signal }), /gave up/);
      await sleep(300);
    } finally {
      ZkSession.prototype.create = original;
    }
    assert.deepEqual(
      created.filter((p) => p.startsWith(paths.gate)),
      [],
      'no gate node was created after the caller gave up',
    );
    await eventually('the queue node is dropped', async () =>
      (await tree.children(paths.base)).every((n) => n === 'locks' || n === 'leases'),
    );
    const free = await client().tryLock(lockId);
    assert.ok(free);
    await free.release();
  });

  test('a wait abandoned at the gate or while draining leases leaves no node behind', T, async () => {
    const lockId = id('abandon');
    const paths = lockPaths(CHROOT, lockId);
    const permit = await client().semaphore(lockId, { permits: 1 }).acquire();
    const waits: Promise<unknown>[] = [];
    for (const kind of ['mutex', 'read', 'write', 'semaphore'] as const) {
      const c = client();
      const queued = waitingOn(c, lockId);
      const attempt: Promise<Lock> =
        kind === 'mutex'
          ? c.lock(lockId, { timeoutMs: 1_500 })
          : kind === 'semaphore'
            ? c.semaphore(lockId, { permits: 1 }).acquire({ timeoutMs: 1_500 })
            : c.readWriteLock(lockId)[kind]({ timeoutMs: 1_500 });
      waits.push(assert.rejects(attempt, LockTimeoutError));
      await queued;
    }
    await Promise.all(waits);
    await permit.release();
    await eventually('every node of the abandoned waits is gone', async () => {
      const [queue = [], gate = [], leases = []] = await Promise.all([paths.base, paths.gate, paths.leases].map((p) => tree.children(p)));
      return queue.every((n) => n === 'locks' || n === 'leases') && gate.length === 0 && leases.length === 0;
    });
    const free = await client().tryLock(lockId);
    assert.ok(free);
    await free.release();
  });
});

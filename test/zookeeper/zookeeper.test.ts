/**
 * ZooKeeper-specific behaviour against a real 3-node ensemble: server loss under a holder,
 * session expiry (Curator's KillSession technique), the herd-free queue with 1,000 waiters,
 * the Curator-compatible layout, czxid tokens, the watchdog's clock, and typed errors for an
 * unreachable ensemble. Cross-kind behaviour is in kinds.test.ts.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { performance } from 'node:perf_hooks';
import { BackendUnavailableError, LockLostError, createLocker, type Lock, type Locker } from '../../src/index.js';
import { ZooKeeperBackend, createZooKeeperBackend } from '../../src/backends/zookeeper/index.js';
import { ZkSession } from '../../src/backends/zookeeper/session.js';
import { eventually as eventuallyWithin, faultProxy, lossOf, type FaultProxy } from '../helpers.js';
import { startZooKeeper, type RunningZooKeeper } from '../../scripts/servers/zookeeper.js';

const T = { timeout: 180_000 };
const CHROOT = '/locksmith-tests';

let server: RunningZooKeeper;
const open: Locker[] = [];
const sessions: ZkSession[] = [];
const proxies: FaultProxy[] = [];

before(async () => {
  server = await startZooKeeper({ nodes: 3 });
});

after(async () => {
  await Promise.allSettled(open.splice(0).map((l) => l.close()));
  for (const s of sessions.splice(0)) s.close();
  await Promise.allSettled(proxies.splice(0).map((p) => p.close()));
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

/**
 * Curator's KillSession: attach to the session from another connection and close it there.
 * The client's own connection, dropped by the server when the session moved, may reconnect
 * and take the session back before the close arrives (the ensemble then refuses the close):
 * kill again until the client has seen its session end.
 */
async function expireSession(b: ZooKeeperBackend, connectString = server.connectString): Promise<void> {
  const s = b.session;
  assert.ok(s, 'the backend has a session');
  for (let attempt = 0; attempt < 5 && s.alive; attempt++) {
    const killer = await ZkSession.open({
      connectString,
      sessionTimeoutMs: s.sessionTimeoutMs,
      connectTimeoutMs: 30_000,
      resume: s.credentials,
    });
    killer.close();
    const until = performance.now() + 10_000;
    while (s.alive && performance.now() < until) await sleep(50);
  }
  assert.equal(s.alive, false, 'the session was expired');
}

/**
 * A client behind a proxy that is cut off cannot take its session back while a second
 * connection closes it (the race {@link expireSession} has to retry): the kill is certain,
 * and the client learns of it when the proxy heals and it reconnects.
 */
async function expireBehindProxy(b: ZooKeeperBackend, proxy: FaultProxy): Promise<void> {
  const s = b.session;
  assert.ok(s, 'the backend has a session');
  proxy.cut();
  for (let attempt = 0; attempt < 10; attempt++) {
    try {
      const killer = await ZkSession.open({
        connectString: server.connectString,
        sessionTimeoutMs: s.sessionTimeoutMs,
        connectTimeoutMs: 10_000,
        resume: s.credentials,
      });
      killer.close();
      await sleep(300);
    } catch {
      // Refused as expired: the close took.
      break;
    }
  }
  proxy.heal();
  const until = performance.now() + 30_000;
  while (s.alive && performance.now() < until) await sleep(50);
  assert.equal(s.alive, false, 'the session was expired');
}

/** A backend whose only way to the ensemble is a {@link FaultProxy} in front of its first server. */
async function backendBehindProxy(sessionTimeoutMs = 4_000): Promise<{ b: ZooKeeperBackend; proxy: FaultProxy }> {
  const node = server.nodes[0];
  assert.ok(node);
  const proxy = await faultProxy(node.port);
  proxies.push(proxy);
  return { b: backend(sessionTimeoutMs, `127.0.0.1:${proxy.port}`), proxy };
}

/** Poll `check` until true (generous bound: the machine may be loaded). */
const eventually = (what: string, check: () => Promise<boolean> | boolean, timeoutMs = 60_000): Promise<void> =>
  eventuallyWithin(what, check, timeoutMs, 50);

const aborted = lossOf;

test('killing each of the three servers in turn while a lock is held changes nothing for the holder', T, async () => {
  const lockId = id('kill-one');
  const holderLocker = client(backend(8_000), { ttlMs: 30_000 });
  const lock = await holderLocker.lock(lockId);
  const other = client();
  for (const node of server.nodes) {
    await node.kill();
    // While one server is down the quorum (2 of 3) still serves: the lock stays ours. (A
    // leader's death makes the ensemble unavailable for the election: then ask again.)
    await eventually(`another client's tryLock answers while ${node.name} is down`, async () => {
      try {
        assert.equal(await other.tryLock(lockId), null, `nobody else gets the lock while ${node.name} is down`);
        return true;
      } catch (err) {
        if (err instanceof BackendUnavailableError) return false;
        throw err;
      }
    });
    await eventually(`extend succeeds with ${node.name} down`, async () => {
      try {
        await lock.extend();
        return true;
      } catch (err) {
        if (err instanceof LockLostError) throw err;
        return false;
      }
    });
    assert.equal(lock.held, true);
    assert.equal(lock.signal.aborted, false);
    await node.restart();
    await eventually(`${node.name} serves again`, async () => (await server.mode(node)) !== undefined);
  }
  assert.equal(lock.signal.aborted, false);
  await lock.release();
  const next = await other.tryLock(lockId);
  assert.ok(next && next.token > lock.token);
  await next.release();
});

test("expiring the holder's session hands the lock to the next waiter and aborts the old holder's signal", T, async () => {
  const lockId = id('expire');
  const { b: holderBackend, proxy } = await backendBehindProxy();
  const holder = client(holderBackend, { ttlMs: 30_000 });
  const lock = await holder.lock(lockId);
  const waiter = client();
  const queued = new Promise<void>((resolve) => waiter.once('waiting', () => resolve()));
  const next = waiter.lock(lockId, { timeoutMs: 60_000 });
  await queued;

  await expireBehindProxy(holderBackend, proxy);

  const reason = await aborted(lock);
  assert.ok(reason instanceof LockLostError);
  assert.equal(reason.reason, 'session');
  const nextLock = await next;
  assert.ok(nextLock.token > lock.token);
  await assert.rejects(lock.extend(), LockLostError);
  // The old holder's release is harmless now and does not disturb the new holder.
  await lock.release().catch(() => undefined);
  assert.equal(nextLock.held, true);
  assert.equal(await client().tryLock(lockId), null);
  // The locker is still usable: it opens a new session.
  await nextLock.release();
  const again = await holder.lock(lockId, { timeoutMs: 60_000 });
  assert.ok(again.token > nextLock.token);
  await again.release();
  assert.ok(holderBackend.stats.sessions >= 2);
});

test('a session closed by the ensemble is reported as `session`, even when the node deletion is heard first', T, async () => {
  // The holder stays attached to one server while the session is closed through another:
  // that server deletes the holder's nodes, notifies its watches, and only then drops the
  // connection, so the client hears "node deleted" before it can learn the session ended.
  const [home, elsewhere] = server.nodes;
  assert.ok(home && elsewhere);
  for (let round = 0; round < 3; round++) {
    const lockId = id(`expire-reason-${round}`);
    const b = backend(8_000, `${home.host}:${home.port}`);
    const lock = await client(b, { ttlMs: 30_000 }).lock(lockId);
    await expireSession(b, `${elsewhere.host}:${elsewhere.port}`);
    const reason = await lossOf(lock);
    assert.ok(reason instanceof LockLostError);
    assert.equal(reason.reason, 'session', `round ${round}`);
  }
});

test('a waiter whose own session expires stops waiting with a typed error', T, async () => {
  const lockId = id('waiter-expire');
  const held = await client().lock(lockId);
  const { b: waiterBackend, proxy } = await backendBehindProxy();
  const waiter = client(waiterBackend);
  const queued = new Promise<void>((resolve) => waiter.once('waiting', () => resolve()));
  const pending = waiter.lock(lockId, { timeoutMs: 120_000 });
  await queued;
  await expireBehindProxy(waiterBackend, proxy);
  await assert.rejects(pending, BackendUnavailableError);
  // Its queue node went with the session: the next release reaches nobody stale.
  await held.release();
  const next = await client().tryLock(lockId, { waitMs: 30_000 });
  assert.ok(next);
  await next.release();
});

test('a holder that stops renewing loses the lock at its ttl even though its session lives', T, async () => {
  const lockId = id('ttl');
  const b = backend(4_000);
  const lock = await client(b, { autoExtend: false }).lock(lockId, { ttlMs: 1_500 });
  const reason = await aborted(lock);
  assert.ok(reason instanceof LockLostError);
  assert.equal(b.session?.alive, true, 'the session is still alive');
  const next = await client().lock(lockId, { timeoutMs: 60_000 });
  assert.ok(next.token > lock.token);
  await next.release();
});

for (const handedOff of [false, true]) {
  test(`is a loss with reason not-held (${handedOff ? 'a waiter the lock was handed to' : 'an uncontended holder'})`, T, async () => {
    const lockId = id(`deleted-${String(handedOff)}`);
    let lock;
    if (handedOff) {
      // The waiter read its node while it waited (the grant makes no read of its own).
      const first = await client().lock(lockId);
      const waiter = client(backend(), { ttlMs: 30_000 });
      const queued = new Promise<void>((resolve) => waiter.once('waiting', () => resolve()));
      const pending = waiter.lock(lockId, { timeoutMs: 60_000 });
      await queued;
      await first.release();
      lock = await pending;
    } else {
      lock = await client(backend(), { ttlMs: 30_000 }).lock(lockId);
    }
    const s = await raw();
    const children = await s.children(`${CHROOT}/${lockId}`);
    assert.equal(children.length, 1);
    await s.delete(`${CHROOT}/${lockId}/${children[0] ?? ''}`);
    const reason = await aborted(lock);
    assert.ok(reason instanceof LockLostError);
    assert.equal(reason.reason, 'not-held');
  });
}

test('1,000 waiters on one lock: each release wakes exactly one waiter', T, async () => {
  const lockId = id('herd');
  const WAITERS = 1_000;
  const HANDOFFS = 10;
  const owner = client();
  const first = await owner.lock(lockId);
  const backends = Array.from({ length: 4 }, () => backend(10_000));
  const lockers = backends.map((b) => client(b, { ttlMs: 30_000 }));
  const grants: Lock[] = [];
  const ctl = new AbortController();
  const waits = Array.from({ length: WAITERS }, (_, i) =>
    (lockers[i % lockers.length] as Locker).lock(lockId, { signal: ctl.signal, fair: true }).then(
      (l) => {
        grants.push(l);
      },
      () => undefined,
    ),
  );
  // However the test ends, no waiter is left running into the tests after it.
  const inspector = backend();
  try {
    await eventually('all waiters queued', async () => (await inspector.inspect(lockId)).waiters === WAITERS, 120_000);
    const notified = (): number => backends.reduce((n, b) => n + b.stats.waiterNotifications, 0);
    const before = notified();

    await first.release();
    for (let i = 1; i <= HANDOFFS; i++) {
      await eventually(`hand-off ${i}`, () => grants.length === i);
      const holder = grants[i - 1] as Lock;
      if (i < HANDOFFS) await holder.release();
    }
    const woken = notified() - before;
    // HANDOFFS - 1 releases by waiters plus the first release: one notification each.
    assert.equal(woken, HANDOFFS, `${woken} watch notifications for ${HANDOFFS} releases`);
  } finally {
    ctl.abort(new Error('done'));
    await Promise.all(waits);
    await grants[grants.length - 1]?.release();
    await inspector.close();
  }
});

test('a waiter whose last blocker is deleted holds without listing the queue again; one with more ahead lists', T, async () => {
  const lockId = id('handoff');
  const [a, b, c] = [client(), client(), client()];
  const inspector = backend();
  const listed: string[] = [];
  const original = ZkSession.prototype.listing;
  ZkSession.prototype.listing = function (this: ZkSession, path: string) {
    listed.push(path);
    return original.call(this, path);
  };
  try {
    const held = await a.lock(lockId);
    const bWaits = b.lock(lockId);
    await eventually('b queued', async () => (await inspector.inspect(lockId)).waiters === 1);
    const cWaits = c.lock(lockId);
    await eventually('c queued', async () => (await inspector.inspect(lockId)).waiters === 2);
    listed.length = 0;
    await held.release();
    const bHeld = await bWaits;
    // b listed [a, b, …] when it queued: a was its only blocker, and its deletion is enough.
    assert.deepEqual(listed, [], 'b held on the deletion alone');
    assert.ok(bHeld.token > held.token);
    await bHeld.release();
    const cHeld = await cWaits;
    // c listed [a, b, c]: b's deletion alone did not tell it whether a was still there.
    assert.equal(listed.length, 1, `c listed the queue once before holding (${listed.join(', ')})`);
    assert.ok(cHeld.token > bHeld.token);
    await cHeld.release();
  } finally {
    ZkSession.prototype.listing = original;
    await inspector.close();
  }
});

test('a waiter looks again when its session reconnects, not only when its watch fires', T, async () => {
  const lockId = id('reconnect');
  const node = server.nodes[0];
  assert.ok(node);
  const proxy = await faultProxy(node.port);
  const a = client();
  const b = client(createZooKeeperBackend(`zookeeper://127.0.0.1:${proxy.port}${CHROOT}?sessionTimeoutMs=8000`));
  const inspector = backend();
  const listed: string[] = [];
  const original = ZkSession.prototype.listing;
  try {
    const held = await a.lock(lockId);
    const bWaits = b.lock(lockId);
    await eventually('b queued', async () => (await inspector.inspect(lockId)).waiters === 1);
    ZkSession.prototype.listing = function (this: ZkSession, path: string) {
      listed.push(path);
      return original.call(this, path);
    };
    // Drops b's connection; its client reconnects through the proxy at once, same session.
    proxy.heal();
    await eventually('b listed the queue again after reconnecting', () => listed.length > 0, 10_000);
    ZkSession.prototype.listing = original;
    await held.release();
    const got = await bWaits;
    assert.ok(got.token > held.token);
    await got.release();
  } finally {
    ZkSession.prototype.listing = original;
    await inspector.close();
    await proxy.close();
  }
});

test('an unreachable ensemble is a BackendUnavailableError within the connect timeout', T, async () => {
  const b = createZooKeeperBackend('zookeeper://127.0.0.1:1,127.0.0.1:2?connectTimeoutMs=1000');
  const locker = client(b, { connectTimeoutMs: 1_000 });
  await assert.rejects(locker.lock(id('down'), { timeoutMs: 30_000 }), BackendUnavailableError);
});

test('a paused server under the holder: the session moves to another server and the lock is kept', T, async () => {
  const lockId = id('paused-one');
  const followers = [];
  for (const node of server.nodes) if ((await server.mode(node)) === 'follower') followers.push(node);
  assert.equal(followers.length, 2, 'an ensemble of three has two followers');
  const b = backend(6_000, followers.map((n) => `${n.host}:${n.port}`).join(','));
  const holder = client(b, { ttlMs: 30_000 });
  const lock = await holder.lock(lockId);
  const attached = followers.find((n) => n.port === b.session?.serverPort);
  assert.ok(attached, 'the holder is attached to one of the followers');
  const attachedBefore = b.session?.serverPort;
  attached.pause();
  try {
    // Two session timeouts: without moving, the session (and the lock) would be gone.
    await sleep(12_000);
    assert.equal(lock.signal.aborted, false, 'the holder never lost the lock');
    assert.equal(lock.held, true);
    assert.notEqual(b.session?.serverPort, attachedBefore, 'the session moved to the other follower');
    await lock.extend();
    assert.equal(await client().tryLock(lockId), null, 'nobody else got it');
  } finally {
    attached.resume();
  }
  await lock.release();
});

test("a release that fails while the holder's only server is paused still frees the lock once it answers", T, async () => {
  const lockId = id('guaranteed-delete');
  let follower;
  for (const node of server.nodes) if ((await server.mode(node)) === 'follower') follower = node;
  assert.ok(follower);
  // The holder can reach only this one server.
  const b = backend(8_000, `${follower.host}:${follower.port}`);
  const lock = await client(b, { ttlMs: 60_000 }).lock(lockId);
  assert.equal(b.session?.serverPort, follower.port, "the holder's session is on the server about to be paused");
  const other = client();
  // Returns once the server is stopped: a release sent sooner could still be answered.
  follower.pause();
  try {
    await assert.rejects(lock.release(), BackendUnavailableError);
  } finally {
    follower.resume();
  }
  // The holder's session lives on, so only its delete, applied late or retried in the
  // background, can free the lock: it must not stay stuck for the life of the process.
  const next = await other.lock(lockId, { timeoutMs: 60_000 });
  assert.ok(next.token > lock.token);
  assert.equal(b.session?.alive, true, 'the holder kept its session');
  await next.release();
});

test("with the whole ensemble paused, the holder's signal aborts before its session could expire", T, async () => {
  const lockId = id('paused-all');
  const b = backend(4_000);
  const lock = await client(b, { ttlMs: 30_000 }).lock(lockId);
  const sessionTimeout = b.session?.sessionTimeoutMs ?? Infinity;
  const pausedAt = performance.now();
  for (const node of server.nodes) node.pause();
  try {
    const reason = await aborted(lock);
    const at = performance.now();
    assert.ok(reason instanceof LockLostError);
    assert.ok(at <= lock.validUntil, `aborted at ${at.toFixed(0)}, validUntil ${lock.validUntil.toFixed(0)}`);
    // Every renewal was sent before the pause, and the ensemble cannot expire the session
    // earlier than a session timeout after hearing from us: validity ends before that.
    assert.ok(lock.validUntil <= pausedAt + sessionTimeout, `validUntil ${lock.validUntil.toFixed(0)}, paused at ${pausedAt.toFixed(0)}`);
  } finally {
    for (const node of server.nodes) node.resume();
  }
  for (const node of server.nodes) await eventually(`${node.name} serves`, async () => (await server.mode(node)) !== undefined);
});

test('the watchdog measures stalls on the monotonic clock: a wall-clock step does not drop a healthy connection', T, async () => {
  let follower;
  for (const node of server.nodes) if ((await server.mode(node)) === 'follower') follower = node;
  assert.ok(follower);
  // Stall limit: a third of 15 s. The request below waits 2.5 s: no stall, on a steady clock.
  const s = await ZkSession.open({
    connectString: `${follower.host}:${follower.port}`,
    sessionTimeoutMs: 15_000,
    connectTimeoutMs: 30_000,
  });
  sessions.push(s);
  const states: string[] = [];
  s.onState((state) => states.push(state));
  const realNow = Date.now;
  follower.pause();
  let pending: Promise<unknown> | undefined;
  try {
    // The wall clock steps back an hour as the request starts, then returns (NTP, a VM resume).
    Date.now = () => realNow() - 3_600_000;
    pending = s.exists('/');
    Date.now = realNow;
    await sleep(2_500);
  } finally {
    Date.now = realNow;
    follower.resume();
  }
  await pending;
  assert.deepEqual(states, [], 'the connection was never dropped');
  assert.equal(s.state, 'connected');
});

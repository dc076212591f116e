import assert from 'node:assert/strict';
import { test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { randomBytes } from 'node:crypto';
import {
  BackendUnavailableError,
  createLocker,
  InvalidArgumentError,
  isLocksmithError,
  LocksmithError,
  UnsupportedError,
} from '../../src/index.js';
import type { Backend } from '../../src/backend.js';
import { MemoryBackend, type MemoryTicket } from '../../src/backends/memory/backend.js';
import { FaultyBackend } from './faulty.js';

const table = (): string => `unit-${randomBytes(4).toString('hex')}`;

test('errors have a stable code, a name and a cause', async () => {
  const backend = new FaultyBackend(table());
  const cause = new Error('ECONNREFUSED');
  backend.acquireError = cause;
  const locker = createLocker(backend);
  const err = await locker.lock('x').catch((e: unknown) => e);
  assert.ok(err instanceof BackendUnavailableError);
  assert.equal(err.code, 'BACKEND_UNAVAILABLE');
  assert.equal(err.name, 'BackendUnavailableError');
  assert.equal(err.cause, cause);
  assert.ok(isLocksmithError(err, 'BACKEND_UNAVAILABLE'));
  await locker.close();
});

test('a grant that arrives after the caller aborted is handed back at once', async () => {
  const tbl = table();
  const backend = new FaultyBackend(tbl);
  backend.acquireDelayMs = 100;
  const locker = createLocker(backend);
  const ctl = new AbortController();
  const p = locker.lock('late', { signal: ctl.signal });
  await sleep(20);
  ctl.abort(new Error('gone'));
  await assert.rejects(p, /gone/);
  await sleep(150);
  const state = await new MemoryBackend(tbl).inspect('late');
  assert.equal(state.holders.length, 0, 'no orphaned hold');
  await locker.close();
});

test('a throwing event listener does not break locking', async () => {
  const locker = createLocker(`memory://${table()}`);
  const warnings: string[] = [];
  const onWarning = (w: Error): void => {
    warnings.push(w.message);
  };
  process.on('warning', onWarning);
  locker.on('acquired', () => {
    throw new Error('listener bug');
  });
  const lock = await locker.lock('l');
  await lock.release();
  await sleep(10);
  process.off('warning', onWarning);
  assert.ok(warnings.some((w) => w.includes('listener bug')));
  await locker.close();
});

test('options a backend cannot honour are refused with UnsupportedError', async () => {
  const inner = new MemoryBackend(table());
  const limited: Backend = Object.assign(Object.create(inner) as MemoryBackend, {
    capabilities: { fair: false, shared: false, permits: false, notify: true, lockDelay: false, reentrant: false },
  });
  const locker = createLocker(limited);
  await assert.rejects(locker.lock('u', { fair: true }), UnsupportedError);
  await assert.rejects(locker.readWriteLock('u').read(), UnsupportedError);
  await assert.rejects(locker.semaphore('u', { permits: 2 }).acquire(), UnsupportedError);
  await assert.rejects(locker.lock('u', { lockDelayMs: 100 }), (e) => e instanceof LocksmithError && e.code === 'UNSUPPORTED');
  await locker.close();
});

test('createLocker validates its options and its backend argument', () => {
  assert.throws(
    () => createLocker('memory://', { driftFactor: 0.9 }),
    (e) => e instanceof InvalidArgumentError && e.argument === 'driftFactor',
  );
  assert.throws(() => createLocker('memory://', { autoExtend: 'yes' as unknown as boolean }), InvalidArgumentError);
  assert.throws(() => createLocker(42 as unknown as string), InvalidArgumentError);
  assert.throws(() => createLocker('memory://', null as unknown as object), InvalidArgumentError);
});

test('LOCKSMITH_BACKEND is the default backend URL', async () => {
  const previous = process.env.LOCKSMITH_BACKEND;
  process.env.LOCKSMITH_BACKEND = 'memory://from-env';
  try {
    const locker = createLocker();
    const lock = await locker.lock('env');
    const state = await new MemoryBackend('from-env').inspect('env');
    assert.equal(state.holders[0]?.token, lock.token);
    await locker.close();
    process.env.LOCKSMITH_BACKEND = 'nonsense';
    assert.throws(() => createLocker(), InvalidArgumentError);
  } finally {
    if (previous === undefined) delete process.env.LOCKSMITH_BACKEND;
    else process.env.LOCKSMITH_BACKEND = previous;
  }
});

test('close() is idempotent and a closed locker refuses inspect()', async () => {
  const locker = createLocker(`memory://${table()}`);
  await Promise.all([locker.close(), locker.close()]);
  await assert.rejects(locker.inspect('x'), (e) => e instanceof LocksmithError && e.code === 'LOCKER_CLOSED');
});

test('close() and aborts during a slow backend connection end the waiting calls', async () => {
  let resolveBackend: (b: MemoryBackend) => void = () => undefined;
  const slow = new Promise<MemoryBackend>((r) => {
    resolveBackend = r;
  });
  const inner = new MemoryBackend(table());
  // A backend whose first operation waits for the "connection".
  const gated: Backend<MemoryTicket, undefined> = {
    name: 'gated',
    capabilities: inner.capabilities,
    tryAcquire: async (req) => (await slow).tryAcquire(req),
    waitForChange: (id, t, s) => inner.waitForChange(id, t, s),
    cancel: (r, t) => inner.cancel(r, t),
    extend: (g, t) => inner.extend(g, t),
    release: (g) => inner.release(g),
    inspect: (id) => inner.inspect(id),
    close: () => inner.close(),
  };
  const locker = createLocker(gated);
  const ctl = new AbortController();
  const reason = new Error('caller left');
  const aborted = locker.lock('g', { signal: ctl.signal });
  const closed = locker.lock('g2');
  ctl.abort(reason);
  const closing = locker.close();
  resolveBackend(inner);
  await assert.rejects(aborted, (e) => e === reason || (e instanceof LocksmithError && e.code === 'LOCKER_CLOSED'));
  await assert.rejects(closed, (e) => e instanceof LocksmithError && e.code === 'LOCKER_CLOSED');
  await closing;
  const state = await inner.inspect('g2');
  assert.equal(state.holders.length, 0, 'nothing acquired after close');
});

test('backend URLs with a host list and ports parse, and hostList() reads them back', async () => {
  const { parseBackendUrl } = await import('../../src/connect.js');
  const { hostList } = await import('../../src/backends/kit.js');
  const zk = parseBackendUrl('zookeeper://10.0.0.1:2181,10.0.0.2:2182,zk3/locks/app?sessionTimeoutMs=6000');
  assert.deepEqual(hostList(zk, 2181), [
    { host: '10.0.0.1', port: 2181 },
    { host: '10.0.0.2', port: 2182 },
    { host: 'zk3', port: 2181 },
  ]);
  assert.equal(zk.pathname, '/locks/app');
  assert.equal(zk.searchParams.get('sessionTimeoutMs'), '6000');
  const cass = parseBackendUrl('cassandra://c1,c2:9043/ks');
  // Each host keeps its own port; one without a port gets the default.
  assert.deepEqual(hostList(cass, 9042), [
    { host: 'c1', port: 9042 },
    { host: 'c2', port: 9043 },
  ]);
  const redis = parseBackendUrl('redis://user:pw@127.0.0.1:6380/2');
  assert.deepEqual(hostList(redis, 6379), [{ host: '127.0.0.1', port: 6380 }]);
  assert.throws(() => hostList(parseBackendUrl('zookeeper://a:1,:2/x'), 2181), InvalidArgumentError);
  assert.throws(() => hostList(parseBackendUrl('zookeeper://a:1,b:99999/x'), 2181), InvalidArgumentError);
});

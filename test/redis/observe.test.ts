/**
 * Seeing and breaking locks on a real Redis, through the seam: identities of holders and
 * waiters, paging by SCAN, odd ids, prefixes, bad cursors and forceRelease
 * (docs/backends/redis.md, "Listing").
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { randomBytes } from 'node:crypto';
import { fork } from 'node:child_process';
import { once } from 'node:events';
import { hostname } from 'node:os';
import { Redis } from 'ioredis';
import {
  createLocker,
  formatIdentity,
  InvalidArgumentError,
  LockLostError,
  type Lock,
  type Locker,
  type LockerOptions,
} from '../../src/index.js';
import { RedisBackend } from '../../src/backends/redis/index.js';
import type { Backend, LockState } from '../../src/backend.js';
import { decodeIdentity } from '../../src/observe/identity.js';
import { startRedis } from '../../scripts/servers/redis.js';
import type { RunningServer } from '../../scripts/servers/harness.js';
import { listSeam, waitingOn } from '../helpers.js';

const T = { timeout: 120_000 };

let server: RunningServer;
const lockers: Locker[] = [];

function locker(options?: Partial<LockerOptions>): Locker {
  const l = createLocker(server.url, { ttlMs: 30_000, ...options });
  lockers.push(l);
  return l;
}

/** A fresh prefix per test: the listing of one test never sees another's locks. */
const space = (label: string): string => `obs-${label}-${randomBytes(4).toString('hex')}/`;

/** Every page of `prefix` with `limit` (test/helpers.ts). */
const listAll = (backend: Backend, prefix: string, limit: number): Promise<{ locks: LockState[]; pages: number }> =>
  listSeam(backend, prefix, limit);

before(async () => {
  server = await startRedis();
});

after(async () => {
  await Promise.allSettled(lockers.splice(0).map((l) => l.close()));
  await server.stop();
});

test('redis: a holder and a fair waiter are listed with their identities, queue order and engine times', T, async () => {
  const p = space('who');
  const lockId = `${p}job`;
  const holder = locker({ name: 'holder-app' });
  const waiter = locker({ name: 'waiter-app' });
  const viewer = locker();
  const held = await holder.lock(lockId);
  const queued = waitingOn(waiter, lockId);
  const pending = waiter.lock(lockId, { fair: true, timeoutMs: 60_000 });
  await queued;
  const backend = await viewer.backend();
  const { locks } = await listAll(backend, p, 10);
  assert.equal(locks.length, 1);
  const [state] = locks;
  assert.ok(state);
  assert.equal(state.lockId, lockId);
  const [h] = state.holders;
  assert.ok(h);
  assert.deepEqual(decodeIdentity(h.identity), holder.identity);
  assert.equal(h.token, held.token);
  assert.ok(h.acquiredAt !== undefined && h.leaseEndsAt !== undefined && h.leaseEndsAt > h.acquiredAt);
  assert.ok(Math.abs(h.acquiredAt - Date.now()) < 60_000, 'acquiredAt is epoch ms');
  assert.equal(state.waiters, 1);
  const [w] = state.queue ?? [];
  assert.ok(w);
  assert.deepEqual(decodeIdentity(w.identity), waiter.identity);
  assert.equal(w.fair, true);
  assert.equal(w.kind, 'mutex');
  assert.ok(w.since !== undefined && w.since >= h.acquiredAt);
  // The waiter gets the lock by a hand-off: its hold keeps its identity.
  await held.release();
  const next = await pending;
  const after = await backend.inspect(lockId);
  assert.deepEqual(decodeIdentity(after.holders[0]?.identity), waiter.identity);
  await next.release();
  assert.equal((await listAll(backend, p, 10)).locks.length, 0, 'a released lock leaves the list');
});

test('redis: paging with limit 7 over 120 held locks sees each exactly once; prefixes filter', T, async () => {
  const p = space('paging');
  const l = locker();
  const ids = Array.from({ length: 120 }, (_, i) => `${p}${i % 2 === 0 ? 'even' : 'odd'}-${i}`);
  const held: Lock[] = await Promise.all(ids.map((id) => l.lock(id)));
  const backend = await l.backend();
  const { locks, pages } = await listAll(backend, p, 7);
  const seen = locks.map((s) => s.lockId).sort();
  assert.deepEqual(seen, [...ids].sort());
  assert.ok(pages >= 18, `${pages} pages`);
  const odd = await listAll(backend, `${p}odd`, 1000);
  assert.deepEqual(odd.locks.map((s) => s.lockId).sort(), ids.filter((id) => id.includes('odd-')).sort());
  await Promise.all(held.map((h) => h.release()));
  assert.equal((await listAll(backend, p, 1000)).locks.length, 0);
});

test('redis: odd ids (quotes, slashes, braces, unicode, 1 KB) list as themselves, prefixes included', T, async () => {
  const p = space('odd');
  const odd = [`${p}"quoted' id"`, `${p}a/b\\c`, `${p}{braced}`, `${p}x}{y`, `${p}ünï/字/🔒`, `${p}${'k'.repeat(1000)}`];
  const l = locker();
  const held = await Promise.all(odd.map((id) => l.lock(id)));
  const backend = await l.backend();
  const { locks } = await listAll(backend, p, 4);
  assert.deepEqual(locks.map((s) => s.lockId).sort(), [...odd].sort());
  const braced = await listAll(backend, `${p}{`, 10);
  assert.deepEqual(
    braced.locks.map((s) => s.lockId),
    [`${p}{braced}`],
  );
  await Promise.all(held.map((h) => h.release()));
});

test('redis: a cursor this backend did not write is an InvalidArgumentError', T, async () => {
  const backend = await locker().backend();
  assert.ok(backend.list);
  for (const cursor of ['', 'abc', '0.0', '9.0.30.0', '0.x.30.0', '0.0.0.0']) {
    await assert.rejects(
      backend.list({ prefix: '', limit: 5, cursor, signal: new AbortController().signal }),
      (err: unknown) => err instanceof InvalidArgumentError && err.argument === 'cursor',
      `cursor ${JSON.stringify(cursor)}`,
    );
  }
});

test('redis: forceRelease: the holder’s extend rejects LockLostError, the waiter takes over with a token ≥ broken + 2', T, async () => {
  const lockId = `${space('force')}x`;
  const holder = locker();
  const waiter = locker();
  const held = await holder.lock(lockId);
  const queued = waitingOn(waiter, lockId);
  const pending = waiter.lock(lockId, { timeoutMs: 60_000 });
  await queued;
  const backend = await locker().backend();
  assert.ok(backend.forceRelease);
  assert.equal(await backend.forceRelease(lockId), 1);
  await assert.rejects(held.extend(), (err: unknown) => err instanceof LockLostError);
  const next = await pending;
  assert.ok(next.token >= held.token + 2n, `next ${next.token}, broken ${held.token}`);
  const state = await backend.inspect(lockId);
  assert.ok(state.lastToken !== undefined && state.lastToken > held.token);
  await next.release();
  assert.equal(await backend.forceRelease(lockId), 0, 'nothing held: nothing ended');
});

test('redis: a holder in another process is listed with that process’s host, pid and name', T, async () => {
  const lockId = `${space('child')}held`;
  const child = fork(new URL('./observe-child.ts', import.meta.url), [server.url, lockId, 'child-app'], {
    execArgv: ['--import', 'tsx'],
    stdio: 'inherit',
  });
  try {
    const [msg] = (await once(child, 'message')) as [{ pid: number; token: string }];
    const backend = await locker().backend();
    const { locks } = await listAll(backend, lockId, 10);
    const h = locks[0]?.holders[0];
    assert.ok(h);
    assert.deepEqual(decodeIdentity(h.identity), { host: hostname(), pid: msg.pid, name: 'child-app' });
    assert.equal(h.token.toString(), msg.token);
  } finally {
    child.kill('SIGKILL');
  }
});

/** `name pid@host` of the holder of `hold`'s lock with `hold`'s token, as `viewer.inspect()` shows it. */
async function holderOf(viewer: Locker, hold: Lock): Promise<string> {
  const { holders } = await viewer.inspect(hold.lockId);
  return formatIdentity(holders.find((h) => h.token === hold.token)?.identity);
}

/**
 * `x` and `y` take locks by turns: mutexes (ACQUIRE_SOLO) and permits of one semaphore (the
 * full ACQUIRE), at plain and braced ids (a braced id's record also carries the id).
 */
async function alternate(x: Locker, y: Locker, p: string): Promise<void> {
  const holds: [Locker, Lock][] = [];
  for (const id of [`${p}plain`, `${p}{braced}`]) {
    for (const [i, l] of [x, y, x, y].entries()) holds.push([l, await l.lock(`${id}-${i}`)]);
    for (const l of [x, y, y, x]) holds.push([l, await l.semaphore(`${id}-sem`, { permits: 4 }).acquire()]);
  }
  for (const [l, hold] of holds) assert.equal(await holderOf(x, hold), formatIdentity(l.identity), `${hold.lockId} ${hold.token}`);
  await Promise.all(holds.map(([, hold]) => hold.release()));
}

test('redis: lockers of different identities taking locks by turns each write their own holder record', T, async () => {
  // Two lockers over one backend instance: the records the backend keeps built are per identity.
  const shared = new RedisBackend(new Redis(server.url), { ownsClient: true });
  const [a, b] = [createLocker(shared, { name: 'turn-a' }), createLocker(shared, { name: 'turn-b' })];
  lockers.push(a, b);
  await alternate(a, b, space('shared'));
  // Two lockers, each over its own backend: nothing kept by one is seen by the other.
  await alternate(locker({ name: 'turn-c' }), locker({ name: 'turn-d' }), space('own'));
});

/**
 * Seeing and breaking locks on etcd through the seam (docs/backends/etcd.md, "Listing" and
 * "Breaking a lock"): identities of holders and waiters, paging by cursor at lock
 * boundaries, odd ids, prefix filtering, bad cursors, and a forced release.
 */
import assert from 'node:assert/strict';
import { fork, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { dirname, join } from 'node:path';
import { after, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { Etcd3 } from 'etcd3';
import { createLocker, InvalidArgumentError, LockLostError, type LockState } from '../../src/index.js';
import { createEtcdBackend, type EtcdBackend } from '../../src/backends/etcd/index.js';
import { decodeIdentity } from '../../src/observe/identity.js';
import { startEtcd } from '../../scripts/servers/etcd.js';
import { eventually, listSeam, seamRequest, useServer, waitingOn } from '../helpers.js';

const T = { timeout: 90_000 };
const server = await useServer(() => startEtcd());
const here = dirname(fileURLToPath(import.meta.url));
const children = new Set<ChildProcess>();
after(() => {
  for (const c of children) c.kill('SIGKILL');
});

/** A URL whose keys live under a prefix of their own, so each test lists only its locks. */
const isolated = (): string => `${server.url}?prefix=obs-${randomBytes(4).toString('hex')}/`;
const signal = new AbortController().signal;

/** Every page of `prefix` with `limit` (test/helpers.ts). */
const listAll = (backend: EtcdBackend, prefix: string, limit: number): Promise<{ locks: LockState[]; pages: number }> =>
  listSeam(backend, prefix, limit);

/** Fork a process that holds `lockId` as application `name`; resolves once it holds. */
async function holderProcess(url: string, lockId: string, name: string): Promise<{ child: ChildProcess; identity: unknown }> {
  const child = fork(join(here, 'observe-child.ts'), [url, lockId, name], { execArgv: ['--import', 'tsx'], stdio: 'inherit' });
  children.add(child);
  child.on('exit', () => children.delete(child));
  const msg = await new Promise<{ identity: unknown }>((resolve, reject) => {
    child.once('message', (m) => resolve(m as { identity: unknown }));
    child.once('exit', (code) => reject(new Error(`the holder process exited (${code}) before holding`)));
  });
  return { child, identity: msg.identity };
}

test('a holder in another process and a waiter are listed with their identities, in queue order', T, async () => {
  const url = isolated();
  const backend = createEtcdBackend(url);
  const waiter = createLocker(url, { name: 'observe-waiter' });
  try {
    const holder = await holderProcess(url, 'orders', 'observe-holder');
    const queued = waitingOn(waiter, 'orders');
    const next = waiter.lock('orders', { timeoutMs: 60_000 });
    await queued;
    const { locks } = await listAll(backend, '', 10);
    assert.equal(locks.length, 1);
    const state = locks[0];
    assert.ok(state);
    assert.equal(state.lockId, 'orders');
    assert.equal(state.holders.length, 1);
    assert.deepEqual(decodeIdentity(state.holders[0]?.identity), holder.identity);
    assert.equal(state.waiters, 1);
    const w = state.queue?.[0];
    assert.deepEqual(decodeIdentity(w?.identity), waiter.identity);
    assert.equal(w?.fair, true);
    assert.equal(typeof w?.since, 'number');
    assert.ok((state.lastToken ?? 0n) > (state.holders[0]?.token ?? 0n), 'the waiter key is the newest');
    // The lease's remaining ttl may tick down between the two reads.
    const bare = (s: LockState): LockState => ({ ...s, holders: s.holders.map(({ expiresInMs: _, ...h }) => h) });
    assert.deepEqual(bare(await backend.inspect('orders')), bare(state), 'list shows each lock as inspect does');
    assert.ok((state.holders[0]?.expiresInMs ?? 0) > 0, 'the lease ttl the server reports');
    holder.child.disconnect();
    const got = await next;
    await got.release();
  } finally {
    await Promise.allSettled([backend.close(), waiter.close()]);
  }
});

test('paging with limit 7 over 125 held locks sees each exactly once; a released lock leaves the list', T, async () => {
  const url = isolated();
  const backend = createEtcdBackend(url);
  const locker = createLocker(url, { name: 'observe-pages' });
  try {
    const ids = Array.from({ length: 125 }, (_, i) => `job-${String(i).padStart(3, '0')}`);
    const held = await Promise.all(ids.map((id) => locker.lock(id)));
    // One lock with more keys than a page's range reads: its holder and 9 queued waiters.
    const crowded = ids[60] ?? '';
    for (let i = 0; i < 9; i++) {
      const r = await backend.tryAcquire(seamRequest(crowded, `w${i}`));
      assert.equal(r.granted, false);
    }
    const { locks, pages } = await listAll(backend, '', 7);
    assert.deepEqual(
      locks.map((l) => l.lockId),
      ids,
      'every lock once, in key order',
    );
    assert.ok(pages >= 125 / 7, `${pages} pages`);
    assert.equal(locks.find((l) => l.lockId === crowded)?.waiters, 9, 'the crowded lock with all its keys');
    await held[3]?.release();
    const again = await listAll(backend, '', 7);
    assert.equal(again.locks.length, 124);
    assert.ok(!again.locks.some((l) => l.lockId === ids[3]), 'the released lock left the list');
    await Promise.all(held.map((h) => h.release()));
  } finally {
    await Promise.allSettled([backend.close(), locker.close()]);
  }
});

test('odd ids list as themselves, and a prefix selects only its locks', T, async () => {
  const url = isolated();
  const backend = createEtcdBackend(url);
  const locker = createLocker(url, { name: 'observe-odd' });
  try {
    const odd = ['say "hi"', 'a/b/c', 'a', 'a%2Fb', '100%', 'ключ-🔒', 'x'.repeat(1024), "it's"];
    const held = await Promise.all(odd.map((id) => locker.lock(id)));
    const { locks } = await listAll(backend, '', 3);
    assert.deepEqual(locks.map((l) => l.lockId).sort(), [...odd].sort());
    const underA = await listAll(backend, 'a', 2);
    assert.deepEqual(underA.locks.map((l) => l.lockId).sort(), ['a', 'a%2Fb', 'a/b/c']);
    const underSlash = await listAll(backend, 'a/', 2);
    assert.deepEqual(
      underSlash.locks.map((l) => l.lockId),
      ['a/b/c'],
    );
    assert.deepEqual((await backend.list({ prefix: 'zzz', limit: 5, cursor: undefined, signal })).locks, []);
    await Promise.all(held.map((h) => h.release()));
  } finally {
    await Promise.allSettled([backend.close(), locker.close()]);
  }
});

test('a cursor this listing did not write is an InvalidArgumentError', T, async () => {
  const backend = createEtcdBackend(isolated());
  const other = createEtcdBackend(isolated());
  const locker = createLocker(other.prefix ? `${server.url}?prefix=${other.prefix}` : server.url);
  try {
    await Promise.all(['p1', 'p2', 'p3'].map((id) => locker.lock(id)));
    const foreign = (await other.list({ prefix: '', limit: 1, cursor: undefined, signal })).cursor;
    assert.ok(foreign, 'the other listing has a next page');
    for (const cursor of ['garbage', 'e1.', 'e1.***', foreign]) {
      await assert.rejects(backend.list({ prefix: '', limit: 5, cursor, signal }), (err: unknown) => {
        assert.ok(err instanceof InvalidArgumentError, String(err));
        assert.equal(err.argument, 'cursor');
        return true;
      });
    }
    const own = (await other.list({ prefix: '', limit: 1, cursor: undefined, signal })).cursor;
    await assert.rejects(other.list({ prefix: 'q', limit: 5, cursor: own, signal }), InvalidArgumentError, 'a cursor of another prefix');
  } finally {
    await Promise.allSettled([backend.close(), other.close(), locker.close()]);
  }
});
test('ends the hold, leaves the waiter queued, and the next grants are above the broken token', T, async () => {
  const url = isolated();
  const backend = createEtcdBackend(url);
  const a = createLocker(url, { autoExtend: false, ttlMs: 60_000 });
  const b = createLocker(url);
  try {
    const held = await a.lock('broken');
    const queued = waitingOn(b, 'broken');
    const next = b.lock('broken', { timeoutMs: 60_000 });
    await queued;
    assert.equal(await backend.forceRelease('broken'), 1);
    await assert.rejects(held.extend(), LockLostError);
    const got = await next;
    assert.ok(got.token > held.token, 'the waiter kept its place and holds now');
    await got.release();
    const state = await backend.inspect('broken');
    assert.ok((state.lastToken ?? 0n) > held.token, 'the fence keeps the bumped counter as lastToken');
    const fresh = await b.lock('broken');
    assert.ok(fresh.token >= held.token + 2n, `${fresh.token} ≥ ${held.token} + 2`);
    await fresh.release();
    assert.equal(await backend.forceRelease('broken'), 0, 'nothing held: nothing ended');
  } finally {
    await Promise.allSettled([backend.close(), a.close(), b.close()]);
  }
});

test('ends every shared hold, and the next grant token is at least the broken token + 2', T, async () => {
  const url = isolated();
  const backend = createEtcdBackend(url);
  const a = createLocker(url);
  try {
    const r1 = await a.readWriteLock('shared').read();
    const r2 = await a.readWriteLock('shared').read();
    assert.equal(await backend.forceRelease('shared'), 2);
    await eventually('both readers lost', () => !r1.held && !r2.held);
    const top = r1.token > r2.token ? r1.token : r2.token;
    const w = await a.readWriteLock('shared').write();
    assert.ok(w.token >= top + 2n, `${w.token} ≥ ${top} + 2`);
    assert.equal((await backend.list({ prefix: '', limit: 5, cursor: undefined, signal })).locks.length, 1);
    await w.release();
    assert.equal((await backend.list({ prefix: '', limit: 5, cursor: undefined, signal })).locks.length, 0, 'released: not listed');
  } finally {
    await Promise.allSettled([backend.close(), a.close()]);
  }
});

test('a forced release racing with readers that keep arriving leaves no hold older than its fence', T, async () => {
  const url = isolated();
  const breaker = createEtcdBackend(url);
  const readers = createEtcdBackend(url);
  const raw = new Etcd3({ hosts: server.endpoints.split(',') });
  let running = true;
  let granted = 0;
  const loop = async (n: number): Promise<void> => {
    for (let i = 0; running; i++) {
      const r = await readers.tryAcquire(seamRequest('race', `r${n}-${i}`, { kind: 'read', wait: false }));
      if (r.granted) granted += 1;
    }
  };
  const loops = Array.from({ length: 8 }, (_, n) => loop(n));
  try {
    await eventually('readers hold', () => granted > 8);
    for (let round = 0; round < 10; round++) {
      await breaker.forceRelease('race');
      const fence = await raw.get(`${breaker.prefix}%fence/race`).exec();
      const at = BigInt(fence.kvs[0]?.mod_revision ?? '0');
      const older = await raw
        .getAll()
        .prefix(`${breaker.prefix}race/`)
        .maxCreateRevision((at - 1n).toString())
        .keys();
      assert.deepEqual(older, [], `no key created before the fence (${at}) survives it`);
    }
  } finally {
    running = false;
    await Promise.allSettled(loops);
    await Promise.allSettled([breaker.close(), readers.close()]);
    raw.close();
  }
});

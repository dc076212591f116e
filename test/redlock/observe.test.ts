/**
 * Seeing and breaking Redlock locks on three real masters, through the seam: a holder counts
 * when a majority holds it, paging by SCAN over the masters in turn sees each lock once,
 * odd ids, prefixes, bad cursors and forceRelease (docs/backends/redlock.md, "Listing").
 */
import assert from 'node:assert/strict';
import { afterEach, test } from 'node:test';
import { randomBytes } from 'node:crypto';
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
import type { Backend, LockState } from '../../src/backend.js';
import { keyBase } from '../../src/backends/redis-wire/keys.js';
import { decodeIdentity } from '../../src/observe/identity.js';
import { startRedlock } from '../../scripts/servers/redlock.js';
import { listSeam, useServer, waitingOn } from '../helpers.js';

const server = await useServer(() => startRedlock({ count: 3 }));
const T = { timeout: 120_000 };
const open: Locker[] = [];

function locker(options?: Partial<LockerOptions>): Locker {
  const l = createLocker(server.url, { ttlMs: 30_000, ...options });
  open.push(l);
  return l;
}

const space = (label: string): string => `rlobs-${label}-${randomBytes(4).toString('hex')}/`;

/** Every page of `prefix` with `limit` (test/helpers.ts). */
const listAll = async (backend: Backend, prefix: string, limit: number): Promise<LockState[]> =>
  (await listSeam(backend, prefix, limit)).locks;

/** Write a lease value straight onto some masters (a partial or foreign hold). */
async function plant(nodes: readonly number[], lockId: string, value: string): Promise<void> {
  for (const i of nodes) {
    const n = server.nodes[i];
    assert.ok(n);
    const raw = new Redis({ host: n.host, port: n.port });
    await raw.set(`${keyBase('locksmith:', lockId)}:rl`, value, 'PX', 30_000);
    raw.disconnect();
  }
}

afterEach(async () => {
  await Promise.allSettled(open.splice(0).map((l) => l.close()));
});

test(
  'redlock: lockers of different identities over one backend, taking one lock by turns, each write their own holder record',
  T,
  async () => {
    const p = space('turns');
    const shared = await locker().backend();
    const [a, b] = [createLocker(shared, { name: 'turn-a' }), createLocker(shared, { name: 'turn-b' })];
    open.push(a, b);
    for (const id of [`${p}plain`, `${p}{braced}`]) {
      for (const l of [a, b, a, b, b, a]) {
        const hold = await l.lock(id);
        const { holders } = await a.inspect(id);
        assert.equal(
          formatIdentity(holders.find((h) => h.token === hold.token)?.identity),
          formatIdentity(l.identity),
          `${id} ${hold.token}`,
        );
        await hold.release();
      }
    }
  },
);

test('redlock: a holder is listed once with its identity; a minority hold is not; a release leaves the list', T, async () => {
  const p = space('who');
  const holder = locker({ name: 'rl-holder' });
  const held = await holder.lock(`${p}job`);
  await plant([2], `${p}minority`, 'someone');
  await plant([1, 2], `${p}not-on-first`, 'other');
  const backend = await locker().backend();
  const locks = await listAll(backend, p, 10);
  assert.deepEqual(locks.map((s) => s.lockId).sort(), [`${p}job`, `${p}not-on-first`]);
  const job = locks.find((s) => s.lockId === `${p}job`);
  const [h] = job?.holders ?? [];
  assert.ok(h);
  assert.deepEqual(decodeIdentity(h.identity), holder.identity);
  assert.equal(h.token, held.token);
  assert.ok(h.acquiredAt !== undefined && h.leaseEndsAt !== undefined && h.leaseEndsAt > h.acquiredAt);
  assert.ok(Math.abs(h.acquiredAt - Date.now()) < 60_000, 'acquiredAt is epoch ms');
  await held.release();
  assert.deepEqual(
    (await listAll(backend, p, 10)).map((s) => s.lockId),
    [`${p}not-on-first`],
  );
});

test(
  'redlock: paging with limit 7 over 120 held locks sees each exactly once; prefixes filter; odd ids list as themselves',
  T,
  async () => {
    const p = space('paging');
    const l = locker();
    const odd = [`${p}"q' id"`, `${p}a/b\\c`, `${p}{braced}`, `${p}x}{y`, `${p}ünï/🔒`, `${p}${'k'.repeat(1000)}`];
    const ids = [...Array.from({ length: 120 }, (_, i) => `${p}${i % 2 === 0 ? 'even' : 'odd'}-${i}`), ...odd];
    const held: Lock[] = await Promise.all(ids.map((id) => l.lock(id)));
    const backend = await l.backend();
    assert.deepEqual((await listAll(backend, p, 7)).map((s) => s.lockId).sort(), [...ids].sort());
    const evens = await listAll(backend, `${p}even`, 1000);
    assert.deepEqual(evens.map((s) => s.lockId).sort(), ids.filter((id) => id.includes('even-')).sort());
    assert.deepEqual(
      (await listAll(backend, `${p}{`, 10)).map((s) => s.lockId),
      [`${p}{braced}`],
    );
    await Promise.all(held.map((h) => h.release()));
    assert.equal((await listAll(backend, p, 1000)).length, 0);
  },
);

test('redlock: a cursor this backend did not write is an InvalidArgumentError', T, async () => {
  const backend = await locker().backend();
  assert.ok(backend.list);
  for (const cursor of ['', 'x', '3.0.30.0', '0.0.0.0', '0.0.30']) {
    await assert.rejects(
      backend.list({ prefix: '', limit: 5, cursor, signal: new AbortController().signal }),
      (err: unknown) => err instanceof InvalidArgumentError && err.argument === 'cursor',
      `cursor ${JSON.stringify(cursor)}`,
    );
  }
});

test(
  'redlock: forceRelease ends the hold on every master; extend rejects LockLostError; the waiter’s token is ≥ broken + 2',
  T,
  async () => {
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
    assert.ok(state.lastToken !== undefined && state.lastToken >= next.token);
    await next.release();
    assert.equal(await backend.forceRelease(lockId), 0, 'nothing held: nothing ended');
  },
);

/**
 * Lock-delay on Cassandra (docs/backends/cassandra.md, "Lock-delay"): a holder's main cell
 * lives `lockDelayMs` past its lease, so a holder that stops renewing keeps the lock blocked
 * that much longer after its lease (and after a cell without the delay would have expired);
 * a clean release deletes the cell and imposes nothing.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { createLocker, type Locker } from '../../src/index.js';
import { startCassandra } from '../../scripts/servers/cassandra.js';
import { useServer } from '../helpers.js';

const server = await useServer(() => startCassandra({ nodes: 1 }));
const T = { timeout: 120_000 };
/** A lease of 1 s is written as a 2 s cell (tables.ts, `cellTtlSeconds`): gone 2 s after its last write. */
const TTL_MS = 1_000;
const PLAIN_CELL_MS = 2_000;

const locker = (): Locker => createLocker(`${server.url}?create=true`);
const lockId = (name: string): string => `${name}-${randomBytes(4).toString('hex')}`;

test('a holder that stops renewing blocks the lock for the delay past its lease, then frees', T, async () => {
  const [doomed, other] = [locker(), locker()];
  const id = lockId('stops');
  try {
    const lock = await doomed.lock(id, { ttlMs: TTL_MS, autoExtend: false, lockDelayMs: 8_000 });
    const wroteBy = performance.now();
    if (!lock.signal.aborted) await once(lock.signal, 'abort');
    // Past the lease and past the life of a cell without the delay: only the delay can block now.
    await sleep(Math.max(0, wroteBy + PLAIN_CELL_MS + 500 - performance.now()));
    assert.equal(await other.tryLock(id), null, 'still blocked by the lock-delay');
    const next = await other.lock(id, { timeoutMs: 60_000 });
    assert.equal(next.held, true);
    assert.ok(next.token > lock.token);
    await next.release();
  } finally {
    await Promise.allSettled([doomed.close(), other.close()]);
  }
});

test('a clean release imposes no lock-delay, and a waiter gets the lock at once', T, async () => {
  const [a, b] = [locker(), locker()];
  const id = lockId('release');
  try {
    const held = await a.lock(id, { ttlMs: TTL_MS, lockDelayMs: 60_000 });
    const waiter = b.lock(id, { timeoutMs: 30_000 });
    await sleep(200);
    await held.release();
    const next = await waiter;
    assert.equal(next.held, true);
    await next.release();
    const again = await a.tryLock(id, { lockDelayMs: 60_000 });
    assert.ok(again, 'free right after a release');
    await again.release();
    assert.ok(await b.tryLock(id), 'and after that one too');
  } finally {
    await Promise.allSettled([a.close(), b.close()]);
  }
});

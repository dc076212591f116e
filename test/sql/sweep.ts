/**
 * The sweep of expired rows of ids nobody uses again (docs/backends/postgres.md,
 * "Clean-up"), for both SQL engines.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, describe, test } from 'node:test';
import { createLocker, InvalidArgumentError, type Locker } from '../../src/index.js';
import { abandon } from '../../src/testing.js';
import { eventually } from '../helpers.js';
import type { SqlTarget } from './cases.js';

const T = { timeout: 120_000 };

/** Register the sweep cases. */
export function sqlSweepCases(t: SqlTarget): void {
  const open: Locker[] = [];
  const client = (url = t.url): Locker => {
    const l = createLocker(url);
    open.push(l);
    return l;
  };
  after(async () => {
    await Promise.allSettled(open.map((l) => l.close()));
  });

  describe(`${t.name}: expired rows of ids nobody uses again`, () => {
    test('a crashed holder and a crashed waiter leave no rows behind once swept; the lock row and its token stay', T, async () => {
      const lockId = `sql:swept:${randomBytes(5).toString('hex')}`;
      const holder = client();
      const lock = await holder.lock(lockId, { ttlMs: 1_000 });
      await abandon(holder);
      // A waiter whose process stopped before its cancel ran: its queue row, long expired.
      await t.exec(
        `INSERT INTO locksmith_queue (lock_id, seq, owner_id, kind, permits, expires_us) VALUES ('${lockId}', 1, 'gone', 'mutex', 1, 0)`,
      );
      assert.deepEqual(await t.rowsOf(lockId), { locks: 1, holders: 1, queue: 1 });
      // Nobody touches lockId again: only another client's sweep can purge it.
      await client(`${t.url}&sweepMs=100`).backend();
      await eventually('the expired rows are swept', async () => {
        const rows = await t.rowsOf(lockId);
        return rows.holders === 0 && rows.queue === 0;
      });
      assert.equal((await t.rowsOf(lockId)).locks, 1, 'the lock row carries the fencing counter');
      const next = await client().lock(lockId);
      assert.ok(next.token > lock.token, `token ${next.token} > ${lock.token}`);
      await next.release();
    });

    test('a live hold is never swept', T, async () => {
      const lockId = `sql:live:${randomBytes(5).toString('hex')}`;
      const lock = await client().lock(lockId, { ttlMs: 30_000 });
      const sweeper = await client(`${t.url}&sweepMs=0`).backend();
      assert.equal(typeof (sweeper as { sweep?: unknown }).sweep, 'function');
      await (sweeper as unknown as { sweep(): Promise<number> }).sweep();
      assert.equal((await t.rowsOf(lockId)).holders, 1);
      assert.equal(await client().tryLock(lockId), null);
      await lock.release();
    });

    test('sweepMs out of range is refused', T, async () => {
      for (const bad of ['sweepMs=-1', 'sweepMs=x']) {
        await assert.rejects(client(`${t.url}&${bad}`).lock('sql:sweep-bad'), InvalidArgumentError, bad);
      }
    });
  });
}

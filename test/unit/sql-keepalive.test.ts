/**
 * The SQL backends' queue keepalive (src/backends/sql/keepalive.ts) apart from a database:
 * which statements a tick sends, that it never overlaps itself, and that it stops when there
 * is nothing left to keep alive. The database side is tested in test/sql/cases.ts.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { QueueKeepalive } from '../../src/backends/sql/keepalive.js';
import type { Stmt } from '../../src/backends/sql/types.js';

/** Wait for `ok` (a loaded machine may delay the timers; the checks are about order, not time). */
async function until(ok: () => boolean): Promise<void> {
  for (let i = 0; i < 400 && !ok(); i++) await sleep(5);
}

const refresh = (lockId: string, seqs: readonly bigint[]): Stmt => ({ sql: `refresh ${lockId}`, params: seqs.map(String) });

test('one statement per lock id and 500 rows; ticks stop when the last row is deleted', async () => {
  const sent: Stmt[][] = [];
  const k = new QueueKeepalive(
    async (stmts) => {
      sent.push(stmts);
    },
    refresh,
    10,
  );
  for (let i = 0; i < 1_200; i++) k.add('a', BigInt(i));
  k.add('b', 7n);
  assert.equal(k.size, 1_201);
  await until(() => sent.length > 0);
  const first = sent[0];
  assert.ok(first, 'a tick ran');
  assert.deepEqual(
    first.map((s) => [s.sql, s.params.length]),
    [
      ['refresh a', 500],
      ['refresh a', 500],
      ['refresh a', 200],
      ['refresh b', 1],
    ],
  );
  for (let i = 0; i < 1_200; i++) k.delete('a', BigInt(i));
  k.delete('b', 7n);
  assert.equal(k.size, 0);
  const ticks = sent.length;
  await sleep(35);
  assert.equal(sent.length, ticks, 'no tick after the last row went');
  k.close();
});

test('a slow tick is not overlapped, a failing one is not fatal, and close() stops the timer', async () => {
  let running = 0;
  let most = 0;
  let calls = 0;
  const k = new QueueKeepalive(
    async () => {
      calls += 1;
      running += 1;
      most = Math.max(most, running);
      await sleep(40);
      running -= 1;
      if (calls === 1) throw new Error('database away');
    },
    refresh,
    5,
  );
  k.add('a', 1n);
  await until(() => calls >= 3);
  assert.equal(most, 1, 'ticks never overlap');
  assert.ok(calls >= 3, `it went on after a failure (${calls} ticks)`);
  k.close();
  assert.equal(k.size, 0);
  const after = calls;
  await sleep(60);
  assert.ok(calls <= after + 1, 'no new tick after close()');
  k.add('a', 2n);
  assert.equal(k.size, 0, 'a row added after close() is ignored');
  await sleep(30);
  assert.ok(calls <= after + 1, 'and starts no timer');
});

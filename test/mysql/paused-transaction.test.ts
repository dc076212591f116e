/**
 * A client SIGSTOPped inside a transaction that row-locks a lock (docs/backends/mysql.md,
 * "Failure modes"): on MariaDB the server ends the idle transaction after the backend's
 * bound (`idle_transaction_timeout` = `lockTimeoutMs`), so the others are not blocked past it,
 * and the paused client's late write and COMMIT fail: no double grant, no token moved.
 */
import assert from 'node:assert/strict';
import { fork, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { randomBytes } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import mysql from 'mysql2/promise';
import { createLocker } from '../../src/index.js';
import { startMariaDb } from '../../scripts/servers/mariadb.js';
import { useServer } from '../helpers.js';

const server = await useServer(() => startMariaDb());
const CHILD = fileURLToPath(new URL('./paused-tx-child.ts', import.meta.url));

function startChild(lockId: string, seconds: number): ChildProcess {
  return fork(CHILD, [server.url, lockId, String(seconds)], {
    execArgv: ['--import', 'tsx'],
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
}

test(
  'a client paused inside a transaction blocks the lock only until MariaDB ends its idle transaction',
  { timeout: 90_000 },
  async (t) => {
    const locker = createLocker(`${server.url}?migrate=true&lockTimeoutMs=1000`);
    const admin = await mysql.createConnection(server.url);
    const lockId = `paused-${randomBytes(4).toString('hex')}`;
    let child: ChildProcess | undefined;
    try {
      await (await locker.lock(lockId)).release();
      const [[before]] = (await admin.query('SELECT CAST(token AS CHAR) AS t FROM locksmith_locks WHERE lock_id = ?', [
        lockId,
      ])) as unknown as [[{ t: string }]];
      child = startChild(lockId, 1);
      const exited = once(child, 'exit').then(([code]) => {
        throw new Error(`the child exited (${String(code)}) before it was in its transaction`);
      });
      await Promise.race([once(child, 'message'), exited]);
      exited.catch(() => undefined);
      const stoppedAt = performance.now();
      child.kill('SIGSTOP');
      const lock = await locker.lock(lockId, { timeoutMs: 30_000 });
      t.diagnostic(`granted ${Math.round(performance.now() - stoppedAt)} ms after the client stopped inside its transaction`);
      child.kill('SIGCONT');
      const reported = once(child, 'message');
      child.send('go on');
      const [outcome] = (await reported) as [{ committed: boolean; code?: string }];
      assert.equal(outcome.committed, false, 'the paused transaction was ended by the server');
      t.diagnostic(`the paused client's late statement failed with ${outcome.code}`);
      const state = await locker.inspect(lockId);
      assert.deepEqual(
        state.holders.map((h) => h.token),
        [lock.token],
        'one holder: ours',
      );
      const [[after]] = (await admin.query('SELECT CAST(token AS CHAR) AS t FROM locksmith_locks WHERE lock_id = ?', [
        lockId,
      ])) as unknown as [[{ t: string }]];
      assert.ok(BigInt(after.t) < BigInt(before.t) + 1000n, `the paused client's write was rolled back (${before.t} → ${after.t})`);
      assert.equal(lock.held, true);
      await lock.release();
    } finally {
      child?.kill('SIGCONT');
      child?.kill('SIGKILL');
      await admin.end();
      await locker.close();
    }
  },
);

/**
 * Server-side wake-ups across processes (docs/backends/mysql.md, "Waiting"): with a poll of
 * 60 s and a 60 s lease, only the release's ring (KILL QUERY of the waiter's sleeping bell
 * connection) can let a waiter in another process in within the test's bounds; with
 * `bells=0` the same waiter stays queued. The server's user has no PROCESS or SUPER
 * privilege (scripts/servers/mariadb.ts): killing its own user's sleep needs neither.
 */
import assert from 'node:assert/strict';
import { fork, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { createLocker } from '../../src/index.js';
import { adminMariaDb, startMariaDb } from '../../scripts/servers/mariadb.js';
import { useServer } from '../helpers.js';

const server = await useServer(() => startMariaDb());
const here = import.meta.dirname;

/** A waiter process on `lockId`; resolves once it queued, with its grant to come. */
async function waiterProcess(url: string, lockId: string): Promise<{ child: ChildProcess; held: Promise<bigint> }> {
  const child = fork(join(here, 'waiter-child.ts'), [url, lockId], { execArgv: ['--import', 'tsx'], stdio: 'inherit' });
  after(() => void child.kill('SIGKILL'));
  const exited = new Promise<never>((_, reject) => child.once('exit', (code) => reject(new Error(`waiter exited (${code})`))));
  const message = (op: string): Promise<Record<string, string>> =>
    Promise.race([
      new Promise<Record<string, string>>((resolve) => {
        const on = (m: Record<string, string>): void => {
          if (m['op'] !== op) return;
          child.off('message', on);
          resolve(m);
        };
        child.on('message', on);
      }),
      exited,
    ]);
  const held = message('held').then((m) => BigInt(m['token'] ?? '0'));
  held.catch(() => undefined);
  await message('waiting');
  return { child, held };
}

/** Until a bell connection of the server's user sleeps (the waiter armed it). */
async function bellArmed(): Promise<void> {
  for (;;) {
    const rows = (await adminMariaDb(server.socket, [
      "SELECT count(*) AS n FROM information_schema.processlist WHERE user = 'locksmith' AND info LIKE 'SELECT IF(GET_LOCK(%'",
    ])) as { n: unknown }[];
    if (Number(rows[0]?.n) > 0) return;
    await sleep(20);
  }
}

describe('mysql: wake-ups across processes', () => {
  test('a release wakes a waiter of another process at once (a 60 s poll)', { timeout: 60_000 }, async () => {
    const url = `${server.url}?migrate=true&pollMs=60000`;
    const holder = createLocker(url, { ttlMs: 60_000 });
    const lockId = `my:bell:${randomBytes(4).toString('hex')}`;
    try {
      const held = await holder.lock(lockId);
      const waiter = await waiterProcess(url, lockId);
      await bellArmed();
      await held.release();
      // Without the ring the waiter would look again after 45–75 s: past this bound.
      const token = await Promise.race([waiter.held, sleep(20_000).then(() => assert.fail('the waiter was not woken'))]);
      assert.ok(token > held.token);
    } finally {
      await holder.close();
    }
  });

  test('bells=0: the same waiter only polls (the ring is what woke it)', { timeout: 60_000 }, async () => {
    const url = `${server.url}?migrate=true&pollMs=60000&bells=0`;
    const holder = createLocker(url, { ttlMs: 60_000 });
    const lockId = `my:nobell:${randomBytes(4).toString('hex')}`;
    try {
      const held = await holder.lock(lockId);
      const waiter = await waiterProcess(url, lockId);
      await sleep(500);
      await held.release();
      const outcome = await Promise.race([waiter.held.then(() => 'held'), sleep(3_000).then(() => 'still waiting')]);
      assert.equal(outcome, 'still waiting');
      waiter.child.kill('SIGKILL');
    } finally {
      await holder.close();
    }
  });

  test('close() does not wait for a waiter sleeping on its bell (a 60 s poll)', { timeout: 30_000 }, async () => {
    const url = `${server.url}?migrate=true&pollMs=60000`;
    const holder = createLocker(url, { ttlMs: 60_000 });
    const waiter = createLocker(url, { ttlMs: 60_000 });
    const lockId = `my:close:${randomBytes(4).toString('hex')}`;
    try {
      const held = await holder.lock(lockId);
      const pending = waiter.lock(lockId).catch((err: unknown) => err);
      await bellArmed();
      // The bell's SLEEP would end after 45–75 s: close() must not queue behind it.
      await waiter.close();
      assert.ok((await pending) instanceof Error);
      await held.release();
    } finally {
      await holder.close();
    }
  });
});

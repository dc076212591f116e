/**
 * Redis-only defects, each against a real redis-server: ghost holders and waiters left by
 * attempts whose reply never came, URLs whose database, credentials and failures must be
 * honoured and never shown, and a CLI run killed while it waits.
 */
import assert from 'node:assert/strict';
import { after, describe, test } from 'node:test';
import { randomBytes } from 'node:crypto';
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { BackendUnavailableError, createLocker, type Locker, type LockerOptions } from '../../src/index.js';
import { startRedis } from '../../scripts/servers/redis.js';
import { eventually, useServer, waitingOn } from '../helpers.js';

const T = { timeout: 120_000 };
const server = await useServer(() => startRedis());
const secured = await useServer(() => startRedis({ extraArgs: ['--requirepass', 'Pa55-w0rd-x'] }));
const lockers: Locker[] = [];

after(async () => {
  await Promise.allSettled(lockers.map((l) => l.close()));
});

function locker(url: string, options?: Partial<LockerOptions>): Locker {
  const l = createLocker(url, options);
  lockers.push(l);
  return l;
}

const id = (label: string): string => `redis-defects:${label}:${randomBytes(6).toString('hex')}`;

/** Pause the server while `work` runs into its command timeout, then resume it. */
async function whilePaused(work: () => Promise<unknown>): Promise<unknown> {
  const node = server.nodes[0];
  assert.ok(node);
  node.pause();
  try {
    return await work().then(
      () => assert.fail('an attempt on a paused server succeeded'),
      (err: unknown) => err,
    );
  } finally {
    node.resume();
  }
}

describe('redis: ghost holders and waiters', () => {
  test('an acquire whose reply timed out leaves no hold behind once the server answers again', T, async () => {
    const lockId = id('ghost-hold');
    const a = locker(`${server.url}?commandTimeoutMs=300`, { ttlMs: 60_000 });
    const b = locker(server.url, { ttlMs: 60_000 });
    await (await a.lock(id('warm-up'))).release();
    const err = await whilePaused(() => a.lock(lockId));
    assert.ok(err instanceof BackendUnavailableError, String(err));
    // The lost attempt ran on the server after the resume, and so did the clean-up behind it.
    const next = await b.lock(lockId, { timeoutMs: 10_000 });
    await next.release();
  });

  test('an acquire with an explicit owner whose reply timed out leaves no hold behind either', T, async () => {
    const lockId = id('ghost-owner');
    // As `locksmith run` does: the owner is the caller's, not generated per acquisition.
    const a = locker(`${server.url}?commandTimeoutMs=300`, { ttlMs: 60_000 });
    const b = locker(server.url, { ttlMs: 60_000 });
    await (await a.lock(id('warm-up'))).release();
    const err = await whilePaused(() => a.lock(lockId, { owner: 'deploy-job' }));
    assert.ok(err instanceof BackendUnavailableError, String(err));
    const next = await b.lock(lockId, { timeoutMs: 10_000 });
    await next.release();
  });

  test('a re-entry with an explicit owner whose reply timed out leaves the count as it was', T, async () => {
    const lockId = id('ghost-reentry');
    const a = locker(`${server.url}?commandTimeoutMs=300`, { ttlMs: 60_000 });
    const b = locker(server.url, { ttlMs: 60_000 });
    const c = locker(server.url, { ttlMs: 60_000 });
    await (await a.lock(id('warm-up'))).release();
    // b holds as 'deploy-job'; a's re-entry under the same owner is lost in a pause.
    const held = await b.lock(lockId, { owner: 'deploy-job' });
    const err = await whilePaused(() => a.lock(lockId, { owner: 'deploy-job' }));
    assert.ok(err instanceof BackendUnavailableError, String(err));
    await eventually('the lost re-entry undone', async () => (await b.inspect(lockId)).holders[0]?.count === 1, 10_000);
    await held.release();
    await (await c.lock(lockId, { timeoutMs: 10_000 })).release();
  });

  test('a fair waiter whose attempt timed out leaves no queue entry in front of the next waiter', T, async () => {
    const lockId = id('ghost-waiter');
    const holder = locker(server.url, { ttlMs: 60_000, fair: true });
    const a = locker(`${server.url}?commandTimeoutMs=300`, { ttlMs: 60_000, fair: true });
    const c = locker(server.url, { ttlMs: 60_000, fair: true });
    await (await a.lock(id('warm-up'))).release();
    const held = await holder.lock(lockId);
    const err = await whilePaused(() => a.lock(lockId, { timeoutMs: 30_000 }));
    assert.ok(err instanceof BackendUnavailableError, String(err));
    const queued = waitingOn(c, lockId);
    const next = c.lock(lockId, { timeoutMs: 20_000 });
    await queued;
    await held.release();
    await (await next).release();
  });
});

describe('redis: URLs', () => {
  test('a database that does not exist is an error, not db 0', T, async () => {
    const l = locker(`${server.url}/99`);
    await assert.rejects(l.tryLock(id('db99')), (err: unknown) => {
      assert.ok(err instanceof BackendUnavailableError, String(err));
      assert.match(err.message, /DB index is out of range/i);
      return true;
    });
  });

  test('a database that exists is the one used', T, async () => {
    const lockId = id('db5');
    const five = locker(`${server.url}/5`);
    const zero = locker(server.url);
    const held = await five.lock(lockId);
    assert.ok(await zero.tryLock(lockId), 'db 0 shares the lock of db 5');
    assert.equal(await locker(`${server.url}/5`).tryLock(lockId), null);
    await held.release();
  });

  test('a wrong password names WRONGPASS or NOAUTH and never shows the password', T, async () => {
    const url = new URL(secured.url);
    url.password = 'not-the-Pa55';
    for (const bad of [url.href, secured.url]) {
      await assert.rejects(locker(bad, { connectTimeoutMs: 5_000 }).tryLock(id('auth')), (err: unknown) => {
        assert.ok(err instanceof BackendUnavailableError, String(err));
        assert.match(err.message, /WRONGPASS|NOAUTH/);
        const shown = `${err.message} ${JSON.stringify(err.context)} ${String(err.stack)}`;
        assert.ok(!shown.includes('not-the-Pa55'), shown);
        return true;
      });
    }
    const good = new URL(secured.url);
    good.password = 'Pa55-w0rd-x';
    await (await locker(good.href).lock(id('auth-ok'))).release();
  });

  test('unknown URL parameters are rejected', T, async () => {
    await assert.rejects(locker(`${server.url}?comandTimeoutMs=5`).tryLock(id('typo')), /unknown parameter 'comandTimeoutMs'/);
  });
});

describe('redis: locksmith run killed while it waits', () => {
  const cli = fileURLToPath(new URL('../../src/cli/main.ts', import.meta.url));
  for (const [sig, status] of [
    ['SIGTERM', 143],
    ['SIGINT', 130],
  ] as const) {
    test(`${sig}: the process exits ${status} and its queue entry goes with it, so the next fair waiter is not held up`, T, async () => {
      const lockId = id(`cli-${sig}`);
      const holder = locker(server.url, { fair: true });
      const held = await holder.lock(lockId);
      const child = spawn(process.execPath, ['--import', 'tsx', cli, 'run', '--backend', server.url, '--fair', lockId, '--', 'true'], {
        stdio: ['ignore', 'ignore', 'pipe'],
      });
      const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
      await eventually('the CLI queued', async () => (await holder.inspect(lockId)).waiters === 1, 60_000);
      child.kill(sig);
      assert.equal(await exited, status);
      assert.equal((await holder.inspect(lockId)).waiters, 0, 'the queue entry went with the wait');
      const next = locker(server.url, { fair: true });
      const queued = waitingOn(next, lockId);
      const pending = next.lock(lockId, { timeoutMs: 5_000 });
      await queued;
      await held.release();
      await (await pending).release();
    });
  }
});

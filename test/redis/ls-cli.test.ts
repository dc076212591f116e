/**
 * `locksmith ls --json` and `locksmith status` on a real Redis, run as a separate process the
 * way an operator runs them: a holder and a fair waiter, each in a process of its own, are
 * shown with their host, pid and name (docs/observability.md, "The command line").
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { hostname } from 'node:os';
import { after, before, test } from 'node:test';
import { promisify } from 'node:util';
import { randomBytes } from 'node:crypto';
import { startRedis } from '../../scripts/servers/redis.js';
import type { RunningServer } from '../../scripts/servers/harness.js';
import { nextMessage, spawnChild } from '../file/helpers.js';

const execFileP = promisify(execFile);
const T = { timeout: 120_000 };
const CLI = new URL('../../src/cli/main.ts', import.meta.url).pathname;

let server: RunningServer;
before(async () => {
  server = await startRedis();
});
after(async () => {
  await server.stop();
});

/** Run the CLI in its own process; its stdout. */
async function cli(args: readonly string[]): Promise<string> {
  const { stdout } = await execFileP(process.execPath, ['--import', 'tsx', CLI, ...args], { timeout: 60_000 });
  return stdout;
}

interface Who {
  readonly identity?: { readonly name: string; readonly pid: number; readonly host: string };
}

test('ls --json shows a holder and a waiter of two other processes with host, pid and name; status lists the waiter', T, async () => {
  const prefix = `ls-cli-${randomBytes(4).toString('hex')}/`;
  const lockId = `${prefix}nightly`;
  const holder = spawnChild({ mode: 'hold', url: server.url, lockId, ttlMs: 30_000, name: 'report-job' });
  const held = await nextMessage(holder, 'held');
  const waiter = spawnChild({ mode: 'hold', url: server.url, lockId, ttlMs: 30_000, name: 'backup-job', fair: true });
  const waiting = await nextMessage(waiter, 'waiting');
  try {
    const doc = JSON.parse(await cli(['ls', prefix, '--backend', server.url, '--json'])) as {
      locks: { lockId: string; holders: (Who & { token: string })[]; queue: Who[] }[];
    };
    const [lock] = doc.locks;
    assert.equal(lock?.lockId, lockId);
    assert.deepEqual(lock.holders[0]?.identity, { name: 'report-job', pid: held.pid, host: hostname() });
    assert.equal(lock.holders[0]?.token, held.token);
    assert.deepEqual(lock.queue[0]?.identity, { name: 'backup-job', pid: waiting.pid, host: hostname() });
    const status = await cli(['status', lockId, '--backend', server.url]);
    assert.match(status, new RegExp(`backup-job ${waiting.pid}@`));
  } finally {
    holder.kill('SIGKILL');
    waiter.kill('SIGKILL');
  }
});

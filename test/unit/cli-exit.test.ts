/**
 * One test per row of the exit-status table (src/cli/exit.ts, docs/cli.md), each running the
 * real `locksmith` in a child process: memory:// where one process suffices, a real Redis
 * with `requirepass` where a row needs another holder, a lost lease or a refused password.
 */
import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { createLocker, DriverMissingError, LockerClosedError, QuorumError, StaleTokenError, UnsupportedError } from '../../src/index.js';
import { EXIT, ERROR_EXITS, exitHelp, exitStatusOf } from '../../src/cli/exit.js';
import { freePort } from '../../scripts/servers/harness.js';
import { startRedis } from '../../scripts/servers/redis.js';
import { eventually, useServer } from '../helpers.js';
import { cli, finished, startCli } from './cli-process.js';

const PASSWORD = 'exit-table-pw';
const redis = await useServer(() => startRedis({ extraArgs: ['--requirepass', PASSWORD] }));
const port = redis.nodes[0]?.port ?? 0;
const URL_OK = `redis://:${PASSWORD}@127.0.0.1:${port}`;
const holder = createLocker(URL_OK, { ttlMs: 30_000 });
after(() => holder.close());

test("row 0-255: run exits with the command's own status (argv command and -c string)", async () => {
  assert.equal((await cli(['run', '-b', 'memory://', 'x', 'sh', '-c', 'exit 7'])).code, 7);
  assert.equal((await cli(['run', '-b', 'memory://', 'x', '-c', 'exit 5'])).code, 5);
  const echoed = await cli(['run', '-b', 'memory://', 'x', 'echo', '-n', 'hi']);
  assert.deepEqual([echoed.code, echoed.stdout], [0, 'hi']);
});

test('row 1: held by another: -n and -w exit 1 at once / when the wait runs out, -E sets it, -q silences it; status: free', async () => {
  const lock = await holder.lock('exit:held');
  const nonblock = await cli(['run', '-b', URL_OK, '-n', 'exit:held', 'true']);
  assert.equal(nonblock.code, EXIT.CONFLICT);
  assert.match(nonblock.stderr, /held by another/);
  assert.equal((await cli(['run', '-b', URL_OK, '-n', '-E', '9', 'exit:held', 'true'])).code, 9);
  assert.equal((await cli(['run', '-b', URL_OK, '-w', '0.3', 'exit:held', 'true'])).code, EXIT.CONFLICT);
  const quiet = await cli(['run', '-b', URL_OK, '-nq', 'exit:held', 'true']);
  assert.deepEqual([quiet.code, quiet.stderr], [EXIT.CONFLICT, '']);
  await lock.release();
  assert.equal((await cli(['status', '-b', URL_OK, 'exit:held'])).code, EXIT.CONFLICT, 'status of a free lock');
});

test('the waiting lines: only with -v (stderr is not a terminal here)', async () => {
  const lock = await holder.lock('exit:progress');
  const [plain, verbose] = await Promise.all([
    cli(['run', '-b', URL_OK, '-w', '2.5', 'exit:progress', 'true']),
    cli(['run', '-b', URL_OK, '-v', '-w', '2.5', 'exit:progress', 'true']),
  ]);
  await lock.release();
  assert.equal(plain.code, EXIT.CONFLICT);
  assert.doesNotMatch(plain.stderr, /waiting for lock/);
  assert.equal(verbose.code, EXIT.CONFLICT);
  assert.match(verbose.stderr, /waiting for lock 'exit:progress'/);
  assert.match(verbose.stderr, /backend redis:\/\/:\*\*\*@/);
});

test('row 64: bad usage (unknown option, no command, bad duration, -c with a command)', async () => {
  for (const args of [
    ['run', '-b', 'memory://', '--bogus', 'x', 'true'],
    ['run', '-b', 'memory://', 'x'],
    ['run', '-b', 'memory://', '-w', 'ten', 'x', 'true'],
    ['run', '-b', 'memory://', 'x', '-c', 'true', 'extra'],
    ['run', '-b', 'memory://', '-q', '-v', 'x', 'true'],
  ]) {
    assert.equal((await cli(args)).code, EXIT.USAGE, args.join(' '));
  }
});

test('row 69: an unreachable backend (its message whole, etcd too), and a Redlock majority that cannot be reached (QUORUM_FAILED)', async () => {
  const closed = await freePort();
  const down = await cli(['run', '-b', `redis://127.0.0.1:${closed}`, 'x', 'true']);
  assert.equal(down.code, EXIT.UNAVAILABLE, down.stderr);
  assert.match(down.stderr, /BACKEND_UNAVAILABLE/);
  const etcd = await cli(['run', '-b', `etcd://127.0.0.1:${closed}`, 'x', 'true']);
  assert.equal(etcd.code, EXIT.UNAVAILABLE, etcd.stderr);
  assert.match(etcd.stderr, new RegExp(`etcd connect to etcd://127\\.0\\.0\\.1:${closed} failed: .*ECONNREFUSED`));
  assert.doesNotMatch(etcd.stderr, /Resolution note:\s*$/m, "etcd's message is not cut off");
  const [a, b, c] = [await freePort(), await freePort(), await freePort()];
  const quorum = await cli(['run', '-b', `redlock://127.0.0.1:${a},127.0.0.1:${b},127.0.0.1:${c}`, 'x', 'true']);
  assert.equal(quorum.code, EXIT.UNAVAILABLE, quorum.stderr);
  assert.match(quorum.stderr, /QUORUM_FAILED/);
});

test('row 70: only what cannot happen in the CLI (a bug) maps to 70', () => {
  assert.equal(exitStatusOf(new LockerClosedError()), EXIT.SOFTWARE);
  assert.equal(exitStatusOf(new StaleTokenError(1n, 2n, 'write')), EXIT.SOFTWARE);
  assert.equal(exitStatusOf(new TypeError('oops')), EXIT.SOFTWARE);
  assert.equal(
    exitStatusOf(new QuorumError('no majority', [{ node: 'a', ok: false, error: new Error('ECONNREFUSED') }])),
    EXIT.UNAVAILABLE,
  );
});

test('row 76: the lock is lost while the command runs: the command is stopped', async () => {
  const child = startCli(['run', '-b', URL_OK, '--ttl', '1s', '--grace', '200ms', 'exit:lost', 'sleep', '30']);
  const done = finished(child);
  await eventually('the run holds the lock', async () => (await holder.inspect('exit:lost')).holders.length === 1);
  const admin = new Redis({ host: '127.0.0.1', port, password: PASSWORD });
  await admin.flushall();
  admin.disconnect();
  const result = await done;
  assert.equal(result.code, EXIT.LOST, result.stderr);
  assert.match(result.stderr, /lost/);
});

test('row 78: configuration: a refused password, an unknown scheme, a malformed URL, a feature the backend lacks', async () => {
  const wrong = await cli(['run', '-b', `redis://:not-the-password@127.0.0.1:${port}`, 'x', 'true']);
  assert.equal(wrong.code, EXIT.CONFIG, wrong.stderr);
  assert.doesNotMatch(wrong.stderr, /not-the-password/);
  assert.equal((await cli(['run', '-b', `redis://127.0.0.1:${port}`, 'x', 'true'])).code, EXIT.CONFIG, 'no password (NOAUTH)');
  assert.equal((await cli(['run', '-b', 'nope://x', 'x', 'true'])).code, EXIT.CONFIG);
  assert.equal((await cli(['run', '-b', 'redis://127.0.0.1:99999999', 'x', 'true'])).code, EXIT.CONFIG);
  const unsupported = await cli(['run', '-b', `redlock://:${PASSWORD}@127.0.0.1:${port}`, '-s', 'x', 'true']);
  assert.equal(unsupported.code, EXIT.CONFIG, unsupported.stderr);
  assert.match(unsupported.stderr, /UNSUPPORTED/);
  assert.equal(exitStatusOf(new DriverMissingError('the redis backend', 'ioredis')), EXIT.CONFIG);
  assert.equal(exitStatusOf(new UnsupportedError('redlock', 'semaphores')), EXIT.CONFIG);
});

test('rows 126 and 127: the command is not executable; not found', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'locksmith-exit-'));
  const plain = join(dir, 'not-executable');
  await writeFile(plain, 'echo never\n', { mode: 0o644 });
  assert.equal((await cli(['run', '-b', 'memory://', 'x', plain])).code, EXIT.CANNOT_EXECUTE);
  await rm(dir, { recursive: true, force: true });
  assert.equal((await cli(['run', '-b', 'memory://', 'x', 'no-such-command-locksmith'])).code, EXIT.NOT_FOUND);
});

test('row 128+n: the command killed by a signal; locksmith interrupted while it waits (its queue entry goes)', async () => {
  assert.equal((await cli(['run', '-b', 'memory://', 'x', 'sh', '-c', 'kill -TERM $$'])).code, 143);
  const lock = await holder.lock('exit:signal');
  const child = startCli(['run', '-b', URL_OK, '--fair', 'exit:signal', 'true']);
  const done = finished(child);
  await eventually('the run waits in the queue', async () => (await holder.inspect('exit:signal')).waiters === 1);
  child.kill('SIGINT');
  assert.equal((await done).code, 130);
  assert.equal((await holder.inspect('exit:signal')).waiters, 0);
  await lock.release();
});

test('--help prints the table; every error code has a row', async () => {
  const help = await cli(['--help']);
  const runHelp = await cli(['run', '--help']);
  for (const text of [help.stdout, runHelp.stdout]) {
    for (const status of ['64', '69', '70', '76', '78', '126', '127', '128+n'])
      assert.match(text, new RegExp(`^  ${status.replace('+', '\\+')} `, 'm'));
    for (const code of Object.keys(ERROR_EXITS)) assert.ok(text.includes(code), `--help names ${code}`);
  }
  assert.ok(exitHelp().includes('QUORUM_FAILED 69'));
});

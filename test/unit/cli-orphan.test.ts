/**
 * A `locksmith run` wrapper killed with kill -9 can neither stop its command nor release the
 * lock; the lock frees when its lease runs out. On Linux the command dies with the wrapper
 * (setpriv --pdeathsig, src/cli/deathsig.ts), so it never runs on without the lock.
 */
import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { once } from 'node:events';
import { spawnSync } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createLocker } from '../../src/index.js';
import { diesWithParent } from '../../src/cli/deathsig.js';
import { startRedis } from '../../scripts/servers/redis.js';
import { eventually, useServer } from '../helpers.js';
import { startCli } from './cli-process.js';

/** Linux with util-linux's setpriv (elsewhere the command outlives a killed wrapper: docs/cli.md). */
const PDEATHSIG = process.platform === 'linux' && spawnSync('setpriv', ['--pdeathsig', 'KILL', '--', 'true']).status === 0;
const redis = await useServer(() => startRedis());
const locker = createLocker(redis.url);
const dir = await mkdtemp(join(tmpdir(), 'locksmith-orphan-'));
after(async () => {
  await locker.close();
  await rm(dir, { recursive: true, force: true });
});

/** True while `pid` is a live process (a zombie waiting for its reaper counts as dead). */
async function alive(pid: number): Promise<boolean> {
  const stat = await readFile(`/proc/${pid}/stat`, 'utf8').catch(() => '');
  // Field 3, after the parenthesised command name, is the state.
  const state = stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
  return stat !== '' && state !== 'Z' && state !== 'X';
}

test('on Linux the command is started through setpriv --pdeathsig KILL', { skip: !PDEATHSIG }, () => {
  assert.deepEqual(diesWithParent('echo', ['-n', 'hi']), ['setpriv', ['--pdeathsig', 'KILL', '--', 'echo', '-n', 'hi']]);
});

test('kill -9 of the wrapper: its command dies with it, and the lock frees when its lease runs out', { skip: !PDEATHSIG }, async () => {
  const pidFile = join(dir, 'child.pid');
  const wrapper = startCli(['run', '-b', redis.url, '--ttl', '2s', 'orphan:job', 'sh', '-c', `echo $$ > ${pidFile}; exec sleep 1000`]);
  // 'exit', not 'close': a command that outlived its wrapper would keep the wrapper's pipes open.
  const exited = once(wrapper, 'exit');
  const pidText = async (): Promise<string> => (existsSync(pidFile) ? readFile(pidFile, 'utf8') : '');
  await eventually('the command started', async () => /^\d+\n$/.test(await pidText()));
  const pid = Number((await pidText()).trim());
  try {
    assert.ok(await alive(pid), 'the command runs under the lock');
    assert.equal((await locker.inspect('orphan:job')).holders.length, 1);
    wrapper.kill('SIGKILL');
    assert.deepEqual(await exited, [null, 'SIGKILL']);
    await eventually('the command died with its wrapper', async () => !(await alive(pid)), 10_000);
    await eventually('the lease ran out', async () => (await locker.inspect('orphan:job')).holders.length === 0);
  } finally {
    // When the test fails, the orphan must not outlive it (it holds the test's pipes).
    if (await alive(pid)) process.kill(pid, 'SIGKILL');
  }
});

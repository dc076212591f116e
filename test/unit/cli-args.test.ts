/**
 * `locksmith run` reads its words as flock does (src/cli/run-args.ts): options, the lock id,
 * more options, then the command — whose own options are its own.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { program } from '../../src/cli/main.js';
import { splitRunArgs } from '../../src/cli/run-args.js';
import { cli } from './cli-process.js';

const runOptions = program(() => undefined).commands.find((c) => c.name() === 'run')?.options ?? [];
const split = (...words: string[]): string[] => splitRunArgs(words, runOptions);

test('the first word after the lock id that is not an option starts the command', () => {
  assert.deepEqual(split('-b', 'memory://', 'job', 'echo', '-n', 'hi'), ['-b', 'memory://', 'job', '--', 'echo', '-n', 'hi']);
  assert.deepEqual(split('job', '-n', 'echo', '-w', '5'), ['job', '-n', '--', 'echo', '-w', '5']);
  assert.deepEqual(split('--backend=memory://', 'job', '--wait', '3', 'ls'), ['--backend=memory://', 'job', '--wait', '3', '--', 'ls']);
  assert.deepEqual(split('-w5', '-E3', 'job', 'ls'), ['-w5', '-E3', 'job', '--', 'ls']);
  assert.deepEqual(
    split('-nE', '7', 'job', 'ls'),
    ['-nE', '7', 'job', '--', 'ls'],
    'a grouped short option ending in one that takes a value',
  );
  assert.deepEqual(split('job', '-c', 'echo -n hi'), ['job', '-c', 'echo -n hi']);
  assert.deepEqual(split('-s', 'job', '-', 'x'), ['-s', 'job', '--', '-', 'x'], '- alone is a word, not an option');
});

test('-- ends the options as before, before or after the lock id', () => {
  assert.deepEqual(split('job', '--backend', 'memory://', '--', 'echo', '--', 'x'), [
    'job',
    '--backend',
    'memory://',
    '--',
    'echo',
    '--',
    'x',
  ]);
  assert.deepEqual(split('-b', 'memory://', '--', 'job', 'echo'), ['-b', 'memory://', '--', 'job', 'echo']);
  assert.deepEqual(split('-n'), ['-n']);
});

test('through the real command: run -b URL job echo -n hi prints hi; -c runs through sh; --timeout is --wait', async () => {
  const echo = await cli(['run', '-b', 'memory://', 'job', 'echo', '-n', 'hi']);
  assert.deepEqual([echo.code, echo.stdout, echo.stderr], [0, 'hi', '']);
  const dashes = await cli(['run', 'job', '-b', 'memory://', '--', 'echo', '-n', 'hi']);
  assert.deepEqual([dashes.code, dashes.stdout], [0, 'hi']);
  const shell = await cli(['run', '-b', 'memory://', 'job', '-c', 'echo "$LOCKSMITH_LOCK_ID" | tr a-z A-Z']);
  assert.deepEqual([shell.code, shell.stdout], [0, 'JOB\n']);
  const timeout = await cli(['run', '-b', 'memory://', '--timeout', '1', '-x', 'job', 'true']);
  assert.equal(timeout.code, 0, timeout.stderr);
});

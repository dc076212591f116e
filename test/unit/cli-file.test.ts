/**
 * `locksmith run` without a backend coordinates the processes of this machine, as flock:
 * it uses file:// in its default directory (here <TMPDIR>/locksmith-<uid> in a scratch
 * TMPDIR), never memory://. Six processes that each read, bump and write a counter
 * file under the lock count to six.
 */
import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { cli } from './cli-process.js';

const dir = await mkdtemp(join(tmpdir(), 'locksmith-cli-file-'));
after(() => rm(dir, { recursive: true, force: true }));
const env = { LOCKSMITH_BACKEND: undefined, TMPDIR: dir };

test('without --backend or LOCKSMITH_BACKEND, run uses file:// in the default directory', async () => {
  const result = await cli(['run', '-v', 'cli:default', 'true'], env);
  assert.equal(result.code, 0, result.stderr);
  assert.match(result.stderr, /backend file:\/\/\n/);
  assert.ok(existsSync(join(dir, `locksmith-${process.getuid?.() ?? 'user'}`)), 'the default directory holds the lock files');
});

test('six locksmith run processes without a backend count to six on a shared file', async () => {
  const counter = join(dir, 'counter');
  await writeFile(counter, '0\n');
  // Read, pause, write: without the lock the six would overwrite each other's counts.
  const bump = `n=$(cat ${counter}); sleep 0.3; echo $((n + 1)) > ${counter}`;
  const results = await Promise.all(Array.from({ length: 6 }, () => cli(['run', 'cli:count', '-c', bump], env)));
  for (const r of results) assert.equal(r.code, 0, r.stderr);
  assert.equal((await readFile(counter, 'utf8')).trim(), '6');
});

/**
 * `locksmith demo` from the packed tarball: its child processes (dist/cli/demo-child.js) must
 * ship in the package and run without tsx, and the scenes must print their key lines.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { after, test } from 'node:test';
import { promisify } from 'node:util';

const exec = promisify(execFile);
const root = resolve(import.meta.dirname, '../..');
let dir = '';
after(async () => {
  if (dir !== '') await rm(dir, { recursive: true, force: true });
});

test('locksmith demo from the packed tarball runs its process scenes and cleans up', { timeout: 600_000 }, async () => {
  dir = await mkdtemp(join(tmpdir(), 'locksmith-demo-pkg-'));
  await exec('npm', ['pack', '--silent', '--pack-destination', dir], { cwd: root, maxBuffer: 64 << 20 });
  const tarball = (await readdir(dir)).find((f) => f.endsWith('.tgz'));
  assert.ok(tarball, 'npm pack wrote a tarball');
  const app = join(dir, 'app');
  const scratch = join(dir, 'tmp');
  await mkdir(app);
  await mkdir(scratch);
  await writeFile(join(app, 'package.json'), JSON.stringify({ name: 'scratch-demo', private: true, type: 'module' }));
  await exec('npm', ['install', '--prefer-offline', '--no-audit', '--no-fund', join(dir, tarball)], { cwd: app, maxBuffer: 64 << 20 });
  const { stdout } = await exec(join(app, 'node_modules/.bin/locksmith'), ['demo'], { env: { ...process.env, TMPDIR: scratch } });
  assert.match(stdout, /final balance: -\d+ {3}<-- NEGATIVE/);
  assert.equal(stdout.match(/ ATM \d \(pid \d+\) token \d: (paid|refused)/g)?.length, 6, stdout);
  assert.match(stdout, /final balance: 50 {3}<-- never negative; tokens grow with every holder/);
  if (process.platform !== 'win32') {
    assert.match(stdout, /A resumes and writes with its old token 1: refused, StaleTokenError/);
    assert.match(stdout, /the report still reads: "final by B"/);
  }
  assert.deepEqual(await readdir(scratch), [], 'the demo removed its temp dirs');
});

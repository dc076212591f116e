/**
 * The file backend's own behaviour: its URL and default directory, lock ids as file names,
 * the critical section's recovery from a dead or stuck owner, and the warning
 * `createLocker()` gives when it falls back to memory://.
 */
import assert from 'node:assert/strict';
import { execFile, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { createLocker, InvalidArgumentError } from '../../src/index.js';
import { defaultDirectory, fileName, prepareDirectory } from '../../src/backends/file/index.js';
import { bootId, monotonicMs, pidNamespace } from '../../src/backends/file/layout.js';
import { lockDirectory } from './helpers.js';

const here = dirname(fileURLToPath(import.meta.url));
const T = { timeout: 60_000 };

describe('file backend: URL and directory', () => {
  test('file:// uses <tmpdir>/locksmith-<uid>, created with mode 0700, whatever XDG_RUNTIME_DIR says', T, async () => {
    const temp = mkdtempSync(join(tmpdir(), 'locksmith-tmp-'));
    const runtime = mkdtempSync(join(tmpdir(), 'locksmith-xdg-'));
    const saved = { TMPDIR: process.env.TMPDIR, XDG_RUNTIME_DIR: process.env.XDG_RUNTIME_DIR };
    // os.tmpdir() follows TMPDIR: a throw-away one keeps the test off the real default.
    process.env.TMPDIR = temp;
    const expected = join(temp, `locksmith-${process.getuid?.() ?? 'user'}`);
    try {
      for (const xdg of [runtime, undefined]) {
        if (xdg === undefined) delete process.env.XDG_RUNTIME_DIR;
        else process.env.XDG_RUNTIME_DIR = xdg;
        assert.equal(defaultDirectory(), expected);
        await using locker = createLocker('file://');
        await (await locker.lock('default-dir')).release();
      }
      assert.equal(statSync(expected).mode & 0o777, 0o700);
      assert.equal(readdirSync(join(expected, 'locks')).length, 1, 'both lockers used the same state file');
      assert.deepEqual(readdirSync(runtime), [], 'nothing in the runtime directory');
    } finally {
      if (saved.TMPDIR === undefined) delete process.env.TMPDIR;
      else process.env.TMPDIR = saved.TMPDIR;
      if (saved.XDG_RUNTIME_DIR === undefined) delete process.env.XDG_RUNTIME_DIR;
      else process.env.XDG_RUNTIME_DIR = saved.XDG_RUNTIME_DIR;
      rmSync(temp, { recursive: true, force: true });
      rmSync(runtime, { recursive: true, force: true });
    }
  });

  test('a host, or a parameter, is a typed error', T, async () => {
    for (const url of ['file://otherhost/tmp/x', 'file:///tmp/x?pollMs=5']) {
      await using locker = createLocker(url);
      await assert.rejects(locker.tryLock('x'), InvalidArgumentError, url);
    }
  });

  test('lock ids become distinct, safe file names: case, slashes, quotes, unicode, 1 KB', () => {
    const ids = ['a', 'A', 'a/b', '../a', 'a"b', "a'b", 'é', 'e\u0301', ' ', 'x'.repeat(100), 'x'.repeat(101), 'ü'.repeat(512)];
    const names = ids.map(fileName);
    assert.equal(new Set(names).size, ids.length);
    assert.equal(new Set(names.map((n) => n.toLowerCase())).size, ids.length, 'distinct on case-insensitive file systems');
    for (const n of names) assert.match(n, /^[0-9a-z]{1,255}$/);
  });
});

describe('file backend: critical section recovery', () => {
  const { dir, url } = lockDirectory('file-mutex');
  prepareDirectory(dir, false);

  test('a section left by a killed process (its pid is gone) is taken over at once', T, async () => {
    const dead = spawnSync(process.execPath, ['-e', '0']).pid;
    assert.ok(dead !== undefined);
    writeFileSync(join(dir, 'work', `${fileName('dead-owner')}.mutex`), `${dead} 0.x ${bootId()} ${pidNamespace()} ${monotonicMs()}`);
    await using locker = createLocker(url);
    const lock = await locker.tryLock('dead-owner');
    assert.ok(lock, 'granted');
    await lock.release();
  });

  test('a section whose owner is alive but stuck past the bound is broken', T, async () => {
    // Our parent process is alive; the section claims to be 10 s old.
    writeFileSync(
      join(dir, 'work', `${fileName('stuck-owner')}.mutex`),
      `${process.ppid} 0.x ${bootId()} ${pidNamespace()} ${monotonicMs() - 10_000}`,
    );
    await using locker = createLocker(url);
    const lock = await locker.lock('stuck-owner', { timeoutMs: 30_000 });
    await lock.release();
  });

  test('a section of another PID namespace (a container on the same volume) is not judged by our pids', T, async () => {
    const dead = spawnSync(process.execPath, ['-e', '0']).pid;
    const mutex = join(dir, 'work', `${fileName('other-ns')}.mutex`);
    writeFileSync(mutex, `${dead} 0.x ${bootId()} pid:[1] ${monotonicMs()}`);
    await using locker = createLocker(url);
    // The caller's signal, not timeoutMs: a wait bound lets the first attempt answer, and it
    // would answer only once the section is old enough to be broken.
    await assert.rejects(locker.lock('other-ns', { signal: AbortSignal.timeout(300) }));
    assert.ok(existsSync(mutex), 'the section was left alone');
    rmSync(mutex);
    await (await locker.lock('other-ns', { timeoutMs: 30_000 })).release();
  });

  test('a live, fresh section is respected: the attempt waits for it', T, async () => {
    const mutex = join(dir, 'work', `${fileName('busy-owner')}.mutex`);
    writeFileSync(mutex, `${process.ppid} 0.x ${bootId()} ${pidNamespace()} ${monotonicMs()}`);
    await using locker = createLocker(url);
    // The caller's signal, not timeoutMs: a wait bound lets the first attempt answer, and it
    // would answer only once the section is old enough to be broken.
    await assert.rejects(locker.lock('busy-owner', { signal: AbortSignal.timeout(300) }));
    assert.ok(existsSync(mutex), 'the section was left alone');
    rmSync(mutex);
    await (await locker.lock('busy-owner', { timeoutMs: 30_000 })).release();
  });
});

describe('file backend: a directory cleaned away while in use', () => {
  test('work/, or the whole directory, removed by a cleaner of /tmp is made again on the next change', T, async () => {
    const { dir, url } = lockDirectory('file-clean');
    await using locker = createLocker(url);
    const first = await locker.lock('cleaned');
    await first.release();
    rmSync(join(dir, 'work'), { recursive: true });
    const second = await locker.lock('cleaned', { timeoutMs: 30_000 });
    assert.ok(second.token > first.token, 'the state file survived: tokens go on');
    await second.release();
    rmSync(dir, { recursive: true });
    const third = await locker.lock('cleaned', { timeoutMs: 30_000 });
    assert.equal(third.token, 1n, 'the state file went with the directory: tokens restart');
    await third.release();
    assert.equal(statSync(dir).mode & 0o777, 0o700);
  });
});

describe('createLocker() without a URL', () => {
  const run = (env: NodeJS.ProcessEnv): Promise<{ stderr: string }> =>
    promisify(execFile)(process.execPath, ['--import', 'tsx', join(here, 'warn-child.ts')], { env: { ...env, NODE_OPTIONS: '' } });

  test('keeps memory:// and warns once per process that it coordinates nothing between processes', T, async () => {
    const env = { ...process.env };
    delete env.LOCKSMITH_BACKEND;
    const { stderr } = await run(env);
    assert.equal(stderr.split('LOCKSMITH_MEMORY_DEFAULT').length - 1, 1, stderr);
    assert.match(stderr, /coordinates nothing between processes/);
  });

  test('says nothing when LOCKSMITH_BACKEND names the backend', T, async () => {
    const { stderr } = await run({ ...process.env, LOCKSMITH_BACKEND: 'memory://' });
    assert.doesNotMatch(stderr, /LOCKSMITH_MEMORY_DEFAULT/);
  });
});

/**
 * The file backend with real separate processes: a killed or stopped holder's lock frees
 * after its ttl, a fenced resource refuses a resumed holder's stale write, and processes
 * counting under the lock lose no increment.
 */
import assert from 'node:assert/strict';
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { createLocker, FencedResource, StaleTokenError } from '../../src/index.js';
import { FileBackend } from '../../src/backends/file/index.js';
import { exited, lockDirectory, nextMessage, spawnChild } from './helpers.js';

const T = { timeout: 120_000 };

const { dir, url } = lockDirectory('file-proc');

test('kill -9 of the holding process frees the lock after its ttl, with a larger token', T, async () => {
  const lockId = 'proc:kill';
  const holder = spawnChild({ mode: 'hold', url, lockId, ttlMs: 5_000 });
  const held = await nextMessage(holder, 'held');
  await using locker = createLocker(url);
  assert.equal(await locker.tryLock(lockId), null, 'held by the other process');
  holder.kill('SIGKILL');
  await exited(holder);
  // Nothing was released: the lease still stands until its ttl.
  assert.equal((await locker.inspect(lockId)).holders.length, 1);
  const lock = await locker.lock(lockId, { timeoutMs: 60_000 });
  assert.ok(lock.token > BigInt(held.token), `${lock.token} > ${held.token}`);
  await lock.release();
});

test('a holder stopped past its ttl loses the lock; its stale write on resuming is refused by the fence', T, async () => {
  const lockId = 'proc:pause';
  const resource = new FencedResource('initial');
  const paused = spawnChild({ mode: 'hold', url, lockId, ttlMs: 1_000 });
  const first = await nextMessage(paused, 'held');
  resource.write(BigInt(first.token), 'first');
  paused.kill('SIGSTOP');
  const successor = spawnChild({ mode: 'hold', url, lockId, ttlMs: 30_000 });
  const second = await nextMessage(successor, 'held');
  assert.ok(BigInt(second.token) > BigInt(first.token), `${second.token} > ${first.token}`);
  resource.write(BigInt(second.token), 'second');
  paused.kill('SIGCONT');
  paused.send('write');
  const stale = await nextMessage(paused, 'write');
  assert.equal(stale.token, first.token);
  assert.throws(() => resource.write(BigInt(stale.token), 'stale'), StaleTokenError);
  assert.equal(resource.peek(), 'second');
  paused.kill('SIGKILL');
  successor.kill('SIGKILL');
  await Promise.all([exited(paused), exited(successor)]);
});

test("a waiter is woken by another process's release (the directory watch), not by its fallback poll", T, async () => {
  const lockId = 'proc:notify';
  const holder = spawnChild({ mode: 'hold', url, lockId, ttlMs: 120_000 });
  await nextMessage(holder, 'held');
  // A fallback poll and a lease far longer than the wait: only the watch can wake it in time.
  await using locker = createLocker(new FileBackend(dir, { pollMs: 600_000 }));
  const waiting = locker.lock(lockId, { timeoutMs: 30_000 });
  await new Promise((resolve) => locker.once('waiting', resolve));
  holder.send('release');
  await nextMessage(holder, 'released');
  await (await waiting).release();
  holder.kill('SIGKILL');
  await exited(holder);
});

test('six processes on file:// (the default directory) count to six, with or without XDG_RUNTIME_DIR', T, async () => {
  // A throw-away TMPDIR stands for the machine's temporary directory (os.tmpdir() follows it).
  const temp = lockDirectory('file-tmp').dir;
  const runtime = lockDirectory('file-xdg').dir;
  const file = join(temp, 'counter');
  writeFileSync(file, '0');
  // Half as from a login shell (XDG_RUNTIME_DIR set), half as from cron (none).
  const envs = Array.from({ length: 6 }, (_, i) => {
    const env: NodeJS.ProcessEnv = { ...process.env, TMPDIR: temp, XDG_RUNTIME_DIR: runtime };
    if (i % 2 === 1) delete env.XDG_RUNTIME_DIR;
    return env;
  });
  const kids = envs.map((env) => spawnChild({ mode: 'count', url: 'file://', lockId: 'proc:six', file, times: 1 }, env));
  await Promise.all(kids.map((c) => nextMessage(c, 'counted')));
  await Promise.all(kids.map((c) => exited(c)));
  assert.equal(readFileSync(file, 'utf8'), '6');
  const uid = process.getuid?.() ?? 'user';
  assert.equal(readdirSync(join(temp, `locksmith-${uid}`, 'locks')).length, 1, 'one lock in the default directory');
});

test('N processes incrementing a shared counter file under the lock count exactly N×k', T, async () => {
  const [n, k] = [4, 25];
  const file = join(dir, 'counter');
  writeFileSync(file, '0');
  const kids = Array.from({ length: n }, () => spawnChild({ mode: 'count', url, lockId: 'proc:count', file, times: k }));
  const done = await Promise.all(kids.map((c) => nextMessage(c, 'counted')));
  assert.equal(
    done.reduce((sum, m) => sum + m.times, 0),
    n * k,
  );
  await Promise.all(kids.map((c) => exited(c)));
  assert.equal(Number(readFileSync(file, 'utf8')), n * k);
});

/**
 * The CLI habits of flock, `etcdctl lock` and `consul lock` users, each as a row (habit →
 * `locksmith` command line → expected output and exit status), run with the `locksmith`
 * binary of the packed tarball installed into a scratch app without optional peers. The
 * backend is file:// (a scratch directory; no backend at all for the default), so that a
 * holder in another process is real. docs/cli.md has the same table.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdir, mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';

const exec = promisify(execFile);
const root = resolve(import.meta.dirname, '../..');

let dir = '';
let bin = '';
let backend = '';
before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'locksmith-habits-'));
  await exec('npm', ['pack', '--silent', '--pack-destination', dir], { cwd: root, maxBuffer: 64 << 20 });
  const tarball = (await readdir(dir)).find((f) => f.endsWith('.tgz'));
  assert.ok(tarball, 'npm pack wrote a tarball');
  const app = join(dir, 'app');
  await mkdir(join(dir, 'locks'));
  await mkdir(app);
  await writeFile(join(app, 'package.json'), JSON.stringify({ name: 'scratch-habits', private: true, type: 'module' }));
  await exec('npm', ['install', '--prefer-offline', '--no-audit', '--no-fund', join(dir, tarball)], { cwd: app, maxBuffer: 64 << 20 });
  bin = join(app, 'node_modules/.bin/locksmith');
  backend = `file://${join(dir, 'locks')}`;
});
after(async () => {
  if (dir !== '') await rm(dir, { recursive: true, force: true });
});

/** The environment of every row: no LOCKSMITH_BACKEND but the row's, and a scratch default directory. */
function envOf(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const { LOCKSMITH_BACKEND: _ignored, ...env } = process.env;
  return { ...env, TMPDIR: dir, ...extra };
}

/** Run the installed `locksmith`; resolves with its status and output (never rejects on a status). */
async function locksmith(
  args: readonly string[],
  env: Record<string, string> = {},
): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const r = await exec(bin, [...args], { env: envOf(env) });
    return { code: 0, stdout: r.stdout, stderr: r.stderr };
  } catch (err) {
    const e = err as { code?: unknown; stdout?: string; stderr?: string };
    return { code: typeof e.code === 'number' ? e.code : -1, stdout: e.stdout ?? '', stderr: e.stderr ?? '' };
  }
}

/** A `locksmith run … sleep 60` in the background, holding `lockId` until stopped. */
async function holder(...args: string[]): Promise<ChildProcess> {
  const child = spawn(bin, ['run', '-b', backend, ...args, 'sleep', '60'], { env: envOf(), stdio: 'ignore' });
  const lockId = args.find((a) => a.startsWith('habit:')) ?? '';
  for (let i = 0; i < 600; i += 1) {
    const state = await locksmith(['status', '--json', '-b', backend, lockId]);
    const holders = state.code === 0 ? (JSON.parse(state.stdout) as { holders: { ownerId: string }[] }).holders : [];
    if (holders.some((h) => h.ownerId.includes(`:${child.pid}:`))) return child;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`the background holder of ${lockId} never held it`);
}

/** Stop background holders (SIGTERM is forwarded to their sleep) and wait for them. */
async function stop(children: readonly ChildProcess[]): Promise<void> {
  await Promise.all(children.map(async (c) => (c.exitCode === null ? (c.kill('SIGTERM'), once(c, 'exit')) : undefined)));
}

interface Habit {
  /** What the user types with flock, etcdctl or consul. */
  readonly habit: string;
  /** The locksmith words after `locksmith run` (`B` is replaced by the scratch file:// backend). */
  readonly run: readonly string[];
  /** Background holders to start first: their `run` options and lock id. */
  readonly held?: readonly (readonly string[])[];
  readonly env?: Record<string, string>;
  readonly stdout: string | RegExp;
  readonly code: number;
  /** Expected stderr (default: anything). */
  readonly stderr?: string | RegExp;
}

const HABITS: readonly Habit[] = [
  { habit: 'flock LOCK echo -n hi', run: ['-b', 'B', 'habit:a', 'echo', '-n', 'hi'], stdout: 'hi', code: 0 },
  { habit: 'flock LOCK -- echo -n hi', run: ['-b', 'B', 'habit:a', '--', 'echo', '-n', 'hi'], stdout: 'hi', code: 0 },
  { habit: "flock LOCK sh -c 'exit 3'", run: ['-b', 'B', 'habit:a', 'sh', '-c', 'exit 3'], stdout: '', code: 3 },
  { habit: "flock LOCK -c 'echo $((1+2))'", run: ['-b', 'B', 'habit:a', '-c', 'echo $((1+2))'], stdout: '3\n', code: 0 },
  { habit: 'flock -n LOCK true (held)', run: ['-b', 'B', '-n', 'habit:held', 'true'], held: [['habit:held']], stdout: '', code: 1 },
  {
    habit: 'flock -n -E 9 LOCK true (held)',
    run: ['-b', 'B', '-n', '-E', '9', 'habit:held', 'true'],
    held: [['habit:held']],
    stdout: '',
    code: 9,
  },
  {
    habit: 'flock -w 0.5 LOCK true (held)',
    run: ['-b', 'B', '-w', '0.5', 'habit:held', 'true'],
    held: [['habit:held']],
    stdout: '',
    code: 1,
  },
  {
    habit: 'flock -n -q LOCK true (held): nothing on stderr',
    run: ['-b', 'B', '-nq', 'habit:held', 'true'],
    held: [['habit:held']],
    stdout: '',
    stderr: '',
    code: 1,
  },
  {
    habit: 'flock -s -n LOCK (beside a reader)',
    run: ['-b', 'B', '-s', '-n', 'habit:rw', 'echo', 'r'],
    held: [['-s', 'habit:rw']],
    stdout: 'r\n',
    code: 0,
  },
  {
    habit: 'flock -x -n LOCK (beside a reader)',
    run: ['-b', 'B', '-x', '-n', 'habit:rw', 'true'],
    held: [['-s', 'habit:rw']],
    stdout: '',
    code: 1,
  },
  { habit: 'flock LOCK cmd, no backend (file:// default)', run: ['habit:default', 'echo', 'ok'], stdout: 'ok\n', code: 0 },
  {
    habit: 'etcdctl lock --ttl 10 NAME cmd',
    run: ['-b', 'B', '--ttl', '10', 'habit:e', 'printenv', 'LOCKSMITH_LOCK_ID'],
    stdout: 'habit:e\n',
    code: 0,
  },
  {
    habit: 'ETCDCTL_ENDPOINTS=… etcdctl lock NAME cmd',
    run: ['habit:e', 'printenv', 'LOCKSMITH_LOCK_ID'],
    env: { LOCKSMITH_BACKEND: 'B' },
    stdout: 'habit:e\n',
    code: 0,
  },
  {
    habit: 'etcdctl lock NAME cmd: the token for fencing',
    run: ['-b', 'B', 'habit:e', 'printenv', 'LOCKSMITH_TOKEN'],
    stdout: /^\d+\n$/,
    code: 0,
  },
  {
    habit: 'consul lock -n 2 PREFIX cmd (1 of 2 taken)',
    run: ['-b', 'B', '--permits', '2', '-n', 'habit:s', 'echo', 's'],
    held: [['--permits', '2', 'habit:s']],
    stdout: 's\n',
    code: 0,
  },
  {
    habit: 'consul lock -n 2 PREFIX cmd (2 of 2 taken)',
    run: ['-b', 'B', '--permits', '2', '-n', 'habit:s', 'true'],
    held: [
      ['--permits', '2', 'habit:s'],
      ['--permits', '2', 'habit:s'],
    ],
    stdout: '',
    code: 1,
  },
  {
    habit: 'consul lock -timeout 1s PREFIX cmd (held)',
    run: ['-b', 'B', '--timeout', '1s', 'habit:held', 'true'],
    held: [['habit:held']],
    stdout: '',
    code: 1,
  },
  {
    habit: 'no driver installed: says what to npm i (78)',
    run: ['-b', 'redis://127.0.0.1:1', 'habit:d', 'true'],
    stdout: '',
    stderr: /npm i ioredis/,
    code: 78,
  },
  { habit: 'a typo in an option (64)', run: ['-b', 'B', '--nonblok', 'habit:a', 'true'], stdout: '', code: 64 },
];

test('flock / etcdctl / consul habits → locksmith run from the packed tarball → output and exit status', { timeout: 600_000 }, async () => {
  for (const h of HABITS) {
    const held: ChildProcess[] = [];
    try {
      for (const args of h.held ?? []) held.push(await holder(...args));
      const env = Object.fromEntries(Object.entries(h.env ?? {}).map(([k, v]) => [k, v === 'B' ? backend : v]));
      const r = await locksmith(['run', ...h.run.map((w) => (w === 'B' ? backend : w))], env);
      const where = `${h.habit}: locksmith run ${h.run.join(' ')}\n${r.stderr}`;
      assert.equal(r.code, h.code, where);
      if (typeof h.stdout === 'string') assert.equal(r.stdout, h.stdout, where);
      else assert.match(r.stdout, h.stdout, where);
      if (typeof h.stderr === 'string') assert.equal(r.stderr, h.stderr, where);
      else if (h.stderr) assert.match(r.stderr, h.stderr, where);
    } finally {
      await stop(held);
    }
  }
});

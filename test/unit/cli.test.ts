import assert from 'node:assert/strict';
import { test } from 'node:test';
import { EventEmitter } from 'node:events';
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { createLocker } from '../../src/index.js';
import { runDemo } from '../../src/cli/demo.js';
import { main } from '../../src/cli/main.js';
import { EXIT } from '../../src/cli/exit.js';
import { chooseBackend, DEFAULT_BACKEND } from '../../src/cli/backend.js';
import { runWithLock, type RunOptions } from '../../src/cli/run.js';
import { describeOwner } from '../../src/cli/status.js';
import { FaultyBackend } from './faulty.js';
import { parseDuration } from '../../src/cli/duration.js';
import { jainIndex, longestStreak, percentiles } from '../../src/bench-matrix/index.js';
import { waitingOn } from '../helpers.js';

/** Run the CLI and capture what it prints as results. */
async function stdoutOf(argv: string[]): Promise<{ code: number; out: string }> {
  const chunks: string[] = [];
  const code = await main(argv, (text) => void chunks.push(text));
  return { code, out: chunks.join('') };
}

const base: Omit<RunOptions, 'lockId' | 'command'> = {
  ttlMs: 10_000,
  waitMs: undefined,
  fair: false,
  graceMs: 200,
  say: () => undefined,
};

test('the demo: without a lock the balance goes negative, with a lock it never does', async () => {
  const lines: string[] = [];
  const { unlocked, locked } = await runDemo({ write: (l) => lines.push(l), scenes: false });
  assert.ok(unlocked.finalBalance < 0);
  assert.equal(locked.finalBalance, 50);
  assert.equal(locked.withdrawals, 1);
  assert.equal(locked.tokens.length, 1);
  assert.ok(lines.some((l) => l.includes('fencing tokens')));
});

test('the demo: ATM processes on file:// never overdraw; a paused holder is refused by its stale token', async () => {
  const lines: string[] = [];
  // A private TMPDIR, so that the clean-up check sees only this run's temp dirs.
  const scratch = await mkdtemp(join(tmpdir(), 'cli-demo-'));
  const saved = process.env.TMPDIR;
  process.env.TMPDIR = scratch;
  const { processes, paused } = await runDemo({ write: (l) => lines.push(l) }).finally(() => {
    if (saved === undefined) delete process.env.TMPDIR;
    else process.env.TMPDIR = saved;
  });
  const left = (await readdir(scratch)).filter((f) => f.startsWith('locksmith-demo-'));
  await rm(scratch, { recursive: true, force: true });
  assert.deepEqual(left, [], 'the demo removed its temp dirs');
  assert.ok(processes, 'the processes scene ran');
  assert.equal(processes.finalBalance, 50);
  assert.equal(processes.withdrawals, 3);
  assert.equal(processes.refusals, 3);
  assert.deepEqual(processes.tokens, [1n, 2n, 3n, 4n, 5n, 6n]);
  assert.equal(lines.filter((l) => / ATM \d \(pid \d+\) token \d: (paid|refused)/.test(l)).length, 6);
  assert.ok(lines.some((l) => l.includes('final balance: 50   <-- never negative; tokens grow')));
  if (process.platform === 'win32') return;
  assert.ok(paused, 'the paused holder scene ran');
  assert.ok(paused.newToken > paused.staleToken);
  assert.equal(paused.refusal?.code, 'STALE_TOKEN');
  assert.equal(paused.value, 'final by B');
  assert.ok(lines.some((l) => /A resumes and writes with its old token \d+: refused, StaleTokenError/.test(l)));
});

test('locksmith run passes the token, lock id and owner to the child and exits with its status', async () => {
  const code = await main([
    'run',
    'cli:run',
    '--backend',
    'memory://cli',
    '--',
    'sh',
    '-c',
    'test -n "$LOCKSMITH_TOKEN" && test "$LOCKSMITH_LOCK_ID" = cli:run && test -n "$LOCKSMITH_OWNER" && exit 7',
  ]);
  assert.equal(code, 7);
});

test('locksmith run without --backend or LOCKSMITH_BACKEND uses file:// (never memory://); LOCKSMITH_BACKEND is read', async () => {
  assert.equal(DEFAULT_BACKEND, 'file://');
  assert.equal(chooseBackend(undefined), 'file://');
  assert.equal(chooseBackend('memory://x'), 'memory://x');
  const previous = process.env.LOCKSMITH_BACKEND;
  try {
    process.env.LOCKSMITH_BACKEND = 'memory://cli-env';
    assert.equal(await main(['run', 'x', '--', 'true']), 0);
  } finally {
    if (previous === undefined) delete process.env.LOCKSMITH_BACKEND;
    else process.env.LOCKSMITH_BACKEND = previous;
  }
});

test('locksmith run -n, --wait 0 and --wait N exit 1 (or --conflict-exit-code) when another holds the lock', async () => {
  const other = createLocker('memory://cli');
  const lock = await other.lock('cli:busy');
  const args = (...extra: string[]): string[] => ['run', 'cli:busy', '--backend', 'memory://cli', ...extra, '--', 'true'];
  assert.equal(await main(args('-n')), EXIT.CONFLICT);
  assert.equal(await main(args('--nonblock')), EXIT.CONFLICT);
  assert.equal(await main(args('--wait', '0')), EXIT.CONFLICT);
  assert.equal(await main(args('--wait', '0.2')), EXIT.CONFLICT);
  assert.equal(await main(args('--wait', '200ms', '-E', '3')), 3);
  await lock.release();
  assert.equal(await main(args('--wait', '0')), 0);
  await other.close();
});

test('locksmith run --shared and --permits take read and semaphore holds', async () => {
  const other = createLocker('memory://cli-kinds');
  const reader = await other.readWriteLock('cli:rw').read();
  const args = (id: string, ...extra: string[]): string[] => [
    'run',
    id,
    '--backend',
    'memory://cli-kinds',
    '--wait',
    '0',
    ...extra,
    '--',
    'true',
  ];
  assert.equal(await main(args('cli:rw', '--shared')), 0, 'a reader beside a reader');
  assert.equal(await main(args('cli:rw')), EXIT.CONFLICT, 'no writer beside a reader');
  await reader.release();
  const permit = await other.semaphore('cli:sem', { permits: 2 }).acquire();
  assert.equal(await main(args('cli:sem', '--permits', '2')), 0, 'the second of two permits');
  const second = await other.semaphore('cli:sem', { permits: 2 }).acquire();
  assert.equal(await main(args('cli:sem', '--permits', '2')), EXIT.CONFLICT, 'both permits taken');
  // Another size than the holders' is a PermitsMismatchError (INVALID_ARGUMENT), not a conflict.
  assert.equal(await main(args('cli:sem', '--permits', '1')), EXIT.USAGE);
  assert.equal(await main(args('cli:sem', '--permits', '2', '--shared')), EXIT.USAGE);
  await Promise.all([permit.release(), second.release()]);
  await other.close();
});

test('SIGTERM while waiting abandons the wait (no queue entry left) and exits 143; SIGINT exits 130', async () => {
  for (const [sig, status] of [
    ['SIGTERM', 143],
    ['SIGINT', 130],
  ] as const) {
    const table = `memory://cli-signal-${sig}`;
    const holder = createLocker(table);
    const held = await holder.lock('cli:sig');
    const locker = createLocker(table);
    const signals = new EventEmitter();
    const waiting = waitingOn(locker, 'cli:sig');
    const run = runWithLock(locker, { ...base, lockId: 'cli:sig', command: ['true'], fair: true, signals });
    await waiting;
    signals.emit(sig);
    assert.equal(await run, status);
    assert.equal((await holder.inspect('cli:sig')).waiters, 0, 'the queue entry went with the wait');
    await held.release();
    await Promise.all([locker.close(), holder.close()]);
  }
});

test('signals sent to locksmith run are forwarded to the command', async () => {
  const locker = createLocker('memory://cli-forward');
  const signals = new EventEmitter();
  const run = runWithLock(locker, {
    ...base,
    lockId: 'cli:fwd',
    command: ['sh', '-c', 'trap "exit 42" USR1; while true; do sleep 0.05; done'],
    signals,
  });
  await sleep(300);
  signals.emit('SIGUSR1');
  assert.equal(await run, 42);
  await locker.close();
});

test('locksmith run stops the child when the lock is lost and exits 76', async () => {
  // A backend that stops answering renewals: the 300 ms lease runs out while `sleep 30` runs.
  const backend = new FaultyBackend('cli-lost');
  backend.extendError = new Error('backend unreachable');
  const locker = createLocker(backend, { ttlMs: 300 });
  const started = performance.now();
  const code = await runWithLock(locker, { ...base, lockId: 'cli:lost', command: ['sleep', '30'], ttlMs: 300, waitMs: 0 });
  assert.equal(code, EXIT.LOST);
  assert.ok(performance.now() - started < 25_000, 'the child was stopped, not waited for');
  await locker.close();
});

test('locksmith rejects bad arguments with the usage status (a bad backend URL is configuration, 78)', async () => {
  assert.equal(await main(['run', 'x', '--backend', 'memory://', '--ttl', 'ten', '--', 'true']), EXIT.USAGE);
  assert.equal(await main(['run', 'x', '--backend', 'nope://', '--', 'true']), EXIT.CONFIG);
  assert.equal(await main(['run', 'x', '--backend', 'memory://', '-E', '300', '--', 'true']), EXIT.USAGE);
  assert.equal(await main(['frobnicate']), EXIT.USAGE);
});

test('locksmith --version prints the package version', async () => {
  const { code, out } = await stdoutOf(['--version']);
  assert.equal(code, 0);
  assert.match(out, /^\d+\.\d+\.\d+/);
});

test('locksmith --help lists the exit statuses and the LOCKSMITH_ variables', async () => {
  const { out } = await stdoutOf(['--help']);
  for (const word of ['Exit statuses', 'LOCKSMITH_BACKEND', 'LOCKSMITH_TOKEN', 'LOCKSMITH_OWNER', '76', '78', '143']) {
    assert.ok(out.includes(word), `--help mentions ${word}`);
  }
});

test('locksmith status: the holder (pid and host as run records them) and token; exit 0 held, 1 free', async () => {
  const locker = createLocker('memory://cli-status');
  const lock = await locker.lock('st', { owner: 'build-7:4242:abcdef' });
  const held = await stdoutOf(['status', 'st', '--backend', 'memory://cli-status']);
  assert.equal(held.code, 0);
  assert.match(held.out, /holder: pid 4242 on build-7 \(mutex\), token \d+/);
  const json = await stdoutOf(['status', 'st', '--backend', 'memory://cli-status', '--json']);
  const state = JSON.parse(json.out) as { held: boolean; holders: { token: string; holder: string }[] };
  assert.equal(state.holders[0]?.token, String(lock.token));
  assert.equal(state.held, true);
  await lock.release();
  assert.equal((await stdoutOf(['status', 'st', '--backend', 'memory://cli-status'])).code, EXIT.CONFLICT);
  await locker.close();
  assert.equal(describeOwner('not-a-run-owner'), 'not-a-run-owner');
});

test('durations: units, or a bare number of seconds; 0 only where allowed', () => {
  assert.equal(parseDuration('10s', 'x'), 10_000);
  assert.equal(parseDuration('250ms', 'x'), 250);
  assert.equal(parseDuration('1.5m', 'x'), 90_000);
  assert.equal(parseDuration('10', 'x'), 10_000);
  assert.equal(parseDuration('0.5', 'x'), 500);
  assert.equal(parseDuration('0', 'x', true), 0);
  assert.throws(() => parseDuration('0s', 'x'), /> 0/);
  assert.throws(() => parseDuration('ten', 'x'), /duration/);
});

test('benchmark statistics: Jain index, longest streak, percentiles', () => {
  assert.equal(jainIndex([5, 5, 5, 5]), 1);
  assert.equal(jainIndex([20, 0, 0, 0]), 0.25);
  assert.equal(longestStreak([1, 1, 2, 1, 1, 1, 3]), 3);
  const p = percentiles([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
  assert.equal(p.p50, 5);
  assert.equal(p.p99, 10);
});

test('locksmith bench runs the matrix on memory:// and prints JSON', async () => {
  const { code, out } = await stdoutOf([
    'bench',
    '--iterations',
    '5',
    '--contenders',
    '1,2',
    '--duration',
    '100ms',
    '--keys',
    '50',
    '--waiters',
    '20',
    '--json',
  ]);
  assert.equal(code, 0);
  const r = JSON.parse(out) as { hot: { contenders: number }[]; keys: { keys: number }; waiters: { waiters: number } };
  assert.deepEqual(
    r.hot.map((h) => h.contenders),
    [1, 2],
  );
  assert.equal(r.keys.keys, 50);
  assert.equal(r.waiters.waiters, 20);
});

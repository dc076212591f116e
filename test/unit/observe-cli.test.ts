import assert from 'node:assert/strict';
import { test } from 'node:test';
import { hostname } from 'node:os';
import { createLocker, type LockInfo } from '../../src/index.js';
import { main } from '../../src/cli/main.js';
import { EXIT } from '../../src/cli/exit.js';
import { formatSpan, formatTable, runLs } from '../../src/cli/ls.js';
import { formatStatus } from '../../src/cli/status.js';
import { eventually, lossOf, waitingOn } from '../helpers.js';

async function stdoutOf(argv: string[]): Promise<{ code: number; out: string }> {
  const chunks: string[] = [];
  const code = await main(argv, (text) => void chunks.push(text));
  return { code, out: chunks.join('') };
}

const NOW = 1_800_000_000_000;
const listing: LockInfo[] = [
  {
    lockId: 'jobs:nightly',
    kind: 'mutex',
    lastToken: 41n,
    holders: [
      {
        ownerId: 'o1',
        kind: 'mutex',
        token: 41n,
        count: 1,
        identity: { host: 'web-3', pid: 812, name: 'billing', meta: { secret: 's3cr3t' } },
        acquiredAt: NOW - 125_000,
        leaseEndsAt: NOW + 8_500,
      },
    ],
    waiters: 2,
    queue: [],
  },
  {
    lockId: 'pool',
    kind: 'semaphore',
    holders: [
      { ownerId: 'a', kind: 'semaphore', token: 7n, count: 1, identity: { host: 'h1', pid: 1, name: 'w' }, expiresInMs: 900 },
      { ownerId: 'b', kind: 'semaphore', token: 8n, count: 3 },
      { ownerId: 'c', kind: 'semaphore', token: 9n, count: 1, weight: 4 },
    ],
    waiters: 0,
    queue: [],
  },
  { lockId: 'free-but-waited', kind: 'rw', holders: [], waiters: 1, queue: [] },
];

test('ls table: lock, kind, holder name pid@host, held for, lease left, token, waiters; never meta', () => {
  const text = formatTable(listing, NOW);
  const [head, first, second, third, weighted, fourth] = text.trimEnd().split('\n');
  assert.match(head ?? '', /^LOCK\s+KIND\s+HOLDER\s+HELD FOR\s+LEASE LEFT\s+TOKEN\s+WAITERS$/);
  assert.match(first ?? '', /^jobs:nightly\s+mutex\s+billing 812@web-3\s+2m05s\s+8\.5s\s+41\s+2$/);
  assert.match(second ?? '', /^pool\s+semaphore\s+w 1@h1\s+-\s+900ms\s+7\s+0$/);
  assert.match(third ?? '', /^\s+b ×3\s+-\s+-\s+8$/);
  assert.match(weighted ?? '', /^\s+c \(4 permits\)\s+-\s+-\s+9$/);
  assert.match(fourth ?? '', /^free-but-waited\s+rw\s+-\s+-\s+-\s+-\s+1$/);
  assert.ok(!text.includes('s3cr3t'));
  const pool = formatStatus(listing[1] as LockInfo, false);
  assert.match(pool, /holder: c \(semaphore\), token 9, 4 permits\n/);
  assert.doesNotMatch(pool, /token 7, expires in 900 ms, \d+ permits/);
  assert.deepEqual([formatSpan(12), formatSpan(3_210), formatSpan(3_725_000), formatSpan(undefined)], ['12ms', '3.2s', '1h02m', '-']);
});

test('locksmith ls --json: a holder and a waiter of another locker with host, pid and name', async () => {
  const url = 'memory://cli-ls';
  const holder = createLocker(url, { name: 'cli-holder' });
  const waiter = createLocker(url, { name: 'cli-waiter' });
  const lock = await holder.lock('ls:1');
  const queued = waitingOn(waiter, 'ls:1');
  const ctl = new AbortController();
  const waiting = waiter.lock('ls:1', { fair: true, signal: ctl.signal });
  await queued;
  const { code, out } = await stdoutOf(['ls', 'ls:', '--backend', url, '--json']);
  assert.equal(code, 0);
  const doc = JSON.parse(out) as { locks: LockInfo[] };
  const [l] = doc.locks;
  assert.equal(l?.holders[0]?.identity?.name, 'cli-holder');
  assert.equal(l.holders[0].identity.host, hostname());
  assert.equal(l.holders[0].token, String(lock.token) as unknown as bigint);
  assert.equal(l.queue[0]?.identity?.name, 'cli-waiter');
  const table = await stdoutOf(['ls', '--backend', url]);
  assert.match(table.out, new RegExp(`ls:1\\s+mutex\\s+cli-holder ${process.pid}@`));
  const status = await stdoutOf(['status', 'ls:1', '--backend', url]);
  assert.match(status.out, new RegExp(`1\\. cli-waiter ${process.pid}@\\S+ \\(mutex, fair, since `));
  ctl.abort(new Error('done'));
  await assert.rejects(waiting, /done/);
  await lock.release();
  await Promise.all([holder.close(), waiter.close()]);
});

test('locksmith break: ends the hold (exit 0), then the lock is free (exit 1); ls without a backend lists the default file:// one', async () => {
  const url = 'memory://cli-break';
  const holder = createLocker(url, { ttlMs: 300 });
  const lock = await holder.lock('br:1');
  const broke = await stdoutOf(['break', 'br:1', '--reason', 'deploy stuck', '--backend', url]);
  assert.equal(broke.code, 0);
  assert.match(broke.out, /br:1: 1 hold\(s\) ended by .+: deploy stuck/);
  await lossOf(lock);
  assert.equal((await stdoutOf(['break', 'br:1', '--reason', 'again', '--backend', url])).code, EXIT.FREE);
  assert.equal((await stdoutOf(['break', 'br:1', '--backend', url])).code, EXIT.USAGE, '--reason is required');
  const saved = process.env.LOCKSMITH_BACKEND;
  delete process.env.LOCKSMITH_BACKEND;
  const plain = await stdoutOf(['ls', 'no-such-prefix/', '--json']);
  assert.equal(plain.code, 0);
  assert.deepEqual((JSON.parse(plain.out) as { locks: unknown[] }).locks, []);
  if (saved !== undefined) process.env.LOCKSMITH_BACKEND = saved;
  await holder.close();
});

test('ls --watch off a terminal streams JSON lines of changes until stopped', async () => {
  const url = 'memory://cli-watch';
  const locker = createLocker(url);
  const lines: string[] = [];
  const stop = new AbortController();
  const running = runLs(locker, {
    prefix: 'lw:',
    json: false,
    watch: true,
    tty: false,
    everyMs: 20,
    out: (t) => lines.push(t),
    signal: stop.signal,
  });
  const other = createLocker(url, { name: 'cli-watched' });
  const lock = await other.lock('lw:1');
  // A hold that begins and ends between two polls is not seen: release once it was.
  await eventually('the acquired line', () => lines.some((l) => l.includes('"acquired"')));
  await lock.release();
  await eventually('acquired and released lines', () => lines.some((l) => l.includes('"released"')));
  stop.abort();
  await running;
  const events = lines.map((l) => JSON.parse(l) as { type: string; identity?: { name: string }; token: string });
  assert.equal(events.find((e) => e.type === 'acquired')?.identity?.name, 'cli-watched');
  assert.equal(events.find((e) => e.type === 'released')?.token, String(lock.token));
  await Promise.all([locker.close(), other.close()]);
});

test('ls --watch on a terminal redraws the whole table each round until stopped', async () => {
  const url = 'memory://cli-redraw';
  const locker = createLocker(url);
  const lock = await locker.lock('rd:1');
  const frames: string[] = [];
  const stop = new AbortController();
  const running = runLs(locker, {
    prefix: 'rd:',
    json: false,
    watch: true,
    tty: true,
    everyMs: 10,
    out: (t) => frames.push(t),
    signal: stop.signal,
  });
  await eventually('two frames', () => frames.length >= 2);
  stop.abort();
  await running;
  for (const f of frames) {
    assert.ok(f.startsWith('\x1b[H\x1b[2J'), 'each frame clears the screen first');
    assert.match(f, /rd:1\s+mutex/);
  }
  await lock.release();
  await locker.close();
});

/**
 * Seeing the file backend's locks through the seam (`list`, `inspect`, `forceRelease`):
 * holders and waiters of other processes with their identities, paging with a cursor while
 * locks come and go, odd ids, prefixes, bad cursors, and breaking a lock on purpose.
 */
import assert from 'node:assert/strict';
import { hostname } from 'node:os';
import { after, test } from 'node:test';
import { createLocker, InvalidArgumentError, LockLostError } from '../../src/index.js';
import type { AcquireRequest, Grant, ListPage, LockState } from '../../src/backend.js';
import { FileBackend, prepareDirectory, type FileTicket } from '../../src/backends/file/index.js';
import { decodeIdentity } from '../../src/observe/identity.js';
import { eventually, listSeam, seamRequest } from '../helpers.js';
import { exited, lockDirectory, nextMessage, spawnChild } from './helpers.js';

const T = { timeout: 120_000 };
const { dir, url } = lockDirectory('file-observe');
prepareDirectory(dir, false);

/** The backend of a locker on the test directory, as the core sees it. */
async function seam(): Promise<FileBackend> {
  const locker = createLocker(url);
  after(() => locker.close());
  const backend = await locker.backend();
  assert.ok(backend instanceof FileBackend);
  return backend;
}

let owners = 0;

/**
 * Hold `lockId` through the seam (one attempt, a fresh owner and a lease far longer than any
 * test, unless `over` says otherwise: a lease running out under load would change what is listed).
 */
async function hold(b: FileBackend, lockId: string, over: Partial<AcquireRequest<FileTicket>> = {}): Promise<Grant<undefined>> {
  const result = await b.tryAcquire(seamRequest<FileTicket>(lockId, `owner-${++owners}`, { wait: false, ttlMs: 600_000, ...over }));
  assert.ok(result.granted, `${lockId} granted`);
  return result.grant;
}

function page(b: FileBackend, prefix: string, limit: number, cursor?: string): Promise<ListPage> {
  return b.list({ prefix, limit, cursor, signal: new AbortController().signal });
}

/** Every page of `prefix` with `limit` (test/helpers.ts). */
const listAll = async (b: FileBackend, prefix: string, limit = 1_000): Promise<LockState[]> => (await listSeam(b, prefix, limit)).locks;

const idsOf = async (b: FileBackend, prefix: string): Promise<string[]> => (await listAll(b, prefix)).map((l) => l.lockId).sort();

test('a holder and a waiter in two other processes are listed with their identities', T, async () => {
  const b = await seam();
  const lockId = 'obs:proc/one';
  const holder = spawnChild({ mode: 'hold', url, lockId, ttlMs: 30_000, name: 'holder-app' });
  const held = await nextMessage(holder, 'held');
  const waiter = spawnChild({ mode: 'hold', url, lockId, ttlMs: 30_000, name: 'waiter-app' });
  const waiting = await nextMessage(waiter, 'waiting');
  const listed = await page(b, 'obs:proc/', 10);
  assert.equal(listed.cursor, undefined);
  assert.deepEqual(
    listed.locks.map((l) => l.lockId),
    [lockId],
  );
  const [lock] = listed.locks;
  const [h] = lock?.holders ?? [];
  assert.ok(lock && h);
  assert.deepEqual(decodeIdentity(h.identity), { host: hostname(), pid: held.pid, name: 'holder-app' });
  assert.equal(h.token, BigInt(held.token));
  assert.equal(h.count, 1);
  assert.equal(lock.lastToken, h.token);
  const now = Date.now();
  assert.ok(h.acquiredAt !== undefined && h.leaseEndsAt !== undefined && h.acquiredAt <= now && now < h.leaseEndsAt, 'engine-clock times');
  assert.equal(lock.waiters, 1);
  const [w] = lock.queue ?? [];
  assert.ok(w);
  assert.deepEqual(decodeIdentity(w.identity), { host: hostname(), pid: waiting.pid, name: 'waiter-app' });
  assert.equal(w.kind, 'mutex');
  assert.equal(w.fair, false);
  assert.ok(w.ownerId !== '' && w.ownerId !== h.ownerId);
  assert.ok(w.since !== undefined && w.since >= h.acquiredAt && w.since <= now, 'queued after the hold began');
  const inspected = await b.inspect(lockId);
  const who = (s: LockState): unknown => [
    s.holders.map((x) => [x.ownerId, x.identity, x.token]),
    s.queue?.map((x) => [x.ownerId, x.identity]),
  ];
  assert.deepEqual(who(inspected), who(lock), 'inspect shows the same');
  // The holder lets go: the waiter holds, nobody waits; then it lets go too and the lock leaves the list.
  holder.send('release');
  await nextMessage(holder, 'released');
  await nextMessage(waiter, 'held');
  const [after] = (await page(b, 'obs:proc/', 10)).locks;
  assert.deepEqual(decodeIdentity(after?.holders[0]?.identity)?.name, 'waiter-app');
  assert.deepEqual(after?.queue, []);
  waiter.send('release');
  await nextMessage(waiter, 'released');
  assert.deepEqual(await page(b, 'obs:proc/', 10), { locks: [], cursor: undefined });
  holder.kill('SIGKILL');
  waiter.kill('SIGKILL');
  await Promise.all([exited(holder), exited(waiter)]);
});

test('the identity is stored verbatim with every hold and queue entry', T, async () => {
  const b = await seam();
  const identity = '{"h":"hôst \\"q\\"","p":7,"n":"verbatim","m":{"k":[1,"ü"]}}';
  const other = '{"h":"x","p":8,"n":"w"}';
  await hold(b, 'obs:verbatim', { identity });
  const queued = await b.tryAcquire(seamRequest<FileTicket>('obs:verbatim', 'queued-owner', { identity: other, fair: true }));
  assert.equal(queued.granted, false);
  const s = await b.inspect('obs:verbatim');
  assert.equal(s.holders[0]?.identity, identity);
  assert.deepEqual(s.queue, [{ ownerId: 'queued-owner', kind: 'mutex', fair: true, identity: other, since: s.queue?.[0]?.since }]);
  assert.equal(typeof s.queue?.[0]?.since, 'number');
});

test('paging over 130 locks with limit 7 sees each exactly once while locks come and go', T, async () => {
  const b = await seam();
  const ids = Array.from({ length: 126 }, (_, i) => `page:${String(i).padStart(3, '0')}`);
  // Hashed ids (over 100 bytes) sort apart from the spelled-out ones.
  ids.push(...Array.from({ length: 4 }, (_, i) => `page:${i}:${'long'.repeat(30)}`));
  for (const id of ids) await hold(b, id);
  // Idle ids (a state file kept for its token) are interleaved and never listed.
  for (let i = 0; i < 20; i++) await b.release(await hold(b, `page:${String(i * 6).padStart(3, '0')}:idle`));
  const seen = new Map<string, number>();
  const churn: Grant<undefined>[] = [];
  let cursor: string | undefined;
  let pages = 0;
  do {
    const p = await page(b, 'page:', 7, cursor);
    assert.ok(p.locks.length <= 7, `page of ${p.locks.length}`);
    for (const l of p.locks) seen.set(l.lockId, (seen.get(l.lockId) ?? 0) + 1);
    cursor = p.cursor;
    pages += 1;
    // Between pages, locks appear before and after the cursor, and earlier ones go.
    churn.push(await hold(b, `page:!${pages}`), await hold(b, `page:~${pages}`));
    while (churn.length > 4) await b.release(churn.shift()!);
  } while (cursor !== undefined);
  for (const id of ids) assert.equal(seen.get(id), 1, id);
  for (const [id, n] of seen) assert.equal(n, 1, `${id} seen ${n} times`);
  assert.ok(pages >= Math.ceil(ids.length / 7), `${pages} pages`);
});

test('a released lock leaves the list; so does one whose lease ran out', T, async () => {
  const b = await seam();
  const kept = await hold(b, 'gone:kept');
  await b.release(await hold(b, 'gone:released'));
  await hold(b, 'gone:expired', { ttlMs: 50 });
  await eventually('the expired lease to leave the list', async () => (await idsOf(b, 'gone:')).length === 1);
  assert.deepEqual(await idsOf(b, 'gone:'), ['gone:kept']);
  const released = await b.inspect('gone:released');
  assert.deepEqual(released.holders, []);
  assert.equal(released.lastToken, 1n, 'its token counter is kept');
  await b.release(kept);
  assert.deepEqual(await idsOf(b, 'gone:'), []);
});

test('odd ids (quotes, slashes, unicode, 1 KB) list as themselves', T, async () => {
  const b = await seam();
  const odd = ['odd/"q"', "odd/it's", 'odd/a/b/../c', 'odd/\\', 'odd/ ', 'odd/é', 'odd/e\u0301', 'odd/😀', `odd/${'ü'.repeat(510)}`];
  assert.equal(Buffer.byteLength(odd.at(-1) ?? ''), 1024);
  for (const id of odd) await hold(b, id);
  assert.deepEqual(await idsOf(b, 'odd/'), [...odd].sort());
  assert.deepEqual(await idsOf(b, 'odd/e'), ['odd/e\u0301'], 'a prefix is on the id, not on its bytes');
  assert.deepEqual(await idsOf(b, 'odd/ü'), [odd.at(-1)], 'a hashed id is matched on the id it stores');
  assert.deepEqual(await idsOf(b, 'odd/😀'), ['odd/😀']);
});

test('a prefix keeps exactly the ids that start with it, spelled out or hashed', T, async () => {
  const b = await seam();
  const long = `pfx:a:${'z'.repeat(120)}`;
  for (const id of ['pfx:a:1', 'pfx:a:2', 'pfx:ab', 'pfx:b', long, 'pfy:a:1']) await hold(b, id);
  assert.deepEqual(await idsOf(b, 'pfx:a:'), ['pfx:a:1', 'pfx:a:2', long]);
  assert.deepEqual(await idsOf(b, 'pfx:a'), ['pfx:a:1', 'pfx:a:2', long, 'pfx:ab']);
  assert.deepEqual(await idsOf(b, 'pfx:'), ['pfx:a:1', 'pfx:a:2', long, 'pfx:ab', 'pfx:b']);
  assert.deepEqual(await page(b, 'pfz', 5), { locks: [], cursor: undefined });
  const all = await idsOf(b, '');
  for (const id of ['pfx:a:1', long, 'pfy:a:1']) assert.ok(all.includes(id), id);
});

test('idle ids cost reads but never an unbounded page: a page reads at most limit + 1,000 state files', T, async () => {
  const b = await seam();
  for (let i = 0; i < 1_005; i++) await b.release(await hold(b, `idle:${String(i).padStart(4, '0')}`));
  await hold(b, 'idle:held');
  const first = await page(b, 'idle:', 1);
  assert.deepEqual(first.locks, [], 'the first page stops after 1,001 idle files');
  assert.ok(first.cursor !== undefined, 'and says where to go on');
  const second = await page(b, 'idle:', 1, first.cursor);
  assert.deepEqual(
    second.locks.map((l) => l.lockId),
    ['idle:held'],
  );
  assert.equal(second.cursor, undefined);
});

test('a cursor this backend did not give is an InvalidArgumentError', T, async () => {
  const b = await seam();
  const bad = [
    '',
    'garbage',
    '0',
    'file1.',
    'file1.xzz',
    'file1.x0',
    `file1.h${'0'.repeat(63)}`,
    `file1.x${'ab'.repeat(101)}`,
    'file1.x61/..',
  ];
  for (const cursor of bad) {
    await assert.rejects(page(b, '', 5, cursor), (err: unknown) => {
      assert.ok(err instanceof InvalidArgumentError, String(err));
      assert.equal(err.argument, 'cursor');
      assert.equal(err.code, 'INVALID_ARGUMENT');
      return true;
    });
  }
});

test('forceRelease ends the hold, keeps the waiter queued, and bumps the token', T, async () => {
  const b = await seam();
  const lockId = 'break:seam';
  const broken = await hold(b, lockId);
  const queued = await b.tryAcquire(seamRequest<FileTicket>(lockId, 'next-owner', { fair: true }));
  assert.ok(!queued.granted);
  assert.equal(await b.forceRelease(lockId), 1);
  const s = await b.inspect(lockId);
  assert.deepEqual(s.holders, []);
  assert.deepEqual(
    s.queue?.map((w) => w.ownerId),
    ['next-owner'],
  );
  assert.equal(s.lastToken, broken.token + 1n);
  await assert.rejects(b.extend(broken, 10_000), LockLostError);
  assert.equal(await b.release(broken), false);
  const next = await b.tryAcquire(seamRequest<FileTicket>(lockId, 'next-owner', { fair: true, ticket: queued.contended.ticket }));
  assert.ok(next.granted);
  assert.ok(next.grant.token > broken.token + 1n, `${next.grant.token} > ${broken.token} + 1`);
});

test('forceRelease counts holds (not re-entries), and a free lock is left as it was', T, async () => {
  const b = await seam();
  await hold(b, 'break:re', { ownerId: 'same', freshOwner: false });
  await hold(b, 'break:re', { ownerId: 'same', freshOwner: false });
  assert.equal(await b.forceRelease('break:re'), 1);
  for (let i = 0; i < 3; i++) await hold(b, 'break:sem', { kind: 'semaphore', permits: 3 });
  assert.equal(await b.forceRelease('break:sem'), 3);
  assert.equal(await b.forceRelease('break:never'), 0);
  assert.deepEqual(await b.inspect('break:never'), { lockId: 'break:never', holders: [], waiters: 0, queue: [] });
});

test("a holder in another process loses the lock at its next renewal; the next token is above the broken one's + 1", T, async () => {
  const b = await seam();
  const lockId = 'break:proc';
  // Renewed every second or so: long enough that load does not lose it before it is broken.
  const holder = spawnChild({ mode: 'hold', url, lockId, ttlMs: 3_000 });
  const held = await nextMessage(holder, 'held');
  assert.equal(await b.forceRelease(lockId), 1);
  await eventually('the holder to see its lock lost', async () => {
    const reply = nextMessage(holder, 'write');
    holder.send('write');
    return (await reply).lost;
  });
  await using locker = createLocker(url);
  const lock = await locker.lock(lockId, { timeoutMs: 30_000 });
  assert.ok(lock.token > BigInt(held.token) + 1n, `${lock.token} > ${held.token} + 1`);
  await lock.release();
  holder.kill('SIGKILL');
  await exited(holder);
});

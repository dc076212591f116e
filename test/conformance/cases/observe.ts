import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { hostname } from 'node:os';
import { InvalidArgumentError, LockLostError, UnsupportedError, type Locker, type LockInfo, type WatchEvent } from '../../../src/index.js';
import { eventually, lossOf, waitingOn } from '../../helpers.js';
import { T, type SuiteContext } from '../suite.js';
import { expectListedHolder, otherProcessCases } from './processes.js';

/** Every lock under `prefix`, page by page (asserting that no page is larger than `limit`). */
async function listAll(locker: Locker, prefix: string, limit = 100): Promise<LockInfo[]> {
  const all: LockInfo[] = [];
  let cursor: string | undefined;
  do {
    const page = await locker.list({ prefix, limit, ...(cursor === undefined ? {} : { cursor }) });
    assert.ok(page.locks.length <= limit, `a page of ${page.locks.length} > limit ${limit}`);
    all.push(...page.locks);
    cursor = page.cursor;
  } while (cursor !== undefined);
  return all;
}

/** Seeing locks: listing with identities, paging, watching, breaking; docs/observability.md. */
export function observeCases(ctx: SuiteContext): void {
  if (!ctx.observe.list) {
    unsupportedCases(ctx);
    return;
  }
  // Another process where the engine is shared between processes; else another locker.
  if (ctx.target.url === undefined) {
    sameProcessCases(ctx);
    watchCases(ctx);
  } else otherProcessCases(ctx, ctx.target.url);
  listCases(ctx);
  pagingCases(ctx);
  if (ctx.observe.forceRelease) breakCases(ctx);
  badInputCases(ctx);
}

function unsupportedCases({ client, id }: SuiteContext): void {
  test('list, watch and forceRelease reject UnsupportedError on a backend without them', T, async () => {
    const locker = client();
    await assert.rejects(locker.list(), UnsupportedError);
    await assert.rejects(locker.forceRelease(id('x'), { reason: 'test' }), UnsupportedError);
  });
}

function sameProcessCases({ client, id, caps }: SuiteContext): void {
  test('a holder and a waiter of another locker are listed with their identities, times and token', T, async () => {
    const lockId = id('who');
    const holder = client({ name: 'conf-holder', meta: { role: 'holder' } });
    const waiter = client({ name: 'conf-waiter' });
    const lock = await holder.lock(lockId);
    const queued = waitingOn(waiter, lockId);
    const ctl = new AbortController();
    const waiting = waiter.lock(lockId, { signal: ctl.signal, fair: caps.fair });
    await queued;
    const identity = { host: hostname(), pid: process.pid, name: 'conf-holder', meta: { role: 'holder' } };
    await expectListedHolder(client(), lockId, lock.token, identity);
    if (caps.fair) {
      await eventually('the waiter is listed', async () => (await holder.inspect(lockId)).queue.length === 1);
      const w = (await holder.inspect(lockId)).queue[0];
      assert.equal(w?.identity?.name, 'conf-waiter');
      assert.equal(w.identity.pid, process.pid);
    }
    ctl.abort(new Error('enough'));
    await assert.rejects(waiting, /enough/);
    await lock.release();
  });
}

function listCases({ client, id }: SuiteContext): void {
  describe('listing locks', () => {
    test('a released lock leaves the list', T, async () => {
      const lockId = id('gone');
      const locker = client();
      const lock = await locker.lock(lockId);
      assert.deepEqual(
        (await locker.list({ prefix: lockId })).locks.map((l) => l.lockId),
        [lockId],
      );
      await lock.release();
      await eventually('the lock leaves the list', async () => (await locker.list({ prefix: lockId })).locks.length === 0);
    });

    test('odd ids (quotes, slashes, unicode, 1 KB) list as themselves', T, async () => {
      const base = id('odd');
      const ids = [`${base}"'\`quotes`, `${base}/a/b\\c`, `${base}:ünï©ødé✓🔒`, `${base}${'x'.repeat(1024 - Buffer.byteLength(base))}`];
      const locker = client();
      const locks = await Promise.all(ids.map((x) => locker.lock(x)));
      const seen = (await listAll(locker, base, 3)).map((l) => l.lockId);
      assert.deepEqual([...seen].sort(), [...ids].sort());
      await Promise.all(locks.map((l) => l.release()));
    });
  });
}

function pagingCases({ client, id, target }: SuiteContext): void {
  const once = target.listMayRepeat ? 'at least once (SCAN may repeat one after a rehash)' : 'exactly once';
  test(`paging with a cursor over 130 locks sees each ${once}; the prefix keeps others out`, T, async () => {
    const base = id('page');
    const locker = client();
    const ids = Array.from({ length: 130 }, (_, i) => `${base}:${String(i).padStart(3, '0')}`);
    const locks = [];
    for (let i = 0; i < ids.length; i += 26) locks.push(...(await Promise.all(ids.slice(i, i + 26).map((x) => locker.lock(x)))));
    const outside = await locker.lock(`${base}-outside`);
    const listed = (await listAll(locker, `${base}:`, 7)).map((l) => l.lockId);
    const seen = target.listMayRepeat ? [...new Set(listed)] : listed;
    assert.equal(seen.length, ids.length, 'no lock twice, none missing');
    assert.deepEqual([...seen].sort(), ids);
    await Promise.all([...locks, outside].map((l) => l.release()));
  });
}

function watchCases({ client, id }: SuiteContext): void {
  test('watch sees an acquire and a release by another locker, with its identity', T, async () => {
    const lockId = id('watch');
    const ctl = new AbortController();
    const seen: WatchEvent[] = [];
    const done = (async () => {
      for await (const e of client().watch({ prefix: lockId, signal: ctl.signal, everyMs: 50 })) seen.push(e);
    })();
    const other = client({ name: 'conf-watched' });
    const lock = await other.lock(lockId);
    await eventually('acquired is seen', () => seen.some((e) => e.type === 'acquired' && e.token === lock.token));
    await lock.release();
    await eventually('released is seen', () => seen.some((e) => e.type === 'released' && e.token === lock.token));
    ctl.abort();
    await done;
    const acquired = seen.find((e) => e.type === 'acquired');
    assert.equal(acquired?.lockId, lockId);
    assert.equal(acquired.identity?.name, 'conf-watched');
  });
}

function breakCases({ client, id, shortTtl }: SuiteContext): void {
  test("forceRelease ends the hold (the holder's signal aborts at its next renewal) and the next token is higher", T, async () => {
    const lockId = id('break');
    const holder = client({ ttlMs: shortTtl * 2 });
    const lock = await holder.lock(lockId);
    const breaker = client({ name: 'conf-breaker' });
    const broken = new Promise<{ reason: string; by: { name: string }; holds: number }>((resolve) => breaker.once('broken', resolve));
    assert.equal(await breaker.forceRelease(lockId, { reason: 'stuck job' }), 1);
    const event = await broken;
    assert.equal(event.reason, 'stuck job');
    assert.equal(event.by.name, 'conf-breaker');
    assert.equal(event.holds, 1);
    const reason = await lossOf(lock);
    assert.ok(reason instanceof LockLostError);
    const next = await client().lock(lockId, { timeoutMs: 60_000 });
    assert.ok(next.token > lock.token, `token ${next.token} after ${lock.token}`);
    await next.release();
    assert.equal(await breaker.forceRelease(lockId, { reason: 'already free' }), 0);
  });
}

function badInputCases({ client, id }: SuiteContext): void {
  test('bad list, watch and forceRelease input is InvalidArgumentError before anything is sent', T, async () => {
    const locker = client();
    const bad = (argument: string) => (err: unknown) => err instanceof InvalidArgumentError && err.argument === argument;
    await assert.rejects(locker.list({ prefix: 'x'.repeat(1025) }), bad('prefix'));
    await assert.rejects(locker.list({ prefix: 42 as unknown as string }), bad('prefix'));
    for (const limit of [0, -1, 1001, 1.5, Number.NaN]) await assert.rejects(locker.list({ limit }), bad('limit'));
    for (const cursor of ['', 'garbage', 'lsc1.!!!']) await assert.rejects(locker.list({ cursor }), bad('cursor'));
    const foreign = `lsc1.${Buffer.from(JSON.stringify({ b: 'no-such-engine', p: '', c: 'x' })).toString('base64url')}`;
    await assert.rejects(locker.list({ cursor: foreign }), bad('cursor'));
    const base = id('cursor');
    await Promise.all([1, 2, 3].map((i) => locker.lock(`${base}:${i}`)));
    const page = await locker.list({ prefix: base, limit: 1 });
    assert.ok(page.cursor !== undefined);
    await assert.rejects(locker.list({ prefix: `${base}:2`, cursor: page.cursor }), bad('cursor'));
    assert.throws(() => locker.watch({ prefix: 'x'.repeat(1025) }), bad('prefix'));
    assert.throws(() => locker.watch({ everyMs: 0 }), bad('everyMs'));
    await assert.rejects(locker.list({ signal: 'no' as unknown as AbortSignal }), bad('signal'));
    await assert.rejects(locker.forceRelease(base, { reason: '' }), bad('reason'));
    await assert.rejects(locker.forceRelease(base, undefined as unknown as { reason: string }), bad('reason'));
    await assert.rejects(locker.forceRelease('', { reason: 'x' }), bad('lockId'));
    assert.throws(() => client({ meta: { blob: 'x'.repeat(600) } }), bad('meta'));
  });
}

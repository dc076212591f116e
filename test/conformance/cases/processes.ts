import assert from 'node:assert/strict';
import { test } from 'node:test';
import { hostname } from 'node:os';
import type { Identity, Locker, WatchEvent } from '../../../src/index.js';
import { eventually, waitingOn } from '../../helpers.js';
import { otherProcess } from '../children.js';
import { T, type SuiteContext } from '../suite.js';

/**
 * Seeing the locks of another process (docs/observability.md): its holds and queue entries
 * are listed, and watched, with its own identity. One child process per case.
 */
export function otherProcessCases(ctx: SuiteContext, url: string): void {
  holderCase(ctx, url);
  if (ctx.caps.fair) waiterCase(ctx, url);
  watchCase(ctx, url);
}

/**
 * The listing under `lockId` is that one mutex, its holder carrying `token` and `identity`
 * (and, where the engine reports both times, a lease that ends after it began).
 */
export async function expectListedHolder(locker: Locker, lockId: string, token: bigint, identity: Identity): Promise<void> {
  const [listed, ...rest] = (await locker.list({ prefix: lockId })).locks;
  assert.equal(rest.length, 0);
  assert.equal(listed?.lockId, lockId);
  assert.equal(listed.kind, 'mutex');
  const h = listed.holders[0];
  assert.equal(h?.token, token);
  assert.deepEqual(h.identity, identity);
  if (h.acquiredAt !== undefined && h.leaseEndsAt !== undefined) assert.ok(h.leaseEndsAt > h.acquiredAt);
}

function holderCase({ client, id, caps }: SuiteContext, url: string): void {
  test('a holder in another process is listed with its identity and token, beside a waiter', T, async () => {
    const lockId = id('who');
    await using other = otherProcess({ url, lockId, name: 'conf-holder', action: 'hold', meta: { role: 'holder' } });
    const held = await other.next('held');
    assert.equal(held.pid, other.pid);
    const waiter = client({ name: 'conf-waiter' });
    const queued = waitingOn(waiter, lockId);
    const ctl = new AbortController();
    const waiting = waiter.lock(lockId, { signal: ctl.signal, fair: caps.fair });
    await queued;
    const identity = { host: hostname(), pid: other.pid, name: 'conf-holder', meta: { role: 'holder' } };
    await expectListedHolder(client(), lockId, BigInt(held.token), identity);
    if (caps.fair) {
      await eventually('the waiter is listed', async () => (await client().list({ prefix: lockId })).locks[0]?.queue?.length === 1);
      const w = (await client().list({ prefix: lockId })).locks[0]?.queue?.[0];
      assert.deepEqual(w?.identity, { host: hostname(), pid: process.pid, name: 'conf-waiter' });
    }
    ctl.abort(new Error('enough'));
    await assert.rejects(waiting, /enough/);
  });
}

function waiterCase({ client, id }: SuiteContext, url: string): void {
  test('a waiter in another process is listed in the queue with its identity', T, async () => {
    const lockId = id('queued');
    const holder = client({ name: 'conf-holder' });
    const lock = await holder.lock(lockId);
    await using other = otherProcess({ url, lockId, name: 'conf-waiter', action: 'wait', fair: true });
    await other.next('waiting');
    await eventually('the waiter is listed', async () => (await client().list({ prefix: lockId })).locks[0]?.queue?.length === 1);
    const [listed] = (await client().list({ prefix: lockId })).locks;
    assert.equal(listed?.holders[0]?.token, lock.token);
    assert.deepEqual(listed.holders[0].identity, { host: hostname(), pid: process.pid, name: 'conf-holder' });
    const w = listed.queue?.[0];
    assert.deepEqual(w?.identity, { host: hostname(), pid: other.pid, name: 'conf-waiter' });
    assert.equal(w.fair, true);
    await other.end();
    await lock.release();
  });
}

function watchCase({ client, id }: SuiteContext, url: string): void {
  test('watch sees an acquire and a release by another process, with its identity', T, async () => {
    const lockId = id('watch');
    const ctl = new AbortController();
    const seen: WatchEvent[] = [];
    const done = (async () => {
      for await (const e of client().watch({ prefix: lockId, signal: ctl.signal, everyMs: 50 })) seen.push(e);
    })();
    await using other = otherProcess({ url, lockId, name: 'conf-watched', action: 'hold' });
    const token = BigInt((await other.next('held')).token);
    await eventually('acquired is seen', () => seen.some((e) => e.type === 'acquired' && e.token === token));
    await other.end();
    await eventually('released is seen', () => seen.some((e) => e.type === 'released' && e.token === token));
    ctl.abort();
    await done;
    const acquired = seen.find((e) => e.type === 'acquired');
    assert.equal(acquired?.lockId, lockId);
    assert.deepEqual(acquired.identity, { host: hostname(), pid: other.pid, name: 'conf-watched' });
  });
}

/**
 * A call's wait bound and AbortSignal end an attempt on a Redis server that answers nothing
 * (paused with SIGSTOP), although the backend's attempt is one command that does not listen
 * to the signal: the core answers the caller (src/acquire.ts), the backend's cancel does not
 * wait behind the unanswered command, and once the server resumes the lock is free for
 * another locker (docs/architecture.md, "What the core owns").
 */
import { afterEach, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { createLocker, type Locker } from '../../src/index.js';
import type { Backend } from '../../src/backend.js';
import type { RedisTicket } from '../../src/backends/redis/index.js';
import { startRedis } from '../../scripts/servers/redis.js';
import { seamRequest, useServer } from '../helpers.js';

const server = await useServer(() => startRedis());
const T = { timeout: 120_000 };
/** Far beyond what the bounds below allow: only the bound or the abort can end a call sooner. */
const COMMAND_TIMEOUT_MS = 30_000;
const url = `${server.url}?commandTimeoutMs=${COMMAND_TIMEOUT_MS}`;
const node = server.nodes[0];
const open: Locker[] = [];

async function locker(): Promise<Locker> {
  const l = createLocker(url);
  open.push(l);
  await (await l.lock(id('warm-up'))).release(); // connected, scripts loaded
  return l;
}
const id = (label: string): string => `redis-deadline:${label}:${randomBytes(6).toString('hex')}`;
/** `p`, or 'stuck' after half the command timeout (a call that waits for the server). */
const settled = <V>(p: Promise<V>): Promise<V | 'stuck'> =>
  Promise.race([p, sleep(COMMAND_TIMEOUT_MS / 2, 'stuck' as const, { ref: false })]);

afterEach(async () => {
  node?.resume();
  await Promise.allSettled(open.splice(0).map((l) => l.close()));
});

test('a bound and an abort end attempts on a paused server; the lock is free once it resumes', T, async () => {
  const a = await locker();
  const lockId = id('paused');
  node?.pause();
  const timedOut = a.lock(lockId, { timeoutMs: 200 }).then(
    () => 'granted',
    (e: { code?: string }) => e.code,
  );
  assert.equal(await settled(timedOut), 'LOCK_TIMEOUT');
  assert.equal(await settled(a.tryLock(lockId, { waitMs: 200 })), null);
  const ctl = new AbortController();
  const aborted = a.lock(lockId, { signal: ctl.signal, owner: 'explicit' }).catch((e: unknown) => e);
  await sleep(100);
  const reason = new Error('caller left');
  ctl.abort(reason);
  assert.equal(await settled(aborted), reason);
  node?.resume();
  const next = await (await locker()).lock(lockId, { timeoutMs: 60_000 });
  assert.equal(next.held, true);
  await next.release();
});

test("the backend's cancel does not wait behind an attempt the paused server has not answered", T, async () => {
  const backend = (await (await locker()).backend()) as Backend<RedisTicket>;
  const lockId = id('cancel');
  node?.pause();
  const req = seamRequest<RedisTicket>(lockId, 'gone', { ttlMs: 60_000, fair: false });
  const attempt = backend.tryAcquire(req).catch(() => undefined);
  await sleep(100);
  assert.equal(await settled(backend.cancel(req, undefined)), undefined, 'cancel resolved while the server is paused');
  node?.resume();
  await attempt;
  const next = await (await locker()).tryLock(lockId);
  assert.ok(next, 'the cancel queued behind the attempt took its grant back');
  await next.release();
});

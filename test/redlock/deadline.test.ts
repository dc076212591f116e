/**
 * A call's wait bound and AbortSignal end a Redlock attempt that is still in flight: with a
 * majority of masters paused (SIGSTOP) and a per-master timeout far longer than the bound,
 * `lock({ timeoutMs })` and `tryLock({ waitMs })` answer at their bound, and an abort at
 * once; what the answering masters set is taken back, and the lock is free for another
 * locker once the masters resume (src/acquire.ts, docs/backends/redlock.md "Failure modes").
 */
import { after, afterEach, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { createLocker, type Locker } from '../../src/index.js';
import { startRedlock } from '../../scripts/servers/redlock.js';
import { eventually, seamRequest, useServer } from '../helpers.js';
import type { Backend } from '../../src/backend.js';
import type { RedlockTicket } from '../../src/backends/redlock/index.js';

const server = await useServer(() => startRedlock({ count: 5 }));
const T = { timeout: 120_000 };
/** Far beyond what the bounds below allow: only the bound or the abort can end a call sooner. */
const NODE_TIMEOUT_MS = 30_000;
const url = `${server.url}?nodeTimeoutMs=${NODE_TIMEOUT_MS}`;
const PAUSED = [0, 1, 2];
const open: Locker[] = [];
const direct = server.nodes.map((n) => new Redis({ host: n.host, port: n.port, lazyConnect: true }));
await Promise.all(direct.map((r) => r.connect()));
after(() => direct.forEach((r) => r.disconnect()));

async function locker(): Promise<Locker> {
  const l = createLocker(url, { ttlMs: 10 * NODE_TIMEOUT_MS });
  open.push(l);
  await l.backend(); // connected while every master answers
  return l;
}
const id = (label: string): string => `rl-deadline:${label}:${randomBytes(6).toString('hex')}`;

/** True when none of the answering masters holds a lease key of `lockId`. */
async function freeOnLiveMasters(lockId: string): Promise<boolean> {
  const base = `locksmith:{${lockId}}`;
  const live = direct.filter((_, i) => !PAUSED.includes(i));
  const found = await Promise.all(live.map((r) => r.exists(`${base}:rl`, `${base}:ri`)));
  return found.every((n) => n === 0);
}

/** Resume the paused masters; then another locker must get the lock. */
async function resumeAndLock(lockId: string): Promise<void> {
  for (const i of PAUSED) server.nodes[i]?.resume();
  const next = await (await locker()).lock(lockId, { timeoutMs: 60_000 });
  assert.equal(next.held, true);
  await next.release();
}

afterEach(async () => {
  for (const i of PAUSED) server.nodes[i]?.resume();
  await Promise.allSettled(open.splice(0).map((l) => l.close()));
});

test('lock({ timeoutMs }) and tryLock({ waitMs }) end a first attempt stuck on paused masters at their bound', T, async () => {
  const a = await locker();
  const lockId = id('bound');
  for (const i of PAUSED) server.nodes[i]?.pause();
  const started = performance.now();
  await assert.rejects(a.lock(lockId, { timeoutMs: 200 }), { code: 'LOCK_TIMEOUT' });
  // Not a timing measurement: without the bound the call lasts the whole per-master timeout.
  assert.ok(performance.now() - started < NODE_TIMEOUT_MS / 2, 'lock() answered long before the per-master timeout');
  assert.ok(await freeOnLiveMasters(lockId), 'what the answering masters granted was taken back before the rejection');
  const again = performance.now();
  assert.equal(await a.tryLock(lockId, { waitMs: 200 }), null);
  assert.ok(performance.now() - again < NODE_TIMEOUT_MS / 2, 'tryLock() answered long before the per-master timeout');
  assert.ok(await freeOnLiveMasters(lockId));
  await resumeAndLock(lockId);
});

for (const owner of [undefined, 'explicit-owner']) {
  test(`an AbortSignal ends the attempt in flight (${owner ?? 'fresh owner'}); the answering masters are cleaned at once`, T, async () => {
    const a = await locker();
    const lockId = id('abort');
    for (const i of PAUSED) server.nodes[i]?.pause();
    const ctl = new AbortController();
    const pending = a.lock(lockId, { signal: ctl.signal, ...(owner ? { owner } : {}) });
    await sleep(100);
    const reason = new Error('caller left');
    ctl.abort(reason);
    await assert.rejects(pending, (e) => e === reason);
    // The paused masters answer nothing for the whole per-master timeout: only a clean-up
    // sent at the abort can free the answering ones within this wait.
    await eventually('the answering masters freed', () => freeOnLiveMasters(lockId), NODE_TIMEOUT_MS / 2);
    await resumeAndLock(lockId);
  });
}

test("the backend's cancel frees the answering masters without waiting for the paused ones", T, async () => {
  const backend = (await (await locker()).backend()) as Backend<RedlockTicket>;
  const lockId = id('cancel');
  for (const i of PAUSED) server.nodes[i]?.pause();
  const req = seamRequest<RedlockTicket>(lockId, 'gone', { ttlMs: 10 * NODE_TIMEOUT_MS, fair: false });
  const attempt = backend.tryAcquire(req).catch(() => undefined);
  await sleep(100);
  const cancelled = backend.cancel(req, undefined).then(() => 'cancelled');
  assert.equal(await Promise.race([cancelled, sleep(NODE_TIMEOUT_MS / 2, 'stuck', { ref: false })]), 'cancelled');
  assert.ok(await freeOnLiveMasters(lockId), 'the answering masters were freed before cancel resolved');
  await resumeAndLock(lockId);
  await attempt;
});

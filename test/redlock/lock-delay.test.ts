/**
 * Lock-delay on Redlock (docs/backends/redlock.md, "Lock-delay"): each master keeps the lease
 * key for the delay past the lease, so a holder that vanished keeps a majority blocked; a
 * clean release deletes it, and a release or renewal after the lease ran out does not.
 */
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { createLocker, LockLostError, type Locker } from '../../src/index.js';
import type { RedlockGrantData } from '../../src/backends/redlock/index.js';
import { keyBase } from '../../src/backends/redis-wire/keys.js';
import type { Backend, Grant } from '../../src/backend.js';
import { startRedlock } from '../../scripts/servers/redlock.js';
import { seamRequest, useServer } from '../helpers.js';

const server = await useServer(() => startRedlock({ count: 3 }));
const T = { timeout: 60_000 };
const open: Locker[] = [];
const masters = server.nodes.map((n) => new Redis({ host: n.host, port: n.port }));
after(async () => {
  await Promise.allSettled(open.map((l) => l.close()));
  for (const m of masters) m.disconnect();
});

const locker = (): Locker => {
  const l = createLocker(server.url);
  open.push(l);
  return l;
};
const id = (label: string): string => `delay:${label}:${randomBytes(6).toString('hex')}`;
const key = (lockId: string, k: 'rl' | 'ri'): string => `${keyBase('locksmith:', lockId)}:${k}`;

test('a holder whose lease ran out keeps a majority blocked for the delay; its late release and renewal change nothing', T, async () => {
  const lockId = id('lapse');
  const backend = (await locker().backend()) as Backend<unknown, RedlockGrantData>;
  const res = await backend.tryAcquire(seamRequest(lockId, 'delayed-owner', { ttlMs: 1_000, lockDelayMs: 4_000 }));
  assert.ok(res.granted);
  const grant: Grant<RedlockGrantData> = res.grant;
  // Past the lease on every master: the record is gone, the lease key stays for the delay.
  while ((await Promise.all(masters.map((m) => m.exists(key(lockId, 'ri'))))).some((n) => n > 0)) await sleep(50);
  const left = await Promise.all(masters.map((m) => m.pttl(key(lockId, 'rl'))));
  assert.ok(
    left.every((ms) => ms > 0),
    `the lease keys stay for the delay: ${left.join(', ')}`,
  );
  assert.equal(await locker().tryLock(lockId), null, 'blocked by the delay');
  await assert.rejects(backend.extend(grant, 1_000), LockLostError, 'a lease that ran out is not renewed');
  assert.equal(await backend.release(grant), false, 'a lease that ran out is not released');
  assert.equal(await locker().tryLock(lockId), null, 'the late release did not end the delay');
  const next = await locker().lock(lockId, { timeoutMs: 30_000 });
  assert.ok(next.token > grant.token);
  await next.release();
});

test('a clean release ends the hold at once, with the delay on', T, async () => {
  const lockId = id('clean');
  const held = await locker().lock(lockId, { lockDelayMs: 60_000 });
  await held.release();
  const left = await Promise.all(masters.map((m) => m.exists(key(lockId, 'rl'))));
  assert.deepEqual(left, [0, 0, 0]);
  const next = await locker().tryLock(lockId);
  assert.ok(next);
  await next.release();
});

/**
 * The expiry index `x` of a lock exists only once two holders held at once: a sole holder's
 * expiry is in its hold record (docs/backends/redis.md, "How it works"). These cases drive the
 * scripts through the Backend seam against a real Redis and read the keys: the short paths
 * write no index, a second holder indexes both, expiry and purge work from either.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import type { AcquireRequest, Backend, Grant } from '../../src/backend.js';
import { createBackend } from '../../src/backends/redis/index.js';
import { lockKeys } from '../../src/backends/redis-wire/keys.js';
import { startRedis } from '../../scripts/servers/redis.js';
import type { RunningServer } from '../../scripts/servers/harness.js';
import { seamRequest } from '../helpers.js';

const T = { timeout: 60_000 };
let server: RunningServer;
let admin: Redis;
let b: Backend;

before(async () => {
  server = await startRedis();
  admin = new Redis(server.url);
  b = await createBackend(new URL(server.url), { connectTimeoutMs: 10_000 });
});
after(async () => {
  await b.close();
  admin.disconnect();
  await server.stop();
});

const id = (what: string): string => `layout:${what}:${randomBytes(6).toString('hex')}`;
const request = (lockId: string, over: Partial<AcquireRequest> = {}): AcquireRequest =>
  seamRequest(lockId, randomBytes(12).toString('hex'), { fair: false, wait: false, ...over });

async function grantOf(req: AcquireRequest): Promise<Grant> {
  const r = await b.tryAcquire(req);
  assert.ok(r.granted, 'expected a grant');
  return r.grant;
}

/** Which of the lock's keys h, x, t exist. */
async function present(lockId: string): Promise<string> {
  const [h, x, t] = lockKeys('locksmith:', lockId);
  const flags = await Promise.all([h, x, t].map((k) => admin.exists(k)));
  return ['h', 'x', 't'].filter((_, i) => flags[i] === 1).join(' ');
}

test('a sole holder has no expiry index; its hash expires with it, and a release leaves only the counter', T, async () => {
  const lockId = id('sole');
  const g = await grantOf(request(lockId, { ttlMs: 5_000, lockDelayMs: 200 }));
  assert.equal(await present(lockId), 'h t');
  const [h] = lockKeys('locksmith:', lockId);
  const pttl = await admin.pttl(h);
  assert.ok(pttl > 5_000 && pttl <= 6_200, `the hash lives ttl + lockDelay + 1 s (${pttl} ms)`);
  await b.extend(g, 20_000);
  assert.ok((await admin.pttl(h)) > 20_000, 'extend moved the hash expiry');
  assert.equal(await present(lockId), 'h t', 'extend indexed nothing');
  assert.equal(await b.release(g), true);
  assert.equal(await present(lockId), 't');
});

test('a second reader indexes both holders; each still runs out on its own lease', T, async () => {
  const lockId = id('readers');
  const short = await grantOf(request(lockId, { kind: 'read', ttlMs: 150 }));
  assert.equal(await present(lockId), 'h t');
  const long = await grantOf(request(lockId, { kind: 'read', ttlMs: 10_000 }));
  assert.equal(await present(lockId), 'h x t');
  const [h, x] = lockKeys('locksmith:', lockId);
  assert.equal(await admin.zcard(x), 2, 'both holders indexed');
  assert.ok((await admin.pttl(h)) > 10_000, 'the hash lives as long as the longest hold');
  await sleep(200);
  // The short reader ran out: a writer is still kept out by the long one, which alone is listed.
  assert.equal((await b.tryAcquire(request(lockId, { kind: 'write' }))).granted, false);
  const state = await b.inspect(lockId);
  assert.deepEqual(
    state.holders.map((o) => o.token),
    [long.token],
  );
  assert.equal(await b.release(short), false, 'a lease that ran out is not released');
  assert.equal(await b.release(long), true);
  assert.equal(await present(lockId), 't');
  assert.equal((await b.tryAcquire(request(lockId, { kind: 'write' }))).granted, true);
});

test('a sole holder that ran out is purged from its record by the next acquire', T, async () => {
  const lockId = id('expired');
  const old = await grantOf(request(lockId, { ttlMs: 100 }));
  await sleep(150);
  // The hash outlives the lease by a second: the next acquire takes the full path and purges it.
  assert.equal(await present(lockId), 'h t');
  const next = await grantOf(request(lockId));
  assert.ok(next.token > old.token);
  assert.equal(await present(lockId), 'h t');
  const holders = (await b.inspect(lockId)).holders;
  assert.deepEqual(
    holders.map((o) => o.token),
    [next.token],
  );
  assert.equal(await b.release(old), false);
  assert.equal(await b.release(next), true);
});

test('a fair hand-off to the head and its claim write no index', T, async () => {
  const lockId = id('handoff');
  const a = await grantOf(request(lockId));
  const reqB = request(lockId, { fair: true, wait: true });
  const r = await b.tryAcquire(reqB);
  assert.ok(!r.granted);
  assert.equal(await b.release(a), true);
  // The head's next attempt claims the hand-off (whether or not its message came first).
  const got = await b.tryAcquire({ ...reqB, ticket: r.contended.ticket });
  assert.ok(got.granted);
  await got.grant.confirmation;
  assert.ok(got.grant.token > a.token);
  assert.equal(await present(lockId), 'h t');
  const [h] = lockKeys('locksmith:', lockId);
  assert.ok((await admin.pttl(h)) > 5_000, 'the claim moved the hash expiry to the full ttl');
  assert.equal(await b.release(got.grant), true);
  assert.equal(await present(lockId), 't');
});

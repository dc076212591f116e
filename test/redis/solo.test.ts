/**
 * The first attempt at a lock this backend has not seen contended lately is ACQUIRE_SOLO (4 keys,
 * the fast path alone); anything it cannot grant goes to the full ACQUIRE, and a lock seen
 * contended goes there at once (docs/backends/redis.md, "Lua scripts"). These cases count the
 * scripts a backend sends (by their number of keys) to a real Redis and check what they granted.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import type { AcquireRequest, Grant } from '../../src/backend.js';
import { RedisBackend, type RedisTicket } from '../../src/backends/redis/index.js';
import { startRedis } from '../../scripts/servers/redis.js';
import type { RunningServer } from '../../scripts/servers/harness.js';
import { seamRequest } from '../helpers.js';

const T = { timeout: 60_000 };
let server: RunningServer;
const clients: Redis[] = [];
const backends: RedisBackend[] = [];

before(async () => {
  server = await startRedis();
});
after(async () => {
  await Promise.all(backends.map((b) => b.close()));
  for (const c of clients) c.disconnect();
  await server.stop();
});

/** A backend on its own client, and the key count of every script it sent since the last read. */
function counted(): { backend: RedisBackend; sent: () => number[] } {
  const client = new Redis(server.url);
  clients.push(client);
  let keys: number[] = [];
  const evalsha = client.evalsha.bind(client) as (...args: unknown[]) => Promise<unknown>;
  (client as unknown as { evalsha: (...args: unknown[]) => Promise<unknown> }).evalsha = (...args: unknown[]) => {
    keys.push(Number(args[1]));
    return evalsha(...args);
  };
  const backend = new RedisBackend(client);
  backends.push(backend);
  return {
    backend,
    sent: () => {
      const s = keys;
      keys = [];
      return s;
    },
  };
}

const id = (what: string): string => `solo:${what}:${randomBytes(6).toString('hex')}`;
const once = (lockId: string, over: Partial<AcquireRequest<RedisTicket>> = {}): AcquireRequest<RedisTicket> =>
  seamRequest<RedisTicket>(lockId, randomBytes(12).toString('hex'), { fair: false, wait: false, ...over });

async function grantOf(b: RedisBackend, req: AcquireRequest<RedisTicket>): Promise<Grant> {
  const r = await b.tryAcquire(req);
  assert.ok(r.granted, 'expected a grant');
  return r.grant as Grant;
}

test('a free lock is granted by the 4-key script; a held one then goes to the full script, at once from then on', T, async () => {
  const a = counted();
  const other = counted();
  const free = id('free');
  const g = await grantOf(a.backend, once(free));
  assert.deepEqual(a.sent(), [4], 'one short script');
  assert.ok(g.token > 0n);
  assert.equal(g.data && (g.data as { field: string }).field, g.ownerId, 'the hold is the owner field, as ACQUIRE writes it');
  assert.equal(await a.backend.release(g as Grant<{ field: string }>), true);
  assert.deepEqual(a.sent(), [7]);
  // A second hold of the same free lock continues the token sequence.
  const g2 = await grantOf(a.backend, once(free));
  assert.ok(g2.token > g.token, 'tokens increase');
  assert.equal(await a.backend.release(g2 as Grant<{ field: string }>), true);
  a.sent();

  const held = id('held');
  const h = await grantOf(other.backend, once(held));
  assert.equal((await a.backend.tryAcquire(once(held))).granted, false);
  assert.deepEqual(a.sent(), [4, 7], 'the short script found it held: the full one decided');
  assert.equal((await a.backend.tryAcquire(once(held))).granted, false);
  assert.deepEqual(a.sent(), [7], 'seen contended: straight to the full script');
  await other.backend.release(h as Grant<{ field: string }>);
  const after = await grantOf(a.backend, once(held));
  assert.ok(after.token > h.token);
  assert.deepEqual(a.sent(), [7], 'still remembered as contended');
});

test("an explicit owner's hold re-entered from another backend goes through the full script", T, async () => {
  const a = counted();
  const b = counted();
  const lockId = id('reenter');
  const owner = randomBytes(8).toString('hex');
  const first = await grantOf(a.backend, seamRequest<RedisTicket>(lockId, owner, { freshOwner: false, wait: false }));
  const again = await grantOf(b.backend, seamRequest<RedisTicket>(lockId, owner, { freshOwner: false, wait: false }));
  assert.deepEqual(b.sent(), [4, 7]);
  assert.equal(again.reentered, true);
  assert.equal(again.token, first.token, 'a re-entry keeps the token');
});

test('a semaphore never takes the short script', T, async () => {
  const a = counted();
  const g = await grantOf(a.backend, once(id('sem'), { kind: 'semaphore', permits: 2 }));
  assert.deepEqual(a.sent(), [7]);
  assert.match((g.data as { field: string }).field, /\0/, 'a permit field carries its token and size');
});

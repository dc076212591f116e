/**
 * Intent markers over Redis (docs/serve.md, "Design"): an acquire's marker is written beside
 * its first attempt, so a replica killed with `kill -9` right after answering an acquire or
 * a hand-off loses no hold (another replica reads the token back from the lock), and an
 * intent whose attempt was refused or whose hold was released is removed and never counts.
 */
import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { startRedis } from '../../scripts/servers/redis.js';
import { createLocker } from '../../src/index.js';
import { recordsUrl } from '../../src/serve/records.js';
import { eventually, useServer } from '../helpers.js';
import { spawnService } from './process.js';
import { call, client, startService } from './service.js';

const T = { timeout: 120_000 };
const redis = await useServer(() => startRedis());
const b = await startService(redis.url);
/** Where the service keeps its records (records.ts: on Redis, under their own key prefix). */
const records = createLocker(recordsUrl(redis.url) ?? redis.url);
after(async () => {
  await b.close();
  await records.close();
});

/** The holders of the session's index beyond its record and the record's own marker. */
const markers = async (session: string): Promise<number> => (await records.inspect(`locksmith-serve/i/${session}`)).holders.length - 2;

test('a kill -9 right after an acquire and a hand-off were answered: the other replica keeps, extends and releases both', T, async () => {
  const a = await spawnService(redis.url);
  const [viaA, viaB] = [client(a.base), client(b.base)];
  try {
    const [s, holder] = [await viaA.session(2_000, 'survivor'), await viaA.session(30_000, 'holder')];
    const first = await viaA.acquire('intents/one', { session: holder });
    const waiting = viaA.acquire('intents/one', { session: s, waitMs: 30_000 });
    await eventually('the waiter queues', async () => ((await viaB.inspect('intents/one')).body.waiters as number) === 1);
    assert.deepEqual((await viaA.release('intents/one', holder, first.body.token)).body, { released: true });
    const handed = await waiting;
    const two = await viaA.acquire('intents/two', { session: s });
    assert.deepEqual([handed.status, two.status], [200, 200]);
    await a.kill();
    // Past the holds' lease (1.25 ttls), keepalives through B alone: both holds stay, read back from their locks.
    for (let i = 0; i < 6; i += 1) {
      const k = await viaB.keepalive(s);
      assert.deepEqual([k.status, k.body.holds, k.body.lost], [200, 2, []], JSON.stringify(k.body));
      await new Promise((r) => setTimeout(r, 500));
    }
    const held = (await viaB.inspect('intents/one')).body.holders as { token: string }[];
    assert.deepEqual(
      held.map((h) => h.token),
      [handed.body.token],
    );
    assert.equal((await viaB.extend('intents/two', s, two.body.token)).status, 200);
    assert.deepEqual((await viaB.release('intents/one', s, handed.body.token)).body, { released: true });
    assert.deepEqual((await viaB.end(s)).body, { released: 1 });
    assert.equal(((await viaB.inspect('intents/two')).body.holders as unknown[]).length, 0);
    await viaB.end(holder);
  } finally {
    await a.kill();
  }
});

test('an intent whose attempt was refused, or whose hold was released, is removed and never counts as a hold', T, async () => {
  const viaB = client(b.base);
  const [s, other] = [await viaB.session(10_000, 's'), await viaB.session(10_000, 'other')];
  const held = await viaB.acquire('intents/busy', { session: other });
  assert.equal((await viaB.acquire('intents/busy', { session: s })).status, 409);
  assert.equal((await viaB.acquire('intents/busy', { session: s, waitMs: 50 })).status, 409);
  const mine = await viaB.acquire('intents/mine', { session: s, requestId: 'r1' });
  assert.deepEqual((await viaB.release('intents/mine', s, mine.body.token)).body, { released: true });
  await eventually('no marker of the session left', async () => (await markers(s)) === 0);
  // A retry of the released request makes a new hold (its earlier intent names no holder).
  const again = await viaB.acquire('intents/mine', { session: s, requestId: 'r1' });
  assert.ok(BigInt(again.body.token as string) > BigInt(mine.body.token as string));
  assert.equal((await viaB.keepalive(s)).body.holds, 1);
  assert.deepEqual((await viaB.end(s)).body, { released: 1 });
  assert.deepEqual((await viaB.release('intents/busy', other, held.body.token)).body, { released: true });
  await viaB.end(other);
});

test('a hold kept past a second gets its full marker: broken, it is reported lost by a keepalive through another replica', T, async () => {
  const c = await startService(redis.url);
  try {
    const [viaB, viaC] = [client(b.base), client(c.base)];
    const s = await viaC.session(10_000, 'kept');
    const held = await viaC.acquire('intents/kept', { session: s });
    const index = `locksmith-serve/i/${s}`;
    const full = async (): Promise<boolean> =>
      (await records.inspect(index)).holders.some((h) => h.identity?.meta?.l === 'intents/kept' && h.identity.meta.t === held.body.token);
    await eventually('the full marker is written', full);
    await eventually('the intent is removed', async () => (await markers(s)) === 1);
    assert.equal((await call(b.base, 'POST', '/v1/locks/intents%2Fkept/break', { reason: 'test' })).status, 200);
    const k = await viaB.keepalive(s);
    assert.deepEqual(k.body.lost, [{ lockId: 'intents/kept', token: held.body.token }]);
    assert.equal(k.body.holds, 0);
    await viaB.end(s);
  } finally {
    await c.close();
  }
});

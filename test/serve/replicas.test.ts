/**
 * Two replicas of the service over one Redis are one service (docs/serve.md, "Design"):
 * a hold made through one is kept alive, extended and released through the other, a retried
 * request through the other finds its grant, a `kill -9` of the replica that granted the
 * holds loses none of them, and a resign through one withdraws a campaign waiting on the other.
 */
import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { startRedis } from '../../scripts/servers/redis.js';
import { eventually, useServer } from '../helpers.js';
import { spawnService } from './process.js';
import { call, client, startService } from './service.js';

const T = { timeout: 120_000 };
const redis = await useServer(() => startRedis());
const a = await spawnService(redis.url);
const b = await startService(redis.url);
after(async () => {
  await a.kill();
  await b.close();
});

test("a resign through one replica withdraws the session's campaign waiting on the other", T, async () => {
  const viaB = client(b.base);
  const name = 'replicas/leader';
  const path = (action: string): string => `/v1/elections/${encodeURIComponent(name)}/${action}`;
  const [leader, follower] = [await viaB.session(10_000, 'leader'), await viaB.session(10_000, 'follower')];
  assert.equal((await call(b.base, 'POST', path('campaign'), { session: leader })).status, 200);
  const waiting = call(a.base, 'POST', path('campaign'), { session: follower, waitMs: 30_000 });
  await eventually('the follower waits on A', async () => ((await viaB.inspect(name)).body.waiters as number) === 1);
  assert.deepEqual((await call(b.base, 'POST', path('resign'), { session: follower })).body, { resigned: false });
  const answer = await waiting;
  assert.deepEqual([answer.status, answer.body.code], [409, 'CAMPAIGN_WITHDRAWN'], JSON.stringify(answer.body));
  assert.equal((await viaB.inspect(name)).body.waiters, 0, 'no queue entry left behind');
  await Promise.all([viaB.end(leader), viaB.end(follower)]);
});

test('a kill -9 of the replica that granted the holds loses none: the other keeps, extends and releases them', T, async () => {
  const [viaA, viaB] = [client(a.base), client(b.base)];
  const s = await viaA.session(2_000, 'survivor');
  const one = await viaA.acquire('replicas/one', { session: s, requestId: 'r1' });
  const two = await viaA.acquire('replicas/two', { session: s });
  assert.equal(one.status, 200);
  assert.equal(two.status, 200);
  assert.equal(
    (await viaB.acquire('replicas/one', { session: s, requestId: 'r1' })).body.token,
    one.body.token,
    'a retry through B finds the grant',
  );
  assert.equal((await viaB.keepalive(s)).body.holds, 2);
  await a.kill();
  const other = await viaB.session(30_000, 'other');
  // Three ttls of keepalives through B alone: the holds stay.
  for (let i = 0; i < 12; i += 1) {
    const k = await viaB.keepalive(s);
    assert.equal(k.status, 200);
    assert.deepEqual(k.body.lost, []);
    await new Promise((r) => setTimeout(r, 500));
  }
  assert.equal((await viaB.acquire('replicas/one', { session: other })).status, 409, 'still held');
  assert.equal((await viaB.extend('replicas/two', s, two.body.token)).status, 200);
  const holders = (await viaB.inspect('replicas/one')).body.holders as { token: string; identity: { name: string } }[];
  assert.equal(holders[0]?.token, one.body.token);
  assert.equal(holders[0]?.identity.name, 'survivor');
  assert.deepEqual((await viaB.release('replicas/one', s, one.body.token)).body, { released: true });
  const next = await viaB.acquire('replicas/one', { session: other });
  assert.equal(next.status, 200);
  assert.ok(BigInt(next.body.token as string) > BigInt(one.body.token as string));
  assert.deepEqual((await viaB.end(s)).body, { released: 1 });
  assert.equal(((await viaB.inspect('replicas/two')).body.holders as unknown[]).length, 0);
});

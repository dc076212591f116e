/**
 * Two replicas of the service over one Redis are one service (docs/serve.md, "Design"):
 * a hold made through one is kept alive, extended and released through the other, a retried
 * request through the other finds its grant, and a `kill -9` of the replica that granted
 * the holds loses none of them.
 */
import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { startRedis } from '../../scripts/servers/redis.js';
import { useServer } from '../helpers.js';
import { spawnService } from './process.js';
import { client, startService } from './service.js';

const T = { timeout: 120_000 };
const redis = await useServer(() => startRedis());
const a = await spawnService(redis.url);
const b = await startService(redis.url);
after(async () => {
  await a.kill();
  await b.close();
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

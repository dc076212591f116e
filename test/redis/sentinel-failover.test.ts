/**
 * The Sentinel failover double grant (docs/backends/redis.md, "What it assumes, and what
 * breaks when the assumption fails"), reproduced deterministically: the replica follows the
 * master through a fault proxy, the proxy is cut before the grant (so the replica never has
 * it), the master is killed, Sentinel promotes the replica, and a second client is granted
 * the same lock while the first still holds it. Then the fenced resource (a separate Redis,
 * `locksmith-dlm/fenced`) refuses the stale holder, because the new holder's token is above
 * the old one.
 */
import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { Redis } from 'ioredis';
import { createLocker, StaleTokenError, type Locker } from '../../src/index.js';
import { fencedGet, fencedSet } from '../../src/fenced/index.js';
import { startRedisSentinel } from '../../scripts/servers/redis-sentinel.js';
import { startRedis } from '../../scripts/servers/redis.js';
import { eventually, faultProxy, useServer } from '../helpers.js';

const T = { timeout: 90_000 };
const server = await useServer(() => startRedisSentinel({ replica: true }));
const resourceServer = await useServer(() => startRedis());
const masterPort = server.master.nodes[0]?.port ?? 0;
const replicaPort = server.replica?.nodes[0]?.port ?? 0;
const link = await faultProxy(masterPort);

const lockers: Locker[] = [];
const clients: Redis[] = [];
/** Close every client before the servers stop (useServer's hooks), or they retry noisily. */
async function closeClients(): Promise<void> {
  await Promise.all(lockers.map((l) => l.close()));
  for (const c of clients) c.disconnect();
  lockers.length = 0;
  clients.length = 0;
  await link.close();
}
after(closeClients);
function redisOn(port: number): Redis {
  const c = new Redis({ host: '127.0.0.1', port, lazyConnect: false, maxRetriesPerRequest: 1 });
  clients.push(c);
  return c;
}

/** The replica's INFO replication field `name`. */
async function replicaInfo(replica: Redis, name: string): Promise<string | undefined> {
  const info = await replica.info('replication');
  return new RegExp(`^${name}:(.*)\\r?$`, 'm').exec(info)?.[1]?.trim();
}

/** Re-point the replica at the master through the proxy, and wait until it is in sync there. */
async function replicateThroughProxy(replica: Redis): Promise<void> {
  await replica.call('REPLICAOF', '127.0.0.1', String(link.port));
  await eventually(
    'the replica in sync through the proxy',
    async () =>
      (await replicaInfo(replica, 'master_port')) === String(link.port) && (await replicaInfo(replica, 'master_link_status')) === 'up',
    30_000,
    50,
  );
}

test('a failover to a replica that missed the grant grants the lock twice, and the fence refuses the stale holder', T, async () => {
  const replica = redisOn(replicaPort);
  const resource = redisOn(resourceServer.nodes[0]?.port ?? 0);
  await replicateThroughProxy(replica);
  // No renewals: the stale holder keeps believing it holds for the whole ttl, as a holder
  // paused across the failover would (a renewal would only tell it later, on the new master).
  const a = createLocker(server.url, { autoExtend: false });
  const b = createLocker(server.url);
  lockers.push(a, b);
  const warm = await a.lock('failover:warm-up');
  await warm.release();

  link.cut();
  const stale = await a.lock('failover:account', { ttlMs: 60_000 });
  await fencedSet(resource, 'account', stale.token, 'written by the first holder');
  const master = new Redis({ host: '127.0.0.1', port: masterPort });
  const onMaster = await master.keys('*failover:account*');
  master.disconnect();
  assert.ok(onMaster.length > 0, 'the master has the grant');
  // Sentinel re-points a replica that follows another address only failover-timeout (10 s)
  // after it noticed, and never while the master is down: the replica stays behind the cut.
  assert.deepEqual(await replica.keys('*failover:account*'), [], 'the replica never saw the grant');

  await server.master.nodes[0]?.kill();
  await eventually('Sentinel to promote the replica', async () => (await server.masterPort()) === replicaPort, 60_000, 100);
  const fresh = await b.lock('failover:account', { timeoutMs: 30_000 });

  // The double grant: both hold, as far as each can tell.
  assert.equal(stale.held, true, 'the first holder still believes it holds');
  assert.equal(stale.signal.aborted, false);
  assert.ok(stale.remainingMs() > 0);
  assert.equal(fresh.held, true);
  // The new primary never saw the old token, yet its token is above it: `max(last + 1,
  // server time in µs)`, and the failover took longer than any clock difference here.
  assert.ok(fresh.token > stale.token, `new token ${fresh.token} above the stale ${stale.token}`);

  // The new holder reads (a fenced read raises the fence), then the stale one writes: refused.
  assert.equal(await fencedGet(resource, 'account', fresh.token), 'written by the first holder');
  await assert.rejects(fencedSet(resource, 'account', stale.token, 'stale write'), StaleTokenError);
  await fencedSet(resource, 'account', fresh.token, 'written by the second holder');
  await assert.rejects(fencedGet(resource, 'account', stale.token), StaleTokenError);
  await assert.rejects(fencedSet(resource, 'account', stale.token, 'stale write'), StaleTokenError);
  assert.equal(await fencedGet(resource, 'account', fresh.token), 'written by the second holder');
  await fresh.release();
  await closeClients();
});

/**
 * A Redis primary deposed by a partition rather than killed (docs/backends/redis.md, "What it
 * assumes, and what breaks when the assumption fails"): Sentinel loses sight of it and
 * promotes the replica, while a client that still reaches it keeps locking there. Its grant
 * comes after the new primary's, so its token is above the new holder's (same clock): the
 * fence then sides with the deposed primary's holder — the known limit the page describes.
 * With `min-replicas-to-write 1` the deposed primary refuses the grant instead.
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { writeFile } from 'node:fs/promises';
import { test } from 'node:test';
import { Redis } from 'ioredis';
import { BackendUnavailableError, createLocker, StaleTokenError, type Locker } from '../../src/index.js';
import { fencedSet } from '../../src/fenced/index.js';
import { freePort, killChild, makeDataDir, removeDir, spawnServer } from '../../scripts/servers/harness.js';
import { rawCommand, REDIS_SERVER, startRedis } from '../../scripts/servers/redis.js';
import { eventually, faultProxy } from '../helpers.js';

const T = { timeout: 120_000 };

interface Deposed {
  /** On the deposed primary (a client on its side of the partition). */
  readonly old: Locker;
  /** Through Sentinel: on the promoted replica. */
  readonly current: Locker;
  readonly resource: Redis;
  close(): Promise<void>;
}

/** Master + replica + a Sentinel that sees the master only through a proxy, then cut it. */
async function partitionedPrimary(masterArgs: readonly string[]): Promise<Deposed> {
  const [master, resourceServer] = await Promise.all([startRedis({ extraArgs: masterArgs }), startRedis()]);
  const masterPort = master.nodes[0]?.port ?? 0;
  const replica = await startRedis({ extraArgs: ['--replicaof', '127.0.0.1', String(masterPort)] });
  const replicaPort = String(replica.nodes[0]?.port);
  const link = await faultProxy(masterPort);
  const port = await freePort();
  const dir = await makeDataDir('redis-sentinel');
  const conf = join(dir, 'sentinel.conf');
  const settings = ['down-after-milliseconds m 1000', 'failover-timeout m 10000'].map((s) => `sentinel ${s}`);
  const lines = [`port ${port}`, 'bind 127.0.0.1', `dir ${dir}`, `sentinel monitor m 127.0.0.1 ${link.port} 1`, ...settings];
  await writeFile(conf, `${lines.join('\n')}\n`);
  const sentinel = await spawnServer(REDIS_SERVER, [conf, '--sentinel'], { logFile: join(dir, 'sentinel.log'), cwd: dir });
  const ask = (cmd: string, done: (r: string) => boolean): Promise<string> => rawCommand(port, cmd, 2_000, done);
  await eventually(
    'Sentinel to know the replica',
    async () => (await ask('SENTINEL replicas m', (r) => r.length > 3)).includes(replicaPort),
    60_000,
    100,
  );
  const old = createLocker(master.url, { autoExtend: false });
  const resource = new Redis({ host: '127.0.0.1', port: resourceServer.nodes[0]?.port ?? 0 });
  link.cut();
  const promoted = async (): Promise<boolean> =>
    (await ask('SENTINEL get-master-addr-by-name m', (r) => /\r\n\d+\r\n$/.test(r))).includes(`\r\n${replicaPort}\r\n`);
  await eventually('Sentinel to promote the replica', promoted, 60_000, 100);
  const current = createLocker(`redis-sentinel://127.0.0.1:${port}/m`);
  return {
    old,
    current,
    resource,
    async close() {
      await Promise.all([old.close(), current.close()]);
      resource.disconnect();
      await killChild(sentinel);
      await link.close();
      await Promise.all([master.stop(), replica.stop(), resourceServer.stop()]);
      await removeDir(dir);
    },
  };
}

test(
  'a primary deposed by a partition keeps granting, with a token above the new primary’s: the fence sides with it (known limit)',
  T,
  async () => {
    const d = await partitionedPrimary([]);
    try {
      const current = await d.current.lock('deposed:account', { ttlMs: 60_000 });
      const stale = await d.old.lock('deposed:account', { ttlMs: 60_000, timeoutMs: 5_000 });
      assert.ok(stale.token > current.token, `the deposed primary's later grant ${stale.token} is above ${current.token}`);
      await fencedSet(d.resource, 'account', current.token, 'current holder');
      await fencedSet(d.resource, 'account', stale.token, 'deposed primary’s holder');
      await assert.rejects(fencedSet(d.resource, 'account', current.token, 'current holder again'), StaleTokenError);
    } finally {
      await d.close();
    }
  },
);

test('with min-replicas-to-write 1, the deposed primary refuses the grant (NOREPLICAS as BackendUnavailableError)', T, async () => {
  const d = await partitionedPrimary(['--min-replicas-to-write', '1', '--min-replicas-max-lag', '1']);
  try {
    const current = await d.current.lock('deposed:account', { ttlMs: 60_000 });
    await assert.rejects(d.old.lock('deposed:account', { timeoutMs: 5_000 }), (err: unknown) => {
      assert.ok(err instanceof BackendUnavailableError, String(err));
      assert.match(err.message, /NOREPLICAS/);
      return true;
    });
    await fencedSet(d.resource, 'account', current.token, 'current holder');
    await current.release();
  } finally {
    await d.close();
  }
});

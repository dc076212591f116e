/**
 * The shared conformance suite against a real 3-node ZooKeeper ensemble on loopback.
 *
 * A crash is modelled the ZooKeeper way: the client is cut off from every server without
 * closing its session, so its ephemeral nodes go only when the ensemble expires the session.
 */
import { after, before } from 'node:test';
import { createLocker, type Locker } from '../../src/index.js';
import { abandon } from '../../src/testing.js';
import { ZooKeeperBackend, createZooKeeperBackend } from '../../src/backends/zookeeper/index.js';
import { startZooKeeper, type RunningZooKeeper } from '../../scripts/servers/zookeeper.js';
import { conformance } from './suite.js';

/** Short sessions keep the crash cases quick; long enough for a loaded 2-core machine. */
const SESSION_TIMEOUT_MS = 4_000;

let server: RunningZooKeeper | undefined;
const backends = new WeakMap<Locker, ZooKeeperBackend>();

before(async () => {
  server = await startZooKeeper({ nodes: 3 });
});

after(async () => {
  await server?.stop();
});

function url(): string {
  if (!server) throw new Error('the ZooKeeper ensemble is not running');
  return `zookeeper://${server.connectString}/locksmith-conformance?sessionTimeoutMs=${SESSION_TIMEOUT_MS}`;
}

conformance({
  name: 'zookeeper',
  createLocker(options) {
    const backend = createZooKeeperBackend(url());
    const locker = createLocker(backend, options);
    backends.set(locker, backend);
    return locker;
  },
  capabilities: new ZooKeeperBackend({ connectString: '127.0.0.1:1' }).capabilities,
  shortTtlMs: 1_000,
  async crash(locker) {
    await backends.get(locker)?.abandon();
    await abandon(locker);
  },
});

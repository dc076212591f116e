/**
 * The shared conformance suite against a real 3-node ZooKeeper ensemble on loopback.
 *
 * A crash is modelled the ZooKeeper way (the default `abandon()`, through the backend's
 * testing-only `Abandonable` hook): the client is cut off from every server without closing
 * its session, so its ephemeral nodes go only when the ensemble expires the session.
 */
import { createLocker } from '../../src/index.js';
import { startZooKeeper } from '../../scripts/servers/zookeeper.js';
import { useServer } from '../helpers.js';
import { conformance } from './suite.js';

/** Short sessions keep the crash cases quick; long enough for a loaded 2-core machine. */
const SESSION_TIMEOUT_MS = 4_000;

// The lock-delay cases ask for up to 60 s: its marker session (docs/backends/zookeeper.md,
// "Lock-delay") needs more than the harness's default 60 s maximum.
const server = await useServer(() => startZooKeeper({ nodes: 3, maxSessionTimeoutMs: 120_000 }));
const url = `${server.url}/locksmith-conformance?sessionTimeoutMs=${SESSION_TIMEOUT_MS}`;

await conformance({
  name: 'zookeeper',
  createLocker: (options) => createLocker(url, options),
  url,
  blackHoleUrl: (port) => `zookeeper://127.0.0.1:${port}/locksmith`,
  shortTtlMs: 1_000,
});

/**
 * The shared conformance suite against Redlock on five real redis-servers started by the harness.
 */
import { createLocker } from '../../src/index.js';
import { startRedlock } from '../../scripts/servers/redlock.js';
import { useServer } from '../helpers.js';
import { conformance } from './suite.js';

const server = await useServer(() => startRedlock({ count: 5 }));

await conformance({
  name: 'redlock (5 masters)',
  createLocker: (options) => createLocker(server.url, options),
  url: server.url,
  // Five masters and the client share two CPUs with other test runs: 300 ms leases renewed
  // every 100 ms over five round trips each lost their lock under that load now and then.
  shortTtlMs: 800,
  blackHoleUrl: (port) => `redlock://127.0.0.1:${port}`,
});

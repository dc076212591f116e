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
  shortTtlMs: 300,
  blackHoleUrl: (port) => `redlock://127.0.0.1:${port}`,
});

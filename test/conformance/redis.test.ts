/**
 * The shared conformance suite against a real redis-server started by the harness.
 */
import { after, before } from 'node:test';
import { createLocker } from '../../src/index.js';
import { REDIS_CAPABILITIES } from '../../src/backends/redis/index.js';
import { startRedis } from '../../scripts/servers/redis.js';
import type { RunningServer } from '../../scripts/servers/harness.js';
import { conformance } from './suite.js';

let server: RunningServer | undefined;

before(async () => {
  server = await startRedis();
});

after(async () => {
  await server?.stop();
});

conformance({
  name: 'redis',
  createLocker: (options) => {
    if (!server) throw new Error('redis-server is not running');
    return createLocker(server.url, options);
  },
  capabilities: REDIS_CAPABILITIES,
  shortTtlMs: 300,
});

/**
 * The shared conformance suite against a real redis-server started by the harness.
 */
import { createLocker } from '../../src/index.js';
import { startRedis } from '../../scripts/servers/redis.js';
import { useServer } from '../helpers.js';
import { conformance } from './suite.js';

const server = await useServer(() => startRedis());

await conformance({
  name: 'redis',
  createLocker: (options) => createLocker(server.url, options),
  url: server.url,
  shortTtlMs: 300,
  blackHoleUrl: (port) => `redis://127.0.0.1:${port}`,
});

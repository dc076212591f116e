/**
 * The shared conformance suite against a real PostgreSQL started by the harness (tables
 * created by `?migrate=true`).
 */
import { createLocker } from '../../src/index.js';
import { startPostgres } from '../../scripts/servers/postgres.js';
import { useServer } from '../helpers.js';
import { conformance } from './suite.js';

const server = await useServer(() => startPostgres());

await conformance({
  name: 'postgres',
  createLocker: (options) => createLocker(`${server.url}?migrate=true`, options),
  secret: decodeURIComponent(new URL(server.url).password),
  // shortTtlMs stays at the suite's default 500 ms: its loss-timer case has a 5 % margin, which a loaded 2-core machine can eat at 300 ms.
  blackHoleUrl: (port) => `postgres://u:p@127.0.0.1:${port}/locksmith`,
});

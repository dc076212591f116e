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
  shortTtlMs: 300,
  blackHoleUrl: (port) => `postgres://u:p@127.0.0.1:${port}/locksmith`,
});

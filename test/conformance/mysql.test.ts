/**
 * The shared conformance suite against a real MariaDB started by the harness (tables created
 * by `?migrate=true`).
 */
import { createLocker } from '../../src/index.js';
import { startMariaDb } from '../../scripts/servers/mariadb.js';
import { useServer } from '../helpers.js';
import { conformance } from './suite.js';

const server = await useServer(() => startMariaDb());

await conformance({
  name: 'mysql (MariaDB)',
  createLocker: (options) => createLocker(`${server.url}?migrate=true`, options),
  shortTtlMs: 300,
  blackHoleUrl: (port) => `mysql://u:p@127.0.0.1:${port}/locksmith`,
});

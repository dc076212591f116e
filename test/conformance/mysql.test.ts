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
  secret: decodeURIComponent(new URL(server.url).password),
  // shortTtlMs stays at the suite's default 500 ms: its loss-timer case has a 5 % margin, which a loaded 2-core machine can eat at 300 ms.
  blackHoleUrl: (port) => `mysql://u:p@127.0.0.1:${port}/locksmith`,
});

/**
 * The conformance suite through PgBouncer in transaction-pooling mode (3 server connections
 * shared by every client): nothing of the lease algorithm is bound to a session, so it holds
 * unchanged; only LISTEN is off (`?listen=false`, waiters poll).
 */
import { createLocker } from '../../src/index.js';
import { startPgBouncer, startPostgres } from '../../scripts/servers/postgres.js';
import { useServer } from '../helpers.js';
import { conformance } from '../conformance/suite.js';

const server = await useServer(() => startPostgres());
const bouncer = await useServer(() => startPgBouncer(server));

await conformance({
  name: 'postgres through PgBouncer (transaction pooling)',
  createLocker: (options) => createLocker(`${bouncer.url}?migrate=true&listen=false&pollMs=50`, options),
  // shortTtlMs stays at the suite's default 500 ms: its loss-timer case has a 5 % margin, which a loaded 2-core machine can eat at 300 ms.
});

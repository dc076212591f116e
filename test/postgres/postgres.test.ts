/** PostgreSQL beyond the conformance suite: the shared SQL cases of test/sql/cases.ts. */
import { admin, startPostgres } from '../../scripts/servers/postgres.js';
import { useServer } from '../helpers.js';
import { sqlCases } from '../sql/cases.js';

const server = await useServer(() => startPostgres());
const node = server.nodes[0]!;

sqlCases({
  name: 'postgres',
  url: `${server.url}?migrate=true`,
  restart: () => node.restart(),
  killConnections: async () =>
    (
      await admin(node.port, [
        "SELECT pg_terminate_backend(pid) AS killed FROM pg_stat_activity WHERE usename = 'locksmith' AND pid <> pg_backend_pid()",
      ])
    ).length,
});

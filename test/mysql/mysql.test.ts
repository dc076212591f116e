/** MariaDB beyond the conformance suite: the shared SQL cases of test/sql/cases.ts. */
import { adminMariaDb, startMariaDb } from '../../scripts/servers/mariadb.js';
import { useServer } from '../helpers.js';
import { sqlCases } from '../sql/cases.js';

const server = await useServer(() => startMariaDb());
const node = server.nodes[0]!;

sqlCases({
  name: 'mysql (MariaDB)',
  url: `${server.url}?migrate=true`,
  restart: () => node.restart(),
  killConnections: async () => {
    const rows = (await adminMariaDb(server.socket, ["SELECT id FROM information_schema.processlist WHERE user = 'locksmith'"])) as {
      id: number;
    }[];
    for (const r of rows) await adminMariaDb(server.socket, [`KILL ${r.id}`]).catch(() => undefined);
    return rows.length;
  },
});

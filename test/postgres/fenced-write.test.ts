/** Fenced writes on a real PostgreSQL (`fencedUpdatePostgres`, docs/recipes/fencing.md). */
import { after } from 'node:test';
import pg from 'pg';
import { createLocker } from '../../src/index.js';
import { fencedUpdatePostgres } from '../../src/fenced/index.js';
import { startPostgres } from '../../scripts/servers/postgres.js';
import { useServer } from '../helpers.js';
import { fencedSqlCases } from '../sql/fenced-cases.js';

const server = await useServer(() => startPostgres());
const pool = new pg.Pool({ connectionString: server.url, max: 4 });
// The harness may stop the server before this hook ends the pool: an idle client's error then is expected.
pool.on('error', () => undefined);
after(() => pool.end());

fencedSqlCases({
  name: 'postgres',
  exec: async (sql, values) => {
    let n = 0;
    return (
      await pool.query(
        sql.replaceAll('?', () => `$${++n}`),
        values,
      )
    ).rows as Record<string, unknown>[];
  },
  update: (u) => fencedUpdatePostgres(pool, u),
  text: (c) => `CAST(${c} AS TEXT)`,
  locker: () => createLocker(`${server.url}?migrate=true`),
});

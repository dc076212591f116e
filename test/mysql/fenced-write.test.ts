/** Fenced writes on a real MariaDB (`fencedUpdateMysql`, docs/recipes/fencing.md), through mysql2's promise pool. */
import { after } from 'node:test';
import mysql from 'mysql2/promise';
import { createLocker } from '../../src/index.js';
import { fencedUpdateMysql } from '../../src/fenced/index.js';
import { startMariaDb } from '../../scripts/servers/mariadb.js';
import { useServer } from '../helpers.js';
import { fencedSqlCases } from '../sql/fenced-cases.js';

const server = await useServer(() => startMariaDb());
const pool = mysql.createPool({ uri: server.url, connectionLimit: 4 });
after(() => pool.end());

fencedSqlCases({
  name: 'mysql',
  exec: async (sql, values) => {
    const [rows] = await pool.query(sql, values);
    return Array.isArray(rows) ? (rows as Record<string, unknown>[]) : [];
  },
  update: (u) => fencedUpdateMysql(pool, u),
  text: (c) => `CAST(${c} AS CHAR)`,
  locker: () => createLocker(`${server.url}?migrate=true`),
});

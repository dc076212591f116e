/** MariaDB beyond the conformance suite: the shared SQL cases of test/sql/cases.ts, the scheme alias, a user's pool. */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { describe, test } from 'node:test';
import mysql from 'mysql2/promise';
import { createLocker } from '../../src/index.js';
import { createMysqlBackend, migrate } from '../../src/backends/mysql/index.js';
import { adminMariaDb, startMariaDb } from '../../scripts/servers/mariadb.js';
import { useServer } from '../helpers.js';
import { sqlCases, type SqlTarget } from '../sql/cases.js';
import { sqlSweepCases } from '../sql/sweep.js';
import { sqlObserveCases } from '../sql/observe.js';

const server = await useServer(() => startMariaDb());
const node = server.nodes[0]!;

const target: SqlTarget = {
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
  killConnectionsNow: () => {
    const cli = (sql: string): string =>
      execFileSync('mariadb', ['-S', server.socket, '-u', 'root', '-N', '-B', '-e', sql], { encoding: 'utf8' });
    const kills = cli("SELECT CONCAT('KILL ', id, ';') FROM information_schema.processlist WHERE user = 'locksmith'").trim();
    if (kills !== '') cli(kills);
  },
  countInserts: async (table) => {
    await adminMariaDb(server.socket, [
      `CREATE TABLE locksmith.${table}_n (n BIGINT NOT NULL)`,
      `INSERT INTO locksmith.${table}_n VALUES (0)`,
      `CREATE TRIGGER locksmith.${table}_t BEFORE INSERT ON locksmith.${table} FOR EACH ROW UPDATE locksmith.${table}_n SET n = n + 1`,
    ]);
    return async () => Number(((await adminMariaDb(server.socket, [`SELECT n FROM locksmith.${table}_n`])) as { n: unknown }[])[0]?.n);
  },
  rowsOf: async (lockId) => {
    const count = async (table: string): Promise<number> =>
      Number(
        (
          (await adminMariaDb(server.socket, [`SELECT count(*) AS n FROM locksmith.${table} WHERE lock_id = '${lockId}'`])) as {
            n: unknown;
          }[]
        )[0]?.n,
      );
    return { locks: await count('locksmith_locks'), holders: await count('locksmith_holders'), queue: await count('locksmith_queue') };
  },
  exec: async (sql) => {
    await adminMariaDb(server.socket, [`USE locksmith`, sql]);
  },
};
sqlCases(target);
sqlSweepCases(target);
sqlObserveCases(target);

describe('mysql: scheme alias and pools', () => {
  test('mariadb:// is the same backend', { timeout: 60_000 }, async () => {
    const l = createLocker(`${server.url.replace(/^mysql:/, 'mariadb:')}?migrate=true`);
    try {
      const lock = await l.lock(`my:alias:${randomBytes(4).toString('hex')}`);
      assert.equal((await l.backend()).name, 'mysql');
      await lock.release();
    } finally {
      await l.close();
    }
  });

  test('quotes and backslashes in lock ids stay data even in a NO_BACKSLASH_ESCAPES session', { timeout: 60_000 }, async () => {
    const pool = mysql.createPool({ uri: server.url, connectionLimit: 2, multipleStatements: true });
    pool.on('connection', (c) => {
      c.query("SET SESSION sql_mode = CONCAT(@@SESSION.sql_mode, ',NO_BACKSLASH_ESCAPES')");
    });
    try {
      await migrate(pool, { table: 'quoting' });
      const l = createLocker(await createMysqlBackend(pool, { table: 'quoting' }));
      const ids = ["it's", 'back\\slash', "x\\'; DROP TABLE quoting_locks; -- ", 'x\\'];
      const held = await Promise.all(ids.map((id) => l.lock(id)));
      assert.equal(new Set(held.map((h) => h.lockId)).size, ids.length);
      for (const h of held) assert.equal((await l.inspect(h.lockId)).holders.length, 1);
      await Promise.all(held.map((h) => h.release()));
      await l.close();
      const [rows] = await pool.query('SELECT COUNT(*) AS n FROM quoting_locks');
      assert.deepEqual(rows, [{ n: ids.length }], 'the table is there, one row per id');
    } finally {
      await pool.end();
    }
  });

  test(
    "a user's pool (one statement per round trip): migrate(pool), locks through it, close() leaves the pool open",
    { timeout: 60_000 },
    async () => {
      const pool = mysql.createPool({ uri: server.url, connectionLimit: 4 });
      try {
        await migrate(pool, { table: 'userpool' });
        const lockId = `my:pool:${randomBytes(4).toString('hex')}`;
        const a = createLocker(await createMysqlBackend(pool, { table: 'userpool' }));
        const b = createLocker(await createMysqlBackend(pool, { table: 'userpool' }));
        const lock = await a.lock(lockId);
        assert.equal(await b.tryLock(lockId), null);
        const next = b.lock(lockId, { timeoutMs: 30_000 });
        await lock.release();
        const got = await next;
        assert.ok(got.token > lock.token);
        assert.equal((await b.inspect(lockId)).holders[0]?.token, got.token);
        await got.release();
        await a.close();
        await b.close();
        const [rows] = await pool.query('SELECT 1 AS one');
        assert.deepEqual(rows, [{ one: 1 }], 'the pool is still usable');
      } finally {
        await pool.end();
      }
    },
  );

  test('lockers of one process on the same tables hand off without waiting for the poll', { timeout: 60_000 }, async () => {
    // A poll of 60 s (45–75 s with jitter) and a holder's lease of 60 s (the waiter also looks
    // when it should run out): only a wake-up from the other locker's commit can let the
    // waiter in within the 20 s this test gives it.
    const url = `${server.url}?migrate=true&pollMs=60000`;
    const a = createLocker(url, { ttlMs: 60_000 });
    const b = createLocker(url, { ttlMs: 60_000 });
    const lockId = `my:local-wake:${randomBytes(4).toString('hex')}`;
    try {
      for (const fair of [true, false]) {
        const held = await a.lock(lockId);
        const queued = new Promise<void>((resolve) => b.once('waiting', () => resolve()));
        const next = b.lock(lockId, { fair, timeoutMs: 20_000 });
        await queued;
        await held.release();
        const got = await next;
        assert.ok(got.token > held.token, `fair: ${fair}`);
        await got.release();
      }
    } finally {
      await a.close();
      await b.close();
    }
  });
});

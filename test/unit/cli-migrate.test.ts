/**
 * `locksmith migrate`: `--print` writes the DDL without connecting; without it the DDL is
 * applied (idempotent) on a real PostgreSQL and a real MariaDB, after which `run` works and
 * before which it says to migrate (exit 78). The printed DDL is what the server accepts.
 */
import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { chmod, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import mysql from 'mysql2/promise';
import { freePort } from '../../scripts/servers/harness.js';
import { startPostgres } from '../../scripts/servers/postgres.js';
import { startMariaDb } from '../../scripts/servers/mariadb.js';
import { EXIT } from '../../src/cli/exit.js';
import { useServer } from '../helpers.js';
import { cli } from './cli-process.js';

// Passwords checked for the locksmith role (the harness trusts every local connection).
const hbaDir = await mkdtemp(join(tmpdir(), 'locksmith-hba-'));
const hbaFile = join(hbaDir, 'pg_hba.conf');
await writeFile(hbaFile, 'host all postgres 127.0.0.1/32 trust\nhost all all 127.0.0.1/32 scram-sha-256\n');
await chmod(hbaDir, 0o755);
await chmod(hbaFile, 0o644);
after(() => rm(hbaDir, { recursive: true, force: true }));
const postgres = await useServer(() => startPostgres({ settings: { hba_file: hbaFile } }));
const mariadb = await useServer(() => startMariaDb());

test('migrate --print writes the DDL without connecting (SQL table prefix from ?table=, Cassandra keyspace)', async () => {
  const closed = await freePort();
  const pgDdl = await cli(['migrate', '--print', '-b', `postgres://u:pw@127.0.0.1:${closed}/db?table=jobs`]);
  assert.equal(pgDdl.code, 0, pgDdl.stderr);
  assert.match(pgDdl.stdout, /CREATE TABLE IF NOT EXISTS jobs_locks/);
  assert.match(pgDdl.stdout, /CREATE TABLE IF NOT EXISTS jobs_queue/);
  const myDdl = await cli(['migrate', '--print', '-b', `mysql://u:pw@127.0.0.1:${closed}/db`]);
  assert.equal(myDdl.code, 0, myDdl.stderr);
  assert.equal(myDdl.stdout.match(/CREATE TABLE IF NOT EXISTS locksmith_\w+ \(/g)?.length, 3);
  assert.match(myDdl.stdout, /ENGINE=InnoDB;/);
  const cql = await cli(['migrate', '--print', '-b', `cassandra://127.0.0.1:${closed}/locks_ks`]);
  assert.equal(cql.code, 0, cql.stderr);
  assert.match(cql.stdout, /CREATE KEYSPACE IF NOT EXISTS locks_ks/);
  assert.match(cql.stdout, /CREATE TABLE IF NOT EXISTS locks_ks\.lock_main/);
  const none = await cli(['migrate', '--print', '-b', 'redis://127.0.0.1:6379']);
  assert.deepEqual([none.code, none.stdout], [0, '']);
  assert.match(none.stderr, /keeps no schema/);
  assert.equal((await cli(['migrate', '--print', '-b', 'postgres://127.0.0.1/db?table=Bad-Name'])).code, EXIT.CONFIG);
});

for (const server of [
  { name: 'PostgreSQL', url: postgres.url },
  { name: 'MariaDB', url: mariadb.url },
]) {
  test(`${server.name}: run before migrate says to migrate (78); migrate creates the tables, twice is fine; run works`, async () => {
    const url = `${server.url}?table=cli_migrate`;
    const before = await cli(['run', '-b', url, 'job', 'true']);
    assert.equal(before.code, EXIT.CONFIG, before.stderr);
    assert.match(before.stderr, /locksmith migrate --backend URL/);
    for (let i = 0; i < 2; i += 1) {
      const migrated = await cli(['migrate', '-b', url]);
      assert.equal(migrated.code, 0, migrated.stderr);
    }
    const afterwards = await cli(['run', '-b', url, 'job', 'sh', '-c', 'test -n "$LOCKSMITH_TOKEN"']);
    assert.equal(afterwards.code, 0, afterwards.stderr);
  });

  test(`${server.name}: migrate with a refused password exits 78 and does not print it`, async () => {
    const wrong = server.url.replace(':secret@', ':not-the-secret@');
    const result = await cli(['migrate', '-b', wrong]);
    assert.equal(result.code, EXIT.CONFIG, result.stderr);
    assert.doesNotMatch(result.stdout + result.stderr, /not-the-secret/);
  });
}

test('the printed DDL is what PostgreSQL and MariaDB accept', async () => {
  const pgUrl = `${postgres.url}?table=printed`;
  const pgDdl = (await cli(['migrate', '--print', '-b', pgUrl])).stdout;
  const client = new pg.Client({ connectionString: postgres.url });
  await client.connect();
  await client.query(pgDdl).finally(() => client.end());
  assert.equal((await cli(['run', '-b', pgUrl, 'job', 'true'])).code, 0);

  const myUrl = `${mariadb.url}?table=printed`;
  const myDdl = (await cli(['migrate', '--print', '-b', myUrl])).stdout;
  const conn = await mysql.createConnection({ uri: mariadb.url, multipleStatements: true });
  await conn.query(myDdl).finally(() => conn.end());
  assert.equal((await cli(['run', '-b', myUrl, 'job', 'true'])).code, 0);
});

test('migrate on an unreachable database (PostgreSQL, Cassandra) exits 69', async () => {
  const closed = await freePort();
  const result = await cli(['migrate', '-b', `postgres://locksmith:secret@127.0.0.1:${closed}/locksmith`]);
  assert.equal(result.code, EXIT.UNAVAILABLE, result.stderr);
  const cassandra = await cli(['migrate', '-b', `cassandra://127.0.0.1:${closed}/locks_ks`]);
  assert.equal(cassandra.code, EXIT.UNAVAILABLE, cassandra.stderr);
});

/**
 * PostgreSQL beyond the conformance suite: the shared SQL cases of test/sql/cases.ts, NOTIFY
 * after the LISTEN connection was killed, the scheme alias, a user's pool.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { after, describe, test } from 'node:test';
import pg from 'pg';
import { createLocker, type Locker } from '../../src/index.js';
import { createPostgresBackend, migrate } from '../../src/backends/postgres/index.js';
import { admin, startPostgres } from '../../scripts/servers/postgres.js';
import { eventually, useServer, waitingOn } from '../helpers.js';
import { sqlCases, type SqlTarget } from '../sql/cases.js';
import { sqlSweepCases } from '../sql/sweep.js';
import { sqlObserveCases } from '../sql/observe.js';

const server = await useServer(() => startPostgres());
/**
 * Every connection of the test user but the LISTEN ones (a killed LISTEN connection is another
 * test's subject), waiting up to 5 s for each to end: every goodbye is then already sent.
 */
const KILL_POOLED =
  "SELECT pg_terminate_backend(pid, 5000) FROM pg_stat_activity WHERE usename = 'locksmith' AND pid <> pg_backend_pid() AND query NOT LIKE 'LISTEN %'";
const node = server.nodes[0]!;

const target: SqlTarget = {
  name: 'postgres',
  url: `${server.url}?migrate=true`,
  restart: () => node.restart(),
  killConnections: async () =>
    (
      await admin(node.port, [
        "SELECT pg_terminate_backend(pid) AS killed FROM pg_stat_activity WHERE usename = 'locksmith' AND pid <> pg_backend_pid()",
      ])
    ).length,
  killConnectionsNow: () => {
    execFileSync('psql', ['-h', '127.0.0.1', '-p', String(node.port), '-U', 'postgres', '-d', 'postgres', '-Atqc', KILL_POOLED]);
  },
  countInserts: async (table) => {
    await admin(
      node.port,
      [
        `CREATE TABLE ${table}_n (n bigint NOT NULL)`,
        `INSERT INTO ${table}_n VALUES (0)`,
        `CREATE FUNCTION ${table}_bump() RETURNS trigger SECURITY DEFINER LANGUAGE plpgsql AS $$ BEGIN UPDATE ${table}_n SET n = n + 1; RETURN NEW; END $$`,
        `CREATE TRIGGER ${table}_t BEFORE INSERT ON ${table} FOR EACH ROW EXECUTE FUNCTION ${table}_bump()`,
      ],
      'locksmith',
    );
    return async () => Number((await admin(node.port, [`SELECT n FROM ${table}_n`], 'locksmith'))[0]?.['n']);
  },
  rowsOf: async (lockId) => {
    const count = async (table: string): Promise<number> =>
      Number((await admin(node.port, [`SELECT count(*) AS n FROM ${table} WHERE lock_id = '${lockId}'`], 'locksmith'))[0]?.['n']);
    return { locks: await count('locksmith_locks'), holders: await count('locksmith_holders'), queue: await count('locksmith_queue') };
  },
  exec: async (sql) => {
    await admin(node.port, [sql], 'locksmith');
  },
};
sqlCases(target);
sqlSweepCases(target);
sqlObserveCases(target);

describe('postgres: wake-ups and pools', () => {
  const lockers: Locker[] = [];
  const client: Client = (url) => {
    const l = createLocker(url);
    lockers.push(l);
    return l;
  };
  after(async () => {
    await Promise.allSettled(lockers.map((l) => l.close()));
  });

  test('a waiter whose LISTEN connection was killed is still woken (its fallback poll is 60 s)', { timeout: 60_000 }, () =>
    listenKilledWaiterIsWoken(client),
  );

  test('quotes, backslashes, placeholders and dollar quotes in lock ids stay data', { timeout: 60_000 }, () => quotedIdsStayData(client));

  test('postgresql:// is the same backend', { timeout: 60_000 }, () => postgresqlSchemeAlias(client));

  test("a user's pool: migrate(pool), locks through it, and close() leaves the pool open", { timeout: 60_000 }, usersPoolStaysOpen);

  test(
    'an attempt aborted while it waits for a pooled connection runs later and leaves no hold (explicit owner)',
    { timeout: 60_000 },
    () => abortedInPoolLeavesNoHold(client),
  );
});

/** A locker on `url`, closed after the describe. */
type Client = (url: string) => Locker;

async function listenKilledWaiterIsWoken(client: Client): Promise<void> {
  const url = `${server.url}?migrate=true&pollMs=60000`;
  const lockId = `pg:listen:${randomBytes(4).toString('hex')}`;
  const a = client(url);
  const b = client(url);
  const held = await a.lock(lockId, { ttlMs: 60_000 });
  await b.backend();
  // Only the LISTEN connections: a pooled connection killed under the holder would fail its
  // release (pg hands out an idle client before it has read the server's goodbye).
  const killed = await admin(node.port, [
    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = 'locksmith' AND query LIKE 'LISTEN %'",
  ]);
  assert.ok(killed.length >= 2, `both LISTEN connections were killed (${killed.length})`);
  const waiting = waitingOn(b, lockId);
  const next = b.lock(lockId, { ttlMs: 60_000, timeoutMs: 30_000 });
  await waiting;
  await held.release();
  const got = await next;
  assert.ok(got.token > held.token);
  await got.release();
}

async function quotedIdsStayData(client: Client): Promise<void> {
  const l = client(`${server.url}?migrate=true`);
  const ids = ["it's", 'back\\slash', "x\\'; DROP TABLE locksmith_locks; --", "? $1 $$ E''", "'"];
  const held = await Promise.all(ids.map((id) => l.lock(id)));
  for (const h of held) assert.equal((await l.inspect(h.lockId)).holders[0]?.token, h.token);
  await Promise.all(held.map((h) => h.release()));
  const rows = await admin(node.port, ['SELECT count(*)::int AS n FROM locksmith_locks'], 'locksmith');
  assert.equal(rows.length, 1, 'the lock table is still there');
}

async function postgresqlSchemeAlias(client: Client): Promise<void> {
  const l = client(`${server.url.replace(/^postgres:/, 'postgresql:')}?migrate=true`);
  const lock = await l.lock(`pg:alias:${randomBytes(4).toString('hex')}`);
  assert.equal((await l.backend()).name, 'postgres');
  await lock.release();
}

async function usersPoolStaysOpen(): Promise<void> {
  const pool = new pg.Pool({ connectionString: server.url, max: 4, idleTimeoutMillis: 0 });
  const mine: Locker[] = [];
  try {
    await migrate(pool, { table: 'userpool' });
    const lockId = `pg:pool:${randomBytes(4).toString('hex')}`;
    const a = createLocker(await createPostgresBackend(pool, { table: 'userpool' }));
    const b = createLocker(await createPostgresBackend(pool, { table: 'userpool' }));
    mine.push(a, b);
    const lock = await a.lock(lockId);
    assert.equal(await b.tryLock(lockId), null);
    const next = b.lock(lockId, { timeoutMs: 30_000 });
    await lock.release();
    assert.ok((await next).token > lock.token);
    // close() resolves once its LISTEN connection has ended (the pool's 'remove'), so a
    // server shutdown after it reports nothing to this pool, which has no 'error' handler.
    let removed = 0;
    pool.on('remove', () => removed++);
    await a.close();
    assert.equal(removed, 1, "a's LISTEN connection has ended");
    await b.close();
    assert.equal(removed, 2, "b's LISTEN connection has ended");
    assert.equal((await pool.query('SELECT 1 AS one')).rows[0]?.one, 1, 'the pool is still usable');
  } finally {
    // A failed check must not leave a LISTEN connection checked out: pool.end() would wait for it.
    await Promise.allSettled(mine.map((l) => l.close()));
    await pool.end();
  }
}

/**
 * The attempt waits for the pool's only connection; the caller aborts; the connection comes
 * free and the attempt commits a grant nobody will use. An explicit owner gets no clean-up by
 * owner from the core (it may hold the lock elsewhere), so without the backend's own undo the
 * hold would block the lock for its whole 60 s ttl.
 */
async function abortedInPoolLeavesNoHold(client: Client): Promise<void> {
  // One connection and no LISTEN: the pool's queue (first come, first served) orders the steps.
  const pool = new pg.Pool({ connectionString: server.url, max: 1, idleTimeoutMillis: 0 });
  const mine: Locker[] = [];
  let busy: pg.PoolClient | undefined;
  try {
    await migrate(pool, { table: 'abortpool' });
    const lockId = `pg:abort:${randomBytes(4).toString('hex')}`;
    const a = createLocker(await createPostgresBackend(pool, { table: 'abortpool', listen: false }), { ttlMs: 60_000 });
    const b = client(`${server.url}?table=abortpool`);
    mine.push(a);
    busy = await pool.connect();
    const ctl = new AbortController();
    const attempt = a.lock(lockId, { owner: 'job-7', signal: ctl.signal });
    await eventually('the attempt waits for the connection', () => pool.waitingCount > 0);
    ctl.abort(new Error('gave up'));
    await assert.rejects(attempt, /gave up/);
    // Queued behind the attempt: once this has the connection, the attempt has committed.
    const probe = pool.connect();
    busy.release();
    busy = undefined;
    (await probe).release();
    const next = await b.lock(lockId, { timeoutMs: 10_000 });
    assert.equal((await b.inspect(lockId)).holders.length, 1, 'only the new holder');
    await next.release();
  } finally {
    busy?.release();
    await Promise.allSettled(mine.map((l) => l.close()));
    await pool.end();
  }
}

/**
 * `npm run bench:sql` — the benchmark matrix (src/bench-matrix/) on a real PostgreSQL and a real
 * MariaDB started by the harness: locksmith's lease rows (non-fair and fair) next to the
 * session-bound lock a Node user would otherwise write — `pg_advisory_lock` / `GET_LOCK`, one
 * dedicated connection per client, the server queueing the waiters — on the same server in
 * the same run, with ratios against that peer. Knobs: bench/common.ts (BENCH_QUICK=1 for a
 * smoke run), plus BENCH_ENGINES=postgres,mysql. See docs/benchmarks.md.
 *
 * The advisory locks have no lease, no fencing token and no fair queue, and break behind a
 * transaction-pooling proxy: they are the speed floor, not an equivalent.
 */
import pg from 'pg';
import mysql from 'mysql2/promise';
import { createLocker } from '../src/index.js';
import { lockerContender, type BenchClient, type Contender } from '../src/bench-matrix/index.js';
import { startPostgres } from '../scripts/servers/postgres.js';
import { startMariaDb } from '../scripts/servers/mariadb.js';
import { childOrMain, runEngine } from './common.js';

const TTL_MS = 10_000;
const ENGINES = (process.env['BENCH_ENGINES'] ?? 'postgres,mysql').split(',');

/** A dedicated connection's lock: `lock` waits on the server (it cannot be aborted), `unlock` gives it back. */
interface SessionLock {
  lock(lockId: string): Promise<unknown>;
  unlock(lockId: string): Promise<unknown>;
  end(): Promise<void>;
}

function sessionContender(name: string, open: () => Promise<SessionLock>): Contender {
  return {
    name,
    peer: true,
    reportsQueued: false,
    async client(): Promise<BenchClient> {
      const s = await open();
      return {
        async acquire(lockId) {
          await s.lock(lockId);
          return { release: async () => void (await s.unlock(lockId)) };
        },
        close: () => s.end(),
      };
    },
  };
}

/** `pg_advisory_lock` on one session per client (the lock dies with the session). */
const pgAdvisory = (url: string): Contender =>
  sessionContender('pg_advisory_lock', async () => {
    const c = new pg.Client({ connectionString: url });
    c.on('error', () => undefined);
    await c.connect();
    // The keys row has 64 acquisitions in flight on this one session. pg queues them itself,
    // but warns that a query sent while another runs will be an error in pg 9: queue them here.
    let tail: Promise<unknown> = Promise.resolve();
    const serial = (sql: string, id: string): Promise<unknown> => {
      const run = tail.then(() => c.query(sql, [id]));
      tail = run.catch(() => undefined);
      return run;
    };
    return {
      lock: (id) => serial('SELECT pg_advisory_lock(hashtext($1))', id),
      unlock: (id) => serial('SELECT pg_advisory_unlock(hashtext($1))', id),
      end: () => c.end(),
    };
  });

/** MariaDB's `GET_LOCK` on one connection per client (an hour's timeout: no acquire timeout in practice). */
const getLock = (url: string): Contender =>
  sessionContender('GET_LOCK', async () => {
    const c = await mysql.createConnection(url);
    c.on('error', () => undefined);
    return {
      lock: (id) => c.query('SELECT GET_LOCK(?, 3600)', [id]),
      unlock: (id) => c.query('SELECT RELEASE_LOCK(?)', [id]),
      end: () => c.end(),
    };
  });

function locksmith(url: string, fair: boolean): Contender {
  return lockerContender(fair ? 'locksmith (fair)' : 'locksmith', () => createLocker(`${url}?migrate=true`, { ttlMs: TTL_MS }), fair);
}

/** The server's version, for the header. */
async function pgVersion(url: string): Promise<string> {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    const r = await c.query<{ server_version: string }>('SHOW server_version');
    return r.rows[0]?.server_version ?? '?';
  } finally {
    await c.end();
  }
}

async function mariaDbVersion(url: string): Promise<string> {
  const c = await mysql.createConnection(url);
  try {
    const [rows] = await c.query('SELECT VERSION() AS v');
    return Array.isArray(rows) ? String((rows[0] as { v?: unknown } | undefined)?.v ?? '?') : '?';
  } finally {
    await c.end();
  }
}

/**
 * Every library of the run on the server at `url`, by its scheme (also what a forked hand-off
 * waiter makes from the same URL).
 */
function contenders(url: string): Contender[] {
  const peer = url.startsWith('mysql') ? getLock(url) : pgAdvisory(url);
  return [locksmith(url, false), locksmith(url, true), peer];
}

childOrMain(contenders, async () => {
  if (ENGINES.includes('postgres')) {
    const server = await startPostgres();
    try {
      await runEngine({
        engine: `postgresql ${await pgVersion(server.url)}`,
        contenders: contenders(server.url),
        fork: { script: import.meta.filename, url: server.url },
        notes: [`ttl ${TTL_MS} ms; pg_advisory_lock: one dedicated session per client, the server queues the waiters`],
      });
    } finally {
      await server.stop();
    }
  }
  if (ENGINES.includes('mysql')) {
    const server = await startMariaDb();
    try {
      await runEngine({
        engine: `mariadb ${await mariaDbVersion(server.url)}`,
        contenders: contenders(server.url),
        fork: { script: import.meta.filename, url: server.url },
        notes: [`ttl ${TTL_MS} ms; GET_LOCK: one dedicated connection per client, the server queues the waiters`],
      });
    } finally {
      await server.stop();
    }
  }
});

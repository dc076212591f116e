/**
 * `mysql://user:password@host:port/database?table=locksmith&migrate=true` (or `mariadb://`) —
 * lease rows in MySQL/MariaDB: expiry on the database's clock, fencing tokens from the lock
 * row, a fair queue table; waiting by a bounded jittered poll (MySQL has no notifications)
 * and, for a first waiter, a server-side sleep that a release in another process ends
 * (bells.ts); no lock bound to a session. See docs/backends/mysql.md.
 */
import mysql from 'mysql2/promise';
import { InvalidArgumentError, redact, secretsOf, unavailable, UrlParams, type Backend, type ConnectOptions } from '../kit.js';
import { missingColumns, missingTable, SqlBackend } from '../sql/backend.js';
import { tablesOf } from '../sql/statements.js';
import { sqlUrlParts } from '../sql/url.js';
import { Bells } from './bells.js';
import { MysqlEngine, NOW_US } from './engine.js';
import { migrateMysql, type MysqlQueryable } from './schema.js';

export { mysqlDdl, type MysqlQueryable } from './schema.js';
export { SqlBackend } from '../sql/backend.js';

/** Options of {@link createMysqlBackend} (the URL parameters of the same names). */
export interface MysqlOptions {
  /** Table prefix: tables `<table>_locks`, `<table>_holders`, `<table>_queue` (default `locksmith`). */
  readonly table?: string;
  /** Create the tables if missing before the first use (default false). */
  readonly migrate?: boolean;
  /** Poll interval of a waiter (default 50 ms, jittered ±25 %). */
  readonly pollMs?: number;
  /**
   * Connections a backend that creates its pool keeps for server-side wake-ups of its first
   * waiters by releases in other processes (default 4; 0: waiters only poll). See
   * docs/backends/mysql.md, "Waiting". A user's own pool has none.
   */
  readonly bells?: number;
  /** How often to sweep expired rows of ids nobody uses any more (ms; 0: never; default 60000). */
  readonly sweepMs?: number;
  /** Longest wait for another transaction's row lock (default 2000 ms, whole seconds in InnoDB). */
  readonly lockTimeoutMs?: number;
  /** Pool size when the backend creates the pool (default 10). */
  readonly poolSize?: number;
  /** Secrets never to show in errors. */
  readonly secrets?: readonly string[];
}

const PARAMETERS = ['table', 'migrate', 'pollMs', 'sweepMs', 'lockTimeoutMs', 'poolSize', 'connectTimeoutMs', 'bells'] as const;

/**
 * The pool settings and backend options of a `mysql://` URL (throws `InvalidArgumentError`).
 * @internal
 */
export function parseMysqlUrl(url: URL, options: ConnectOptions = {}): { config: mysql.PoolOptions; options: MysqlOptions } {
  if (url.protocol !== 'mysql:' && url.protocol !== 'mariadb:') throw new InvalidArgumentError('url', `not a mysql URL: ${redact(url)}`);
  const q = new UrlParams(url, PARAMETERS);
  const parts = sqlUrlParts(url, 'mysql');
  const poolSize = q.int('poolSize', 10, { min: 1, max: 1000 });
  const config: mysql.PoolOptions = {
    host: decodeURIComponent(url.hostname.replace(/^\[|\]$/g, '')) || 'localhost',
    port: url.port === '' ? 3306 : Number(url.port),
    ...parts,
    connectionLimit: poolSize,
    connectTimeout: q.int('connectTimeoutMs', options.connectTimeoutMs ?? 10_000, { min: 1 }),
    charset: 'utf8mb4',
    supportBigNumbers: true,
    bigNumberStrings: true,
    // One round trip per batch of statements; values are still escaped by the driver.
    multipleStatements: true,
  };
  return {
    config,
    options: {
      table: q.string('table') ?? 'locksmith',
      migrate: q.bool('migrate', false),
      pollMs: q.int('pollMs', 50, { min: 1, max: 60_000 }),
      bells: q.int('bells', 4, { min: 0, max: 100 }),
      sweepMs: q.int('sweepMs', 60_000, { min: 0, max: 86_400_000 }),
      lockTimeoutMs: q.int('lockTimeoutMs', 2_000, { min: 1, max: 60_000 }),
      poolSize,
      secrets: secretsOf(url),
    },
  };
}

/** Factory used by `createLocker('mysql://…')`. */
export async function createBackend(url: URL, options: ConnectOptions = {}): Promise<Backend> {
  const parsed = parseMysqlUrl(url, options);
  const pool = mysql.createPool(parsed.config);
  try {
    return await open(pool, parsed.config, parsed.options);
  } catch (err) {
    await pool.end().catch(() => undefined);
    throw unavailable('mysql', `connect to ${redact(url)}`, err, { secrets: parsed.options.secrets ?? [] });
  }
}

/** A backend over a URL string or the user's own mysql2/promise pool (which it never ends). */
export async function createMysqlBackend(target: string | mysql.Pool, options: MysqlOptions = {}): Promise<SqlBackend> {
  if (typeof target !== 'string') return open(target, undefined, options);
  const parsed = parseMysqlUrl(new URL(target));
  const pool = mysql.createPool(parsed.config);
  return open(pool, parsed.config, { ...parsed.options, ...options }).catch(async (err: unknown) => {
    await pool.end().catch(() => undefined);
    throw err;
  });
}

/** Create the lock tables (idempotent) through a pool, a connection or a URL. */
export async function migrate(target: string | MysqlQueryable, options: { table?: string } = {}): Promise<void> {
  if (typeof target !== 'string') return migrateMysql(target, options.table);
  const conn = await mysql.createConnection(parseMysqlUrl(new URL(target)).config);
  try {
    await migrateMysql(conn, options.table);
  } finally {
    await conn.end();
  }
}

/** What the server calls its session variables, and where it is (host, port, database): MariaDB before 11.1 knows only `tx_isolation`, MySQL 8 only `transaction_isolation`; only MariaDB ends idle transactions. */
async function serverVariables(pool: mysql.Pool): Promise<{ isolationVariable: string; mariadb: boolean; server: string }> {
  const [rows] = await pool.query('SELECT @@version AS v, @@hostname AS h, @@port AS p, DATABASE() AS d');
  const row = Array.isArray(rows) ? (rows[0] as { v?: unknown; h?: unknown; p?: unknown; d?: unknown } | undefined) : undefined;
  const v = String(row?.v ?? '');
  const m = /^(\d+)\.(\d+)/.exec(v);
  const [major, minor] = [Number(m?.[1] ?? 0), Number(m?.[2] ?? 0)];
  const mariadb = /mariadb/i.test(v);
  return {
    isolationVariable: mariadb && (major < 11 || (major === 11 && minor < 1)) ? 'tx_isolation' : 'transaction_isolation',
    mariadb,
    server: `${String(row?.h ?? '?')}:${String(row?.p ?? '?')}/${String(row?.d ?? '?')}`,
  };
}

/**
 * The backend over `pool`; `config` is that of a pool the backend created (it then owns it,
 * and opens its bell connections with the same settings).
 */
async function open(pool: mysql.Pool, config: mysql.PoolOptions | undefined, o: MysqlOptions): Promise<SqlBackend> {
  const ownsPool = config !== undefined;
  const prefix = o.table ?? 'locksmith';
  const tables = tablesOf(prefix);
  if (o.migrate) await migrateMysql(pool, prefix);
  try {
    await pool.query(`SELECT 1 FROM ${tables.locks} WHERE 1 = 0`);
    // Tables of an older version fail every acquisition (it writes the identity): say so now.
    await pool.query(`SELECT identity, acquired_us, permits, weight FROM ${tables.holders} WHERE 1 = 0`);
    await pool.query(`SELECT identity, since_us, fair, weight FROM ${tables.queue} WHERE 1 = 0`);
  } catch (err) {
    if ((err as { code?: unknown }).code === 'ER_NO_SUCH_TABLE') throw missingTable('mysql', tables.locks, err);
    if ((err as { code?: unknown }).code === 'ER_BAD_FIELD_ERROR') throw missingColumns('mysql', tables.holders, err);
    throw err;
  }
  const { server, ...variables } = await serverVariables(pool);
  const scope = `${server}/${prefix}`;
  const limit = o.bells ?? 4;
  // The bells' own pool: a sleeping waiter never takes a connection the operations need.
  const bells =
    config && limit > 0
      ? new Bells(mysql.createPool({ ...config, connectionLimit: limit, multipleStatements: false }), pool, limit, scope, {
          table: tables.holders,
          nowSql: NOW_US,
        })
      : undefined;
  const engine = new MysqlEngine(pool, { tables, batch: ownsPool, lockTimeoutMs: o.lockTimeoutMs ?? 2_000, ...variables, ownsPool, bells });
  // Lockers of this process on the same tables wake each other's head at once (no poll).
  return new SqlBackend(engine, {
    sweepMs: o.sweepMs ?? 60_000,
    pollMs: o.pollMs ?? 50,
    secrets: o.secrets ?? [],
    scope,
  });
}

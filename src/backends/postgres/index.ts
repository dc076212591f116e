/**
 * `postgres://user:password@host:port/database?table=locksmith&migrate=true` — lease rows in
 * PostgreSQL: expiry on the database's clock, fencing tokens from the lock row, a fair queue
 * table, LISTEN/NOTIFY wake-ups with a bounded fallback poll, nothing bound to a session.
 * `postgresql://` is the same. See docs/backends/postgres.md.
 */
import pg from 'pg';
import { InvalidArgumentError, redact, secretsOf, unavailable, UrlParams, type Backend, type ConnectOptions } from '../kit.js';
import { SqlBackend } from '../sql/backend.js';
import { missingColumns, missingTable } from '../sql/errors.js';
import { tablesOf } from '../sql/statements.js';
import { sqlUrlParts } from '../sql/url.js';
import { PgEngine } from './engine.js';
import { migratePostgres, type PgPoolLike, type PgQueryable } from './schema.js';

export { postgresDdl, type PgPoolLike, type PgQueryable } from './schema.js';
export { SqlBackend } from '../sql/backend.js';

/** Options of {@link createPostgresBackend} (the URL parameters of the same names). */
export interface PostgresOptions {
  /** Table prefix: tables `<table>_locks`, `<table>_holders`, `<table>_queue` (default `locksmith`). */
  readonly table?: string;
  /** Create the tables if missing before the first use (default false). */
  readonly migrate?: boolean;
  /** Longest sleep of a waiter between attempts, the fallback of NOTIFY (default 250 ms). */
  readonly pollMs?: number;
  /** How often to sweep expired rows of ids nobody uses any more (ms; 0: never; default 60000). */
  readonly sweepMs?: number;
  /** LISTEN for wake-ups (default true; false behind a transaction-pooling PgBouncer). */
  readonly listen?: boolean;
  /**
   * How `locker.watch()` learns of changes (default `'poll'`: it lists once a second, and lock
   * operations run nothing extra). `'notify'`: every write also runs an advisory-lock check and,
   * while somebody watches, a NOTIFY; set it on every client that writes the watched locks
   * (docs/backends/postgres.md, "Watching").
   */
  readonly watch?: 'poll' | 'notify';
  /** Longest wait for another transaction's row lock (default 2000 ms). */
  readonly lockTimeoutMs?: number;
  /** Pool size when the backend creates the pool (default 10, plus the LISTEN connection). */
  readonly poolSize?: number;
  /** Secrets never to show in errors. */
  readonly secrets?: readonly string[];
}

const WATCH_MODES = ['poll', 'notify'] as const;
const PARAMETERS = ['table', 'migrate', 'pollMs', 'sweepMs', 'listen', 'watch', 'lockTimeoutMs', 'poolSize', 'connectTimeoutMs'] as const;

/**
 * The pool settings and backend options of a `postgres://` URL (throws `InvalidArgumentError`).
 * @internal
 */
export function parsePostgresUrl(url: URL, options: ConnectOptions = {}): { config: PgPoolConfig; options: PostgresOptions } {
  if (url.protocol !== 'postgres:' && url.protocol !== 'postgresql:') {
    throw new InvalidArgumentError('url', `not a postgres URL: ${redact(url)}`);
  }
  const q = new UrlParams(url, PARAMETERS);
  const parts = sqlUrlParts(url, 'postgres');
  const poolSize = q.int('poolSize', 10, { min: 1, max: 1000 });
  const config: PgPoolConfig = {
    host: decodeURIComponent(url.hostname.replace(/^\[|\]$/g, '')) || 'localhost',
    port: url.port === '' ? 5432 : Number(url.port),
    ...parts,
    max: poolSize + 1,
    connectionTimeoutMillis: q.int('connectTimeoutMs', options.connectTimeoutMs ?? 10_000, { min: 1 }),
    application_name: 'locksmith',
  };
  return {
    config,
    options: {
      table: q.string('table') ?? 'locksmith',
      migrate: q.bool('migrate', false),
      pollMs: q.int('pollMs', 250, { min: 1, max: 60_000 }),
      sweepMs: q.int('sweepMs', 60_000, { min: 0, max: 86_400_000 }),
      listen: q.bool('listen', true),
      watch: q.oneOf('watch', WATCH_MODES, 'poll'),
      lockTimeoutMs: q.int('lockTimeoutMs', 2_000, { min: 1, max: 60_000 }),
      poolSize,
      secrets: secretsOf(url),
    },
  };
}

/** Factory used by `createLocker('postgres://…')`. */
export async function createBackend(url: URL, options: ConnectOptions = {}): Promise<Backend> {
  const parsed = parsePostgresUrl(url, options);
  const pool = new pg.Pool(parsed.config);
  // An idle pooled connection that dies (server restart, pg_terminate_backend) must not crash the process.
  pool.on('error', () => undefined);
  try {
    return await open(pool, true, parsed.options);
  } catch (err) {
    await pool.end().catch(() => undefined);
    throw unavailable('postgres', `connect to ${redact(url)}`, err, { secrets: parsed.options.secrets ?? [] });
  }
}

/**
 * A backend over a URL string or the user's own `pg.Pool` (which it never ends). The pool
 * keeps one connection checked out for LISTEN unless `listen: false`.
 */
export async function createPostgresBackend(target: string | PgPoolLike, options: PostgresOptions = {}): Promise<SqlBackend> {
  if (typeof target === 'string') {
    const parsed = parsePostgresUrl(new URL(target));
    const pool = new pg.Pool(parsed.config);
    pool.on('error', () => undefined);
    return open(pool, true, { ...parsed.options, ...options }).catch(async (err: unknown) => {
      await pool.end().catch(() => undefined);
      throw err;
    });
  }
  // Any pg.Pool fits PgPoolLike; the engine uses the rest of the pool's API.
  return open(target as pg.Pool, false, options);
}

/** Create the lock tables (idempotent) through a pool, a client or a URL. */
export async function migrate(target: string | PgQueryTarget, options: { table?: string } = {}): Promise<void> {
  if (typeof target !== 'string') return migratePostgres(target, options.table);
  const client = new pg.Client(parsePostgresUrl(new URL(target)).config);
  await client.connect();
  try {
    await migratePostgres(client, options.table);
  } finally {
    await client.end();
  }
}

/** A `pg.Pool` or a connected `pg.Client` (structural: no `@types/pg` needed). */
export type PgQueryTarget = PgQueryable;

/** The pool settings locksmith derives from a URL (the fields of `pg.PoolConfig` it sets). */
interface PgPoolConfig {
  readonly host: string;
  readonly port: number;
  readonly user?: string;
  readonly password?: string;
  readonly database?: string;
  readonly max: number;
  readonly connectionTimeoutMillis: number;
  readonly application_name: string;
}

async function open(pool: pg.Pool, ownsPool: boolean, o: PostgresOptions): Promise<SqlBackend> {
  const prefix = o.table ?? 'locksmith';
  const tables = tablesOf(prefix);
  if (o.migrate) await migratePostgres(pool, prefix);
  try {
    await pool.query(`SELECT 1 FROM ${tables.locks} WHERE false`);
    // Tables of an older version fail every acquisition (it writes the identity): say so now.
    await pool.query(`SELECT identity, acquired_us, permits, weight FROM ${tables.holders} WHERE false`);
    await pool.query(`SELECT identity, since_us, fair, weight FROM ${tables.queue} WHERE false`);
  } catch (err) {
    if ((err as { code?: unknown }).code === '42P01') throw missingTable('postgres', tables.locks, err);
    if ((err as { code?: unknown }).code === '42703') throw missingColumns('postgres', tables.holders, err);
    throw err;
  }
  const engine = new PgEngine(pool, {
    tables,
    channel: `${prefix}_changes`,
    watchChannel: `${prefix}_watch`,
    lockTimeoutMs: o.lockTimeoutMs ?? 2_000,
    listen: o.listen ?? true,
    watch: o.watch === 'notify',
    ownsPool,
  });
  const backend = new SqlBackend(engine, { sweepMs: o.sweepMs ?? 60_000, pollMs: o.pollMs ?? 250, secrets: o.secrets ?? [] });
  try {
    await engine.start();
  } catch (err) {
    await backend.close().catch(() => undefined);
    throw err;
  }
  return backend;
}

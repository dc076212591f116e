/**
 * The PostgreSQL lock tables (docs/backends/postgres.md, "Tables"): created by `migrate()`,
 * never by a lock operation.
 */
import type pg from 'pg';
import { tablesOf } from '../sql/statements.js';

/** The DDL of the lock tables with prefix `prefix` (default `locksmith`). */
export function postgresDdl(prefix = 'locksmith'): string {
  const t = tablesOf(prefix);
  return `CREATE TABLE IF NOT EXISTS ${t.locks} (
  lock_id text PRIMARY KEY,
  token bigint NOT NULL DEFAULT 0,
  seq bigint NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS ${t.holders} (
  lock_id text NOT NULL,
  token bigint NOT NULL,
  owner_id text NOT NULL,
  kind text NOT NULL,
  count integer NOT NULL,
  expires_us bigint NOT NULL,
  lock_delay_ms integer NOT NULL,
  PRIMARY KEY (lock_id, token)
);
CREATE TABLE IF NOT EXISTS ${t.queue} (
  lock_id text NOT NULL,
  seq bigint NOT NULL,
  owner_id text NOT NULL,
  kind text NOT NULL,
  permits integer NOT NULL,
  expires_us bigint NOT NULL,
  PRIMARY KEY (lock_id, seq)
);`;
}

/** Something that runs a plain statement: a `pg.Pool` or a `pg.Client`. */
export type PgQueryable = Pick<pg.Pool, 'query'> | Pick<pg.Client, 'query'>;

/**
 * Create the lock tables if missing. Concurrent migrations are serialized by a
 * transaction-scoped advisory lock (two `CREATE TABLE IF NOT EXISTS` racing can fail).
 */
export async function migratePostgres(db: PgQueryable, prefix = 'locksmith'): Promise<void> {
  const key = `locksmith:migrate:${tablesOf(prefix).locks}`;
  await db.query(`BEGIN; SELECT pg_advisory_xact_lock(hashtext('${key}')); ${postgresDdl(prefix)} COMMIT;`);
}

/**
 * The PostgreSQL lock tables (docs/backends/postgres.md, "Tables"): created by `migrate()`,
 * never by a lock operation.
 */
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
  permits integer NOT NULL DEFAULT 0,
  weight integer NOT NULL DEFAULT 1,
  expires_us bigint NOT NULL,
  lock_delay_ms integer NOT NULL,
  identity text NOT NULL DEFAULT '',
  acquired_us bigint NOT NULL DEFAULT 0,
  PRIMARY KEY (lock_id, token)
);
CREATE TABLE IF NOT EXISTS ${t.queue} (
  lock_id text NOT NULL,
  seq bigint NOT NULL,
  owner_id text NOT NULL,
  kind text NOT NULL,
  permits integer NOT NULL,
  weight integer NOT NULL DEFAULT 1,
  expires_us bigint NOT NULL,
  identity text NOT NULL DEFAULT '',
  since_us bigint NOT NULL DEFAULT 0,
  fair smallint NOT NULL DEFAULT 0,
  PRIMARY KEY (lock_id, seq)
);
${postgresUpgradeDdl(prefix)}`;
}

/** The columns later versions added, per table: name and type (with the default older rows get). */
const ADDED: Readonly<Record<'holders' | 'queue', readonly (readonly [string, string])[]>> = {
  holders: [
    ['identity', "text NOT NULL DEFAULT ''"],
    ['acquired_us', 'bigint NOT NULL DEFAULT 0'],
    ['permits', 'integer NOT NULL DEFAULT 0'],
    ['weight', 'integer NOT NULL DEFAULT 1'],
  ],
  queue: [
    ['identity', "text NOT NULL DEFAULT ''"],
    ['since_us', 'bigint NOT NULL DEFAULT 0'],
    ['fair', 'smallint NOT NULL DEFAULT 0'],
    ['weight', 'integer NOT NULL DEFAULT 1'],
  ],
};

/**
 * Add the identity columns to tables an older version created (idempotent). The ALTER runs
 * only when a column is missing: an ALTER TABLE takes an exclusive lock even when it changes
 * nothing, and every `?migrate=true` client runs this. With a constant default, adding a
 * column rewrites nothing (PostgreSQL 11+).
 */
export function postgresUpgradeDdl(prefix = 'locksmith'): string {
  const t = tablesOf(prefix);
  const blocks = (['holders', 'queue'] as const).map((k) => {
    const cols = ADDED[k];
    const names = cols.map(([c]) => `'${c}'`).join(', ');
    const adds = cols.map(([c, type]) => `ADD COLUMN IF NOT EXISTS ${c} ${type}`).join(', ');
    return `  IF (SELECT count(*) FROM pg_attribute WHERE attrelid = '${t[k]}'::regclass AND attname IN (${names}) AND NOT attisdropped) < ${cols.length} THEN
    ALTER TABLE ${t[k]} ${adds};
  END IF;`;
  });
  return `DO $$ BEGIN\n${blocks.join('\n')}\nEND $$;`;
}

/**
 * Something that runs a plain statement: a `pg.Pool` or a connected `pg.Client`. Declared
 * here, not taken from the driver's types, so that this module's declarations compile
 * without `@types/pg` (docs/backends/postgres.md, "Tables").
 */
export interface PgQueryable {
  query(text: string): Promise<unknown>;
}

/**
 * A `pg.Pool` as locksmith's public signatures name it: structural (any pool of the `pg`
 * driver fits), so that they compile without `@types/pg`.
 */
export interface PgPoolLike extends PgQueryable {
  connect(): Promise<unknown>;
  end(): Promise<void>;
}

/**
 * Create the lock tables if missing. Concurrent migrations are serialized by a
 * transaction-scoped advisory lock (two `CREATE TABLE IF NOT EXISTS` racing can fail).
 */
export async function migratePostgres(db: PgQueryable, prefix = 'locksmith'): Promise<void> {
  const key = `locksmith:migrate:${tablesOf(prefix).locks}`;
  await db.query(`BEGIN; SELECT pg_advisory_xact_lock(hashtext('${key}')); ${postgresDdl(prefix)} COMMIT;`);
}

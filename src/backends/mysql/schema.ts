/**
 * The MySQL/MariaDB lock tables (docs/backends/mysql.md, "Tables"): created by `migrate()`,
 * never by a lock operation. Lock ids are VARBINARY (compared byte for byte, 1024 bytes fit
 * in an InnoDB key).
 */
import { tablesOf } from '../sql/statements.js';

/** The DDL of the lock tables with prefix `prefix` (default `locksmith`), one statement each. */
export function mysqlDdl(prefix = 'locksmith'): string[] {
  const t = tablesOf(prefix);
  return [
    `CREATE TABLE IF NOT EXISTS ${t.locks} (
  lock_id VARBINARY(1024) NOT NULL PRIMARY KEY,
  token BIGINT NOT NULL DEFAULT 0,
  seq BIGINT NOT NULL DEFAULT 0
) ENGINE=InnoDB`,
    `CREATE TABLE IF NOT EXISTS ${t.holders} (
  lock_id VARBINARY(1024) NOT NULL,
  token BIGINT NOT NULL,
  owner_id VARBINARY(1024) NOT NULL,
  kind VARCHAR(16) NOT NULL,
  count INT NOT NULL,
  permits INT NOT NULL DEFAULT 0,
  weight INT NOT NULL DEFAULT 1,
  expires_us BIGINT NOT NULL,
  lock_delay_ms INT NOT NULL,
  identity VARBINARY(1024) NOT NULL DEFAULT '',
  acquired_us BIGINT NOT NULL DEFAULT 0,
  PRIMARY KEY (lock_id, token)
) ENGINE=InnoDB`,
    `CREATE TABLE IF NOT EXISTS ${t.queue} (
  lock_id VARBINARY(1024) NOT NULL,
  seq BIGINT NOT NULL,
  owner_id VARBINARY(1024) NOT NULL,
  kind VARCHAR(16) NOT NULL,
  permits INT NOT NULL,
  weight INT NOT NULL DEFAULT 1,
  expires_us BIGINT NOT NULL,
  identity VARBINARY(1024) NOT NULL DEFAULT '',
  since_us BIGINT NOT NULL DEFAULT 0,
  fair TINYINT NOT NULL DEFAULT 0,
  PRIMARY KEY (lock_id, seq)
) ENGINE=InnoDB`,
  ];
}

/** Something that runs a plain statement: a mysql2/promise pool or connection. */
export interface MysqlQueryable {
  query(sql: string): Promise<unknown>;
}

/** The columns later versions added, per table: name and type (with the default older rows get). */
const ADDED: Readonly<Record<'holders' | 'queue', readonly (readonly [string, string])[]>> = {
  holders: [
    ['identity', "VARBINARY(1024) NOT NULL DEFAULT ''"],
    ['acquired_us', 'BIGINT NOT NULL DEFAULT 0'],
    ['permits', 'INT NOT NULL DEFAULT 0'],
    ['weight', 'INT NOT NULL DEFAULT 1'],
  ],
  queue: [
    ['identity', "VARBINARY(1024) NOT NULL DEFAULT ''"],
    ['since_us', 'BIGINT NOT NULL DEFAULT 0'],
    ['fair', 'TINYINT NOT NULL DEFAULT 0'],
    ['weight', 'INT NOT NULL DEFAULT 1'],
  ],
};

/** The server's "duplicate column name": a concurrent migration added it first. */
const ER_DUP_FIELDNAME = 1060;

/**
 * Create the lock tables if missing (CREATE TABLE IF NOT EXISTS is safe to race in InnoDB),
 * then add the columns later versions added to tables an older version created. Only missing
 * columns are added, one ALTER per column (MySQL 8 has no `ADD COLUMN IF NOT EXISTS`); a
 * concurrent migration that added one first is not an error.
 */
export async function migrateMysql(db: MysqlQueryable, prefix = 'locksmith'): Promise<void> {
  for (const ddl of mysqlDdl(prefix)) await db.query(ddl);
  const t = tablesOf(prefix);
  for (const k of ['holders', 'queue'] as const) {
    const have = await columnsOf(db, t[k]);
    for (const [column, type] of ADDED[k]) {
      if (have.has(column)) continue;
      await db.query(`ALTER TABLE ${t[k]} ADD COLUMN ${column} ${type}`).catch((err: unknown) => {
        if ((err as { errno?: unknown }).errno !== ER_DUP_FIELDNAME) throw err;
      });
    }
  }
}

async function columnsOf(db: MysqlQueryable, table: string): Promise<Set<string>> {
  const res = await db.query(
    `SELECT column_name AS c FROM information_schema.columns WHERE table_schema = DATABASE() AND table_name = '${table}'`,
  );
  const rows = Array.isArray(res) && Array.isArray(res[0]) ? (res[0] as { c?: unknown }[]) : [];
  return new Set(rows.map((r) => String(r.c).toLowerCase()));
}

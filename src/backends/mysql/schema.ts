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
  expires_us BIGINT NOT NULL,
  lock_delay_ms INT NOT NULL,
  PRIMARY KEY (lock_id, token)
) ENGINE=InnoDB`,
    `CREATE TABLE IF NOT EXISTS ${t.queue} (
  lock_id VARBINARY(1024) NOT NULL,
  seq BIGINT NOT NULL,
  owner_id VARBINARY(1024) NOT NULL,
  kind VARCHAR(16) NOT NULL,
  permits INT NOT NULL,
  expires_us BIGINT NOT NULL,
  PRIMARY KEY (lock_id, seq)
) ENGINE=InnoDB`,
  ];
}

/** Something that runs a plain statement: a mysql2/promise pool or connection. */
export interface MysqlQueryable {
  query(sql: string): Promise<unknown>;
}

/** Create the lock tables if missing (CREATE TABLE IF NOT EXISTS is safe to race in InnoDB). */
export async function migrateMysql(db: MysqlQueryable, prefix = 'locksmith'): Promise<void> {
  for (const ddl of mysqlDdl(prefix)) await db.query(ddl);
}

/** The typed errors of lock tables that are missing or older than this version (docs/backends/postgres.md, "Tables"). */
import { BackendUnavailableError } from '../kit.js';

/** The typed error for lock tables of an older version (without columns this version added), never migrated. */
export function missingColumns(engine: string, table: string, cause: unknown): BackendUnavailableError {
  return new BackendUnavailableError(
    engine,
    `${engine}: the lock tables ('${table}', …) lack columns of this version (identities, semaphore sizes): run migrate() from ` +
      `'locksmith-dlm/${engine}' or add ?migrate=true to the URL (it adds them in place), see docs/backends/${engine}.md`,
    { cause, context: { table, causeCode: 'MISSING_COLUMN' } },
  );
}

/** The typed error for lock tables that were never created. */
export function missingTable(engine: string, table: string, cause: unknown): BackendUnavailableError {
  return new BackendUnavailableError(
    engine,
    `${engine}: the lock table '${table}' does not exist: run migrate() from 'locksmith-dlm/${engine}', ` +
      `add ?migrate=true to the URL, or apply the DDL of docs/backends/${engine}.md`,
    { cause, context: { table, causeCode: 'MISSING_TABLE' } },
  );
}

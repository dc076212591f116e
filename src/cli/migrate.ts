/**
 * `locksmith migrate --backend URL [--print]`: the tables the SQL backends and Cassandra
 * need, which no lock operation creates. `--print` writes the DDL without connecting (for a
 * DBA to review or apply); without it the DDL is applied, idempotently. The other backends
 * keep no schema. See docs/cli.md and docs/backends/{postgres,mysql,cassandra}.md.
 */
import { parseBackendUrl } from '../connect.js';
import { DriverMissingError } from '../index.js';
import { redact, secretsOf, unavailable } from '../backends/kit.js';
import { postgresDdl } from '../backends/postgres/schema.js';
import { mysqlDdl } from '../backends/mysql/schema.js';
import { cassandraDdl } from '../backends/cassandra/schema.js';
import { parseCassandraUrl } from '../backends/cassandra/config.js';

/** The engines with a schema, by URL scheme. */
const SCHEMA_ENGINES: Readonly<Record<string, 'postgres' | 'mysql' | 'cassandra'>> = {
  'postgres:': 'postgres',
  'postgresql:': 'postgres',
  'mysql:': 'mysql',
  'mariadb:': 'mysql',
  'cassandra:': 'cassandra',
};

/** The engine of `url` when it has a schema to create, else undefined. */
export function schemaEngine(url: URL): 'postgres' | 'mysql' | 'cassandra' | undefined {
  return SCHEMA_ENGINES[url.protocol];
}

/** The table prefix of a SQL URL (`?table=`, default `locksmith`). */
function prefixOf(url: URL): string {
  return url.searchParams.get('table') ?? 'locksmith';
}

/** The DDL for `raw` as one text (statements ended by `;`), or undefined when the backend keeps no schema. */
export function migrationDdl(raw: string): string | undefined {
  const url = parseBackendUrl(raw);
  switch (schemaEngine(url)) {
    case 'postgres':
      return `${postgresDdl(prefixOf(url))}\n`;
    case 'mysql':
      return `${mysqlDdl(prefixOf(url)).join(';\n\n')};\n`;
    case 'cassandra':
      return `${cassandraDdl(parseCassandraUrl(url)).join(';\n\n')};\n`;
    default:
      return undefined;
  }
}

/** Import an engine module; a missing driver is a {@link DriverMissingError}. */
async function load<T>(engine: string, driver: string, importer: () => Promise<T>): Promise<T> {
  try {
    return await importer();
  } catch (err) {
    const code = (err as { code?: unknown }).code;
    if ((code === 'ERR_MODULE_NOT_FOUND' || code === 'MODULE_NOT_FOUND') && String(err).includes(driver)) {
      throw new DriverMissingError(`the ${engine} backend`, driver, { cause: err });
    }
    throw err;
  }
}

/** Apply the DDL for `raw` (idempotent); false when the backend keeps no schema. */
export async function applyMigration(raw: string): Promise<boolean> {
  const url = parseBackendUrl(raw);
  const engine = schemaEngine(url);
  if (engine === undefined) return false;
  try {
    if (engine === 'postgres') {
      const { migrate } = await load(engine, 'pg', () => import('../backends/postgres/index.js'));
      await migrate(url.href, { table: prefixOf(url) });
    } else if (engine === 'mysql') {
      const { migrate } = await load(engine, 'mysql2', () => import('../backends/mysql/index.js'));
      await migrate(url.href, { table: prefixOf(url) });
    } else {
      // The Cassandra backend creates its keyspace and tables when it opens with create=true.
      const { createCassandraBackend } = await load(engine, 'cassandra-driver', () => import('../backends/cassandra/index.js'));
      const withCreate = new URL(url.href);
      withCreate.searchParams.set('create', 'true');
      await (await createCassandraBackend(withCreate)).close();
    }
  } catch (err) {
    throw unavailable(engine, `migrate on ${redact(url)}`, err, { secrets: secretsOf(url), context: { url: redact(url) } });
  }
  return true;
}

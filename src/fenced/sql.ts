/**
 * Fenced writes to a PostgreSQL or MySQL/MariaDB row (docs/recipes/fencing.md): one guarded
 * `UPDATE … SET …, fence = token WHERE key AND fence <= token` on the caller's own pool or
 * client. The row keeps the newest token that wrote it, so a holder that paused past its
 * lease and writes with token 33 after the next holder wrote with 34 changes nothing and is
 * told so (`StaleTokenError`). The clients are typed structurally: no driver type appears in
 * the declarations, and any pool or client with the same call shape works.
 */
import { InvalidArgumentError, StaleTokenError } from '../errors.js';

/** What a fenced write did: `written`, or `missing` when no row has the key (nothing is inserted). */
export type FencedWriteOutcome = 'written' | 'missing';

/** One fenced update of one row. */
export interface FencedUpdate {
  /** The table (a name, or `schema.name`), quoted as an identifier. */
  readonly table: string;
  /** The row's key: column → value, every pair must match (`WHERE a = ? AND b = ?`). */
  readonly key: Readonly<Record<string, unknown>>;
  /** The columns to write: column → value (sent as parameters). */
  readonly set: Readonly<Record<string, unknown>>;
  /** The writer's fencing token (`lock.token`). */
  readonly token: bigint;
  /** The column that keeps the newest token (a `BIGINT`). @default 'fence' */
  readonly fenceColumn?: string;
}

/** A `pg` Pool, Client or PoolClient: `query(text, values)` resolving `{ rowCount, rows }`. */
export interface PgQueryable {
  query(text: string, values?: unknown[]): Promise<{ readonly rowCount: number | null; readonly rows: readonly unknown[] }>;
}

/**
 * A `mysql2/promise` pool or connection (`query` resolves `[result, fields]`), or a
 * `mariadb` one (`query` resolves the result itself).
 */
export interface MysqlQueryable {
  query(sql: string, values?: unknown[]): Promise<unknown>;
}

type Dialect = 'postgres' | 'mysql';

/**
 * Write `set` to the row of `key` in `table` with `token` as its fence, unless the row
 * carries a newer token: PostgreSQL. Rejects `StaleTokenError` (with the row's token as
 * `newest`) when the row's fence is above `token`; resolves `'missing'` when no row has the
 * key. The same token may write again (a holder writes several times under one lock).
 */
export async function fencedUpdatePostgres(client: PgQueryable, update: FencedUpdate): Promise<FencedWriteOutcome> {
  const { text, values, probe, probeValues } = statements('postgres', update);
  const res = await client.query(text, values);
  if ((res.rowCount ?? 0) > 0) return 'written';
  const row = (await client.query(probe, probeValues)).rows[0];
  return settle(update, row);
}

/** {@link fencedUpdatePostgres} for MySQL and MariaDB (`mysql2/promise` or `mariadb`). */
export async function fencedUpdateMysql(client: MysqlQueryable, update: FencedUpdate): Promise<FencedWriteOutcome> {
  const { text, values, probe, probeValues } = statements('mysql', update);
  const res = first(await client.query(text, values));
  // affectedRows counts rows whose values changed: a same-token rewrite of equal values is
  // 0, so 0 is told apart by reading the row's fence (as on PostgreSQL).
  const affected = typeof res === 'object' && res !== null ? Number((res as { affectedRows?: unknown }).affectedRows ?? 0) : 0;
  if (affected > 0) return 'written';
  const rows = first(await client.query(probe, probeValues));
  return settle(update, Array.isArray(rows) ? (rows as unknown[])[0] : undefined);
}

/** mysql2's promise API resolves `[result, fields]`; mariadb's resolves the result. */
function first(reply: unknown): unknown {
  return Array.isArray(reply) && reply.length === 2 && Array.isArray(reply[1]) ? reply[0] : reply;
}

function settle(update: FencedUpdate, row: unknown): FencedWriteOutcome {
  if (row === undefined || row === null) return 'missing';
  const fence = (row as Record<string, unknown>)['fence'];
  const newest = fence === null || fence === undefined ? undefined : BigInt(String(fence));
  if (newest !== undefined && newest > update.token) throw new StaleTokenError(update.token, newest, `write to ${update.table}`);
  // Not above the token and yet not updated: the row already held exactly these values.
  return 'written';
}

interface Statements {
  readonly text: string;
  readonly values: unknown[];
  readonly probe: string;
  readonly probeValues: unknown[];
}

function statements(dialect: Dialect, u: FencedUpdate): Statements {
  if (typeof u.token !== 'bigint' || u.token < 0n) throw new InvalidArgumentError('token', 'a fencing token is a bigint ≥ 0');
  const fence = u.fenceColumn ?? 'fence';
  const sets = Object.entries(u.set);
  const keys = Object.entries(u.key);
  if (keys.length === 0) throw new InvalidArgumentError('key', 'a fenced update needs at least one key column');
  if (sets.some(([c]) => c === fence)) throw new InvalidArgumentError('set', `the fence column '${fence}' is written by the helper`);
  const q = (name: string): string => quote(dialect, name);
  let n = 0;
  const p = (): string => (dialect === 'postgres' ? `$${++n}` : '?');
  // MySQL compares a BIGINT with a string parameter as doubles: the token is cast to stay exact.
  const t = (): string => (dialect === 'postgres' ? `${p()}::bigint` : 'CAST(? AS SIGNED)');
  const token = u.token.toString();
  const setSql = [...sets.map(([c]) => `${q(c)} = ${p()}`), `${q(fence)} = ${t()}`].join(', ');
  const whereKey = keys.map(([c]) => `${q(c)} = ${p()}`).join(' AND ');
  // Equal tokens pass: a holder may write several times under one grant.
  const text = `UPDATE ${table(dialect, u.table)} SET ${setSql} WHERE ${whereKey} AND ${q(fence)} <= ${t()}`;
  const values = [...sets.map(([, v]) => v), token, ...keys.map(([, v]) => v), token];
  n = 0;
  // As text: mysql2 reads a BIGINT as a JavaScript number by default, inexact above 2^53.
  const probe = `SELECT CAST(${q(fence)} AS ${dialect === 'postgres' ? 'TEXT' : 'CHAR'}) AS fence FROM ${table(dialect, u.table)} WHERE ${keys.map(([c]) => `${q(c)} = ${p()}`).join(' AND ')}`;
  return { text, values, probe, probeValues: keys.map(([, v]) => v) };
}

/** A `schema.table` or `table` name, each part quoted. */
function table(dialect: Dialect, name: string): string {
  const parts = name.split('.');
  if (parts.length > 2) throw new InvalidArgumentError('table', `'${name}' is not a table or schema.table name`);
  return parts.map((part) => quote(dialect, part)).join('.');
}

/** An identifier quoted for the dialect (the quote character doubled inside). */
function quote(dialect: Dialect, name: string): string {
  if (typeof name !== 'string' || name === '' || name.includes('\0'))
    throw new InvalidArgumentError('column', `bad identifier ${JSON.stringify(name)}`);
  return dialect === 'postgres' ? `"${name.replaceAll('"', '""')}"` : `\`${name.replaceAll('`', '``')}\``;
}

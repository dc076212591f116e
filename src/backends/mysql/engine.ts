/**
 * The MySQL/MariaDB half of the SQL backend: `mysql2` transactions at READ COMMITTED (no gap
 * locks, so one lock id never blocks another) with a short `innodb_lock_wait_timeout`, the
 * lock row taken by an upsert, the clock read by the next statement (after the lock). No
 * notifications: waiters poll, and a first waiter may sleep on its bell, which the commits
 * that concern it ring (bells.ts; docs/backends/mysql.md, "Waiting").
 */
import type { Pool, PoolConnection, ResultSetHeader } from 'mysql2/promise';
import { causeCode } from '../kit.js';
import type { Bells } from './bells.js';
import { big, micros } from '../sql/statements.js';
import type { LockRow, SqlEngine, SqlResult, SqlTables, SqlTx, Stmt } from '../sql/types.js';

/** Options of a {@link MysqlEngine}. */
export interface MysqlEngineOptions {
  readonly tables: SqlTables;
  /** Longest wait for another transaction's row lock (rounded up to whole seconds). */
  readonly lockTimeoutMs: number;
  /** `transaction_isolation`, or `tx_isolation` on MariaDB before 11.1. */
  readonly isolationVariable: string;
  /** MariaDB: also end a transaction left idle longer than the lock-wait bound (`idle_transaction_timeout`). */
  readonly mariadb: boolean;
  /** End the pool on close (true when the backend created it). */
  readonly ownsPool: boolean;
  /** The pool allows several statements per query (`multipleStatements`): one round trip per batch. */
  readonly batch: boolean;
  /** Server-side wake-ups of waiters in other processes (bells.ts); absent: they poll. */
  readonly bells?: Bells | undefined;
}

type Packet = ResultSetHeader | Record<string, unknown>[];

function resultOf(p: Packet): SqlResult {
  return Array.isArray(p) ? { rows: p, affected: 0 } : { rows: [], affected: p.affectedRows };
}

/** Several statements in one query (the pool was created with `multipleStatements`). */
async function batch(conn: PoolConnection, stmts: readonly Stmt[]): Promise<SqlResult[]> {
  if (stmts.length === 0) return [];
  const sql = stmts.map((s) => s.sql).join(';\n');
  const params = stmts.flatMap((s) => s.params.map((p) => (typeof p === 'bigint' ? p.toString() : p)));
  const [raw] = await conn.query(sql, params);
  const packets = (stmts.length === 1 ? [raw] : raw) as Packet[];
  return packets.map(resultOf);
}

/** One statement per round trip (a user's pool without `multipleStatements`). */
async function sequence(conn: PoolConnection, stmts: readonly Stmt[]): Promise<SqlResult[]> {
  const out: SqlResult[] = [];
  for (const s of stmts) {
    const [raw] = await conn.query(
      s.sql,
      s.params.map((p) => (typeof p === 'bigint' ? p.toString() : p)),
    );
    out.push(resultOf(raw as Packet));
  }
  return out;
}

/** The database's clock in µs since 1970 (UTC), read when evaluated. */
export const NOW_US = `TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6))`;
const TRANSIENT = new Set(['ER_LOCK_WAIT_TIMEOUT', 'ER_LOCK_DEADLOCK']);
const BEGIN: Stmt = { sql: 'START TRANSACTION', params: [] };
const COMMIT: Stmt = { sql: 'COMMIT', params: [] };

/** The MySQL/MariaDB engine over one mysql2 pool. */
export class MysqlEngine implements SqlEngine {
  readonly name = 'mysql';
  readonly nowSql = NOW_US;
  /** Lock ids are VARBINARY: compared and sorted byte by byte already. */
  readonly binaryId = 'lock_id';
  readonly tables: SqlTables;
  readonly notifies = false;
  readonly #pool: Pool;
  readonly #options: MysqlEngineOptions;
  readonly #session: string;
  /** Pooled connections whose session settings are made. */
  readonly #prepared = new WeakSet<object>();

  constructor(pool: Pool, options: MysqlEngineOptions) {
    this.#pool = pool;
    this.#options = options;
    this.tables = options.tables;
    const seconds = Math.max(1, Math.ceil(options.lockTimeoutMs / 1000));
    // The driver escapes values with backslashes: a session in NO_BACKSLASH_ESCAPES mode would
    // read an escaped quote as the end of the string, so the mode is taken out for our sessions.
    this.#session =
      `SET SESSION ${options.isolationVariable} = 'READ-COMMITTED', SESSION innodb_lock_wait_timeout = ${seconds}, ` +
      `SESSION sql_mode = REPLACE(@@SESSION.sql_mode, 'NO_BACKSLASH_ESCAPES', '')` +
      // A client paused inside a transaction must not keep the lock row locked for long.
      (options.mariadb ? `, SESSION idle_transaction_timeout = ${seconds}` : '');
  }

  async transaction<T>(work: (tx: SqlTx) => Promise<T>): Promise<T> {
    const conn = await this.#pool.getConnection();
    const bells = this.#options.bells;
    /** Bell connections the announcements found: rung once the transaction committed. */
    const ring: number[] = [];
    let begun = false;
    let committed = false;
    let broken = false;
    // A connection failure with no command in flight is an 'error' event, fatal to the process
    // when nobody listens: note it (the next query fails too) and destroy the connection.
    const onError = (): void => {
      broken = true;
    };
    conn.on('error', onError);
    const tx: SqlTx = {
      run: async (stmts, commit = false) => {
        const first = !begun;
        // From here on a failure rolls back (a no-op before START TRANSACTION) or destroys the connection.
        begun = true;
        if (first) await this.#prepare(conn);
        const all: Stmt[] = [...(first ? [BEGIN] : []), ...stmts, ...(commit ? [COMMIT] : [])];
        const skip = first ? 1 : 0;
        const results = this.#options.batch ? await batch(conn, all) : await sequence(conn, all);
        bells?.found(all, results, ring);
        if (commit) committed = true;
        return results.slice(skip, skip + stmts.length);
      },
    };
    try {
      const result = await work(tx);
      if (begun && !committed) await conn.query('COMMIT');
      if (ring.length > 0) bells?.ring(ring);
      return result;
    } catch (err) {
      if (begun) {
        await conn.query('ROLLBACK').catch(() => {
          broken = true;
        });
      }
      throw err;
    } finally {
      // A connection that failed (or could not even roll back) is destroyed, not pooled.
      conn.off('error', onError);
      if (broken) conn.destroy();
      else conn.release();
    }
  }

  /**
   * The session settings, once per pooled connection (they survive in its session), in a
   * round trip of their own: they must hold before any escaped value is parsed.
   */
  async #prepare(conn: PoolConnection): Promise<void> {
    const key: object = conn.connection;
    if (this.#prepared.has(key)) return;
    await conn.query(this.#session);
    this.#prepared.add(key);
  }

  lockRow(lockId: string): Stmt[] {
    return [
      { sql: `INSERT INTO ${this.tables.locks} (lock_id) VALUES (?) ON DUPLICATE KEY UPDATE token = token`, params: [lockId] },
      // A later statement than the one that took the lock: UTC_TIMESTAMP is read after it.
      { sql: `SELECT token, seq, ${NOW_US} AS now_us FROM ${this.tables.locks} WHERE lock_id = ?`, params: [lockId] },
    ];
  }

  parseLockRow(results: readonly SqlResult[]): LockRow {
    const r = results[1]?.rows[0];
    if (!r) throw new Error('no lock row returned');
    return { token: big(r['token']), seq: big(r['seq']), nowUs: micros(r['now_us']) };
  }

  announce(lockId: string): Stmt[] {
    // No notifications in MySQL: the first waiter is rung if it sleeps on its bell, else it polls.
    const bells = this.#options.bells;
    return bells ? [bells.announce(this.tables.queue, NOW_US, lockId)] : [];
  }

  /** The head read and the bell lookup in one statement (no extra statement on a release). */
  announceHead(lockId: string): Stmt | undefined {
    return this.#options.bells?.announce(this.tables.queue, NOW_US, lockId);
  }

  /** Sleep on the server until a commit rings waiter `seq` (true), or `ms` pass (false); undefined: no bell (poll). */
  bell(lockId: string, seq: bigint, ms: number, signal: AbortSignal): Promise<boolean | undefined> {
    return this.#options.bells?.wait(lockId, seq, ms, signal) ?? Promise.resolve(undefined);
  }

  onChange(): void {
    // Nothing is ever heard from the server.
  }

  isTransient(err: unknown): boolean {
    return TRANSIENT.has(causeCode(err) ?? '');
  }

  isMissingTable(err: unknown): boolean {
    return causeCode(err) === 'ER_NO_SUCH_TABLE';
  }

  isMissingColumn(err: unknown): boolean {
    return causeCode(err) === 'ER_BAD_FIELD_ERROR';
  }

  isConnectionLost(err: unknown): boolean {
    // mysql2 marks the errors that end a connection as fatal.
    return typeof err === 'object' && err !== null && (err as { fatal?: unknown }).fatal === true;
  }

  async close(): Promise<void> {
    await this.#options.bells?.close();
    if (this.#options.ownsPool) await this.#pool.end();
  }
}

/**
 * The MySQL/MariaDB half of the SQL backend: `mysql2` transactions at READ COMMITTED (no gap
 * locks, so one lock id never blocks another) with a short `innodb_lock_wait_timeout`, the
 * lock row taken by an upsert, the clock read by the next statement (after the lock). No
 * notifications: waiters poll (docs/backends/mysql.md, "Waiting").
 */
import type { Pool, PoolConnection, ResultSetHeader } from 'mysql2/promise';
import { causeCode } from '../kit.js';
import { big, micros } from '../sql/statements.js';
import type { LockRow, SqlEngine, SqlQuery, SqlTables, SqlValue } from '../sql/types.js';

/** Options of a {@link MysqlEngine}. */
export interface MysqlEngineOptions {
  readonly tables: SqlTables;
  /** Longest wait for another transaction's row lock (rounded up to whole seconds). */
  readonly lockTimeoutMs: number;
  /** `transaction_isolation`, or `tx_isolation` on MariaDB before 11.1. */
  readonly isolationVariable: string;
  /** End the pool on close (true when the backend created it). */
  readonly ownsPool: boolean;
}

const NOW_US = `TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6))`;
const TRANSIENT = new Set(['ER_LOCK_WAIT_TIMEOUT', 'ER_LOCK_DEADLOCK']);

/** The MySQL/MariaDB engine over one mysql2 pool. */
export class MysqlEngine implements SqlEngine {
  readonly name = 'mysql';
  readonly tables: SqlTables;
  readonly notifies = false;
  readonly #pool: Pool;
  readonly #options: MysqlEngineOptions;
  readonly #session: string;
  /** Pooled connections whose session settings are made (settings survive in the session). */
  readonly #prepared = new WeakSet<object>();

  constructor(pool: Pool, options: MysqlEngineOptions) {
    this.#pool = pool;
    this.#options = options;
    this.tables = options.tables;
    const seconds = Math.max(1, Math.ceil(options.lockTimeoutMs / 1000));
    this.#session = `SET SESSION ${options.isolationVariable} = 'READ-COMMITTED', SESSION innodb_lock_wait_timeout = ${seconds}`;
  }

  async transaction<T>(work: (q: SqlQuery) => Promise<T>): Promise<T> {
    const conn = await this.#pool.getConnection();
    let broken = false;
    try {
      await this.#prepare(conn);
      await conn.query('START TRANSACTION');
      const q: SqlQuery = async (sql, params: readonly SqlValue[] = []) => {
        const [rows] = await conn.query(
          sql,
          params.map((p) => (typeof p === 'bigint' ? p.toString() : p)),
        );
        if (Array.isArray(rows)) return { rows: rows as Record<string, unknown>[], affected: 0 };
        return { rows: [], affected: (rows as ResultSetHeader).affectedRows };
      };
      const result = await work(q);
      await conn.query('COMMIT');
      return result;
    } catch (err) {
      await conn.query('ROLLBACK').catch(() => {
        broken = true;
      });
      throw err;
    } finally {
      // A connection that could not even roll back is destroyed, not pooled.
      if (broken) conn.destroy();
      else conn.release();
    }
  }

  async #prepare(conn: PoolConnection): Promise<void> {
    const key: object = conn.connection;
    if (this.#prepared.has(key)) return;
    await conn.query(this.#session);
    this.#prepared.add(key);
  }

  async lockRow(q: SqlQuery, lockId: string): Promise<LockRow> {
    await q(`INSERT INTO ${this.tables.locks} (lock_id) VALUES (?) ON DUPLICATE KEY UPDATE token = token`, [lockId]);
    const { rows } = await q(`SELECT token, seq, ${NOW_US} AS now_us FROM ${this.tables.locks} WHERE lock_id = ?`, [lockId]);
    const r = rows[0];
    if (!r) throw new Error(`no lock row returned for '${lockId}'`);
    return { token: big(r['token']), seq: big(r['seq']), nowUs: micros(r['now_us']) };
  }

  async nowUs(q: SqlQuery): Promise<number> {
    const { rows } = await q(`SELECT ${NOW_US} AS now_us`);
    return micros(rows[0]?.['now_us']);
  }

  async announce(): Promise<void> {
    // No notifications in MySQL: other clients find out by their poll.
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

  async close(): Promise<void> {
    if (this.#options.ownsPool) await this.#pool.end();
  }
}

/**
 * The PostgreSQL half of the SQL backend: `pg` transactions with `SET LOCAL lock_timeout`
 * (no statement waits long on a row lock), the lock row taken by an upsert whose RETURNING
 * reads `clock_timestamp()` after the lock, and NOTIFY on commit when someone waits.
 * See docs/backends/postgres.md.
 */
import { randomBytes } from 'node:crypto';
import type pg from 'pg';
import { causeCode } from '../kit.js';
import { big, micros } from '../sql/statements.js';
import type { LockRow, SqlEngine, SqlQuery, SqlTables, SqlValue } from '../sql/types.js';
import { PgListener } from './listener.js';

/** Options of a {@link PgEngine}. */
export interface PgEngineOptions {
  readonly tables: SqlTables;
  /** The NOTIFY channel (also the LISTEN one). */
  readonly channel: string;
  /** Longest wait for another transaction's row lock before the attempt counts as contended. */
  readonly lockTimeoutMs: number;
  /** LISTEN for wake-ups (false behind a transaction-pooling proxy: polling only). */
  readonly listen: boolean;
  /** End the pool on close (true when the backend created it). */
  readonly ownsPool: boolean;
}

const NOW_US = `(extract(epoch FROM clock_timestamp()) * 1000000)::int8`;
/** Lock wait timed out, deadlock, serialization failure. */
const TRANSIENT = new Set(['55P03', '40P01', '40001']);

/** `?` → `$1, $2…` (our statements never contain a literal `?`). */
const numbered = new Map<string, string>();
function toPg(sql: string): string {
  let out = numbered.get(sql);
  if (out === undefined) {
    let n = 0;
    out = sql.replace(/\?/g, () => `$${++n}`);
    numbered.set(sql, out);
  }
  return out;
}

/** The PostgreSQL engine over one `pg.Pool`. */
export class PgEngine implements SqlEngine {
  readonly name = 'postgres';
  readonly tables: SqlTables;
  readonly notifies: boolean;
  readonly #pool: pg.Pool;
  readonly #options: PgEngineOptions;
  readonly #begin: string;
  #listener: PgListener | undefined;
  #listeners: ((lockId: string | undefined) => void)[] = [];
  /** Prefix of this engine's NOTIFY payloads: its own commits already woke its waiters. */
  readonly #origin = `${randomBytes(6).toString('hex')}:`;

  constructor(pool: pg.Pool, options: PgEngineOptions) {
    this.#pool = pool;
    this.#options = options;
    this.tables = options.tables;
    this.notifies = options.listen;
    this.#begin =
      `BEGIN ISOLATION LEVEL READ COMMITTED; SET LOCAL lock_timeout = ${options.lockTimeoutMs}; ` +
      // A client paused inside a transaction must not keep the lock row locked for long.
      `SET LOCAL idle_in_transaction_session_timeout = ${Math.max(1_000, 5 * options.lockTimeoutMs)}`;
  }

  /** Start the LISTEN connection (when listening). */
  async start(): Promise<void> {
    if (!this.#options.listen) return;
    this.#listener = new PgListener(this.#pool, this.#options.channel, (payload) => {
      if (payload?.startsWith(this.#origin)) return;
      // `origin:lockId`: the origin is 12 hex digits and a colon.
      const lockId = payload === undefined ? undefined : payload.slice(this.#origin.length);
      for (const l of this.#listeners) l(lockId);
    });
    await this.#listener.start();
  }

  async transaction<T>(work: (q: SqlQuery) => Promise<T>): Promise<T> {
    const client = await this.#pool.connect();
    let broken: Error | undefined;
    try {
      await client.query(this.#begin);
      const q: SqlQuery = async (sql, params: readonly SqlValue[] = []) => {
        const r = await client.query(toPg(sql), [...params]);
        return { rows: r.rows as Record<string, unknown>[], affected: r.rowCount ?? 0 };
      };
      const result = await work(q);
      await client.query('COMMIT');
      return result;
    } catch (err) {
      await client.query('ROLLBACK').catch((e: unknown) => {
        broken = e instanceof Error ? e : new Error(String(e));
      });
      throw err;
    } finally {
      // A connection that could not even roll back is destroyed, not pooled.
      client.release(broken);
    }
  }

  async lockRow(q: SqlQuery, lockId: string): Promise<LockRow> {
    const { rows } = await q(
      `INSERT INTO ${this.tables.locks} AS l (lock_id) VALUES (?) ON CONFLICT (lock_id) DO UPDATE SET token = l.token
       RETURNING token, seq, ${NOW_US} AS now_us`,
      [lockId],
    );
    const r = rows[0];
    if (!r) throw new Error(`no lock row returned for '${lockId}'`);
    return { token: big(r['token']), seq: big(r['seq']), nowUs: micros(r['now_us']) };
  }

  async nowUs(q: SqlQuery): Promise<number> {
    const { rows } = await q(`SELECT ${NOW_US} AS now_us`);
    return micros(rows[0]?.['now_us']);
  }

  async announce(q: SqlQuery, lockId: string): Promise<void> {
    // Delivered on commit, and only when somebody waits for this id.
    await q(`SELECT pg_notify(?, ?) FROM ${this.tables.queue} WHERE lock_id = ? LIMIT 1`, [
      this.#options.channel,
      this.#origin + lockId,
      lockId,
    ]);
  }

  onChange(listener: (lockId: string | undefined) => void): void {
    this.#listeners.push(listener);
  }

  isTransient(err: unknown): boolean {
    return TRANSIENT.has(causeCode(err) ?? '');
  }

  isMissingTable(err: unknown): boolean {
    return causeCode(err) === '42P01';
  }

  async close(): Promise<void> {
    this.#listener?.close();
    this.#listeners = [];
    if (this.#options.ownsPool) await this.#pool.end();
  }
}

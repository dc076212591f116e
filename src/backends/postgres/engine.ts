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
import type { LockRow, SqlEngine, SqlResult, SqlTables, SqlTx, Stmt } from '../sql/types.js';
import { pgChanges } from './changes.js';
import { PgListener } from './listener.js';

/** Options of a {@link PgEngine}. */
export interface PgEngineOptions {
  readonly tables: SqlTables;
  /** The NOTIFY channel (also the LISTEN one). */
  readonly channel: string;
  /** The channel of `changes()`: every write of a lock's holders or queue names its id there. */
  readonly watchChannel: string;
  /** Longest wait for another transaction's row lock before the attempt counts as contended. */
  readonly lockTimeoutMs: number;
  /** LISTEN for wake-ups (false behind a transaction-pooling proxy: polling only). */
  readonly listen: boolean;
  /** Tell watchers of every write and offer `changes()` (false: no statement of it runs; watches poll). */
  readonly watch: boolean;
  /** End the pool on close (true when the backend created it). */
  readonly ownsPool: boolean;
}

const NOW_US = `(extract(epoch FROM clock_timestamp()) * 1000000)::int8`;
/** Lock wait timed out, deadlock, serialization failure. */
const TRANSIENT = new Set(['55P03', '40P01', '40001']);
/** The server ended the session (terminated, shut down, crashed) or the socket broke. */
const LOST = new Set(['57P01', '57P02', '57P03', '08000', '08003', '08006', 'ECONNRESET', 'EPIPE']);

/** How many statements `#begin` holds. */
const BEGIN_STATEMENTS = 3;
const ORIGIN_LENGTH = 13;

/** `?` → the escaped literal of each value (our statements never contain a literal `?`). */
function inline(client: pg.PoolClient, st: Stmt): string {
  let i = 0;
  return st.sql.replace(/\?/g, () => {
    const v = st.params[i++];
    if (v === null || v === undefined) return 'NULL';
    if (typeof v === 'bigint') return v.toString();
    if (typeof v === 'number') {
      if (!Number.isFinite(v)) throw new Error(`not a finite number: ${v}`);
      return String(v);
    }
    return client.escapeLiteral(v);
  });
}

/** `origin` (12 hex digits and a colon), the first waiter's sequence, a colon, the lock id. */
function parsePayload(payload: string): { lockId: string; head: bigint | undefined } | undefined {
  const rest = payload.slice(ORIGIN_LENGTH);
  const colon = rest.indexOf(':');
  if (colon <= 0 || !/^\d+$/.test(rest.slice(0, colon))) return undefined;
  return { lockId: rest.slice(colon + 1), head: BigInt(rest.slice(0, colon)) };
}

/** The PostgreSQL engine over one `pg.Pool`. */
export class PgEngine implements SqlEngine {
  readonly name = 'postgres';
  readonly nowSql = NOW_US;
  /** The "C" collation compares UTF-8 bytes, whatever the database's collation (docs/backends/postgres.md, "Listing"). */
  readonly binaryId = 'lock_id COLLATE "C"';
  readonly tables: SqlTables;
  readonly notifies: boolean;
  /** Absent unless `watch`: the writes then carry no extra statement (docs/backends/postgres.md, "Watching"). */
  readonly touched?: (lockId: string) => Stmt[];
  /** Absent unless `watch`: the core's `watch()` then polls `list`. */
  readonly changes?: (prefix: string, signal: AbortSignal) => AsyncIterable<string | null>;
  readonly #pool: pg.Pool;
  readonly #options: PgEngineOptions;
  readonly #begin: string;
  #listener: PgListener | undefined;
  #listeners: ((lockId: string | undefined, head: bigint | undefined) => void)[] = [];
  /** Prefix of this engine's NOTIFY payloads: its own commits already woke its waiters. */
  readonly #closing = new AbortController();
  readonly #origin = `${randomBytes(6).toString('hex')}:`;

  constructor(pool: pg.Pool, options: PgEngineOptions) {
    this.#pool = pool;
    this.#options = options;
    this.tables = options.tables;
    this.notifies = options.listen;
    this.#begin =
      `BEGIN ISOLATION LEVEL READ COMMITTED; SET LOCAL lock_timeout = ${options.lockTimeoutMs}; ` +
      // A client paused inside a transaction must not keep the lock row locked for long.
      `SET LOCAL idle_in_transaction_session_timeout = ${Math.max(1_000, options.lockTimeoutMs)}`;
    if (options.watch) {
      this.touched = (lockId) => this.#touched(lockId);
      this.changes = (prefix, signal) => this.#changes(prefix, signal);
    }
  }

  /** Start the LISTEN connection (when listening). */
  async start(): Promise<void> {
    if (!this.#options.listen) return;
    this.#listener = new PgListener(this.#pool, this.#options.channel, (payload) => {
      if (payload?.startsWith(this.#origin)) return;
      const change = payload === undefined ? undefined : parsePayload(payload);
      for (const l of this.#listeners) l(change?.lockId, change?.head);
    });
    await this.#listener.start();
  }

  async transaction<T>(work: (tx: SqlTx) => Promise<T>): Promise<T> {
    const client = await this.#pool.connect();
    let begun = false;
    let committed = false;
    let broken: Error | undefined;
    // pg emits a checked-out client's connection failure (a reset, a killed backend) as an
    // 'error' event, which crashes the process when nobody listens; the pool listens only
    // to idle clients. The failure reaches us through the next query; the client is dropped.
    const onError = (err: Error): void => {
      broken ??= err;
    };
    client.on('error', onError);
    const tx: SqlTx = {
      run: async (stmts, commit = false) => {
        // One simple-protocol query per round trip: BEGIN, the statements (values inlined as
        // escaped literals) and COMMIT travel together.
        const parts = stmts.map((st) => inline(client, st));
        const skip = begun ? 0 : BEGIN_STATEMENTS;
        if (!begun) parts.unshift(this.#begin);
        if (commit) parts.push('COMMIT');
        begun = true;
        const raw: unknown = await client.query(parts.join(';\n'));
        if (commit) committed = true;
        const all = (Array.isArray(raw) ? raw : [raw]) as pg.QueryResult[];
        return all.slice(skip, skip + stmts.length).map((r) => ({ rows: r.rows as Record<string, unknown>[], affected: r.rowCount ?? 0 }));
      },
    };
    try {
      const result = await work(tx);
      if (begun && !committed) await client.query('COMMIT');
      return result;
    } catch (err) {
      if (begun) {
        await client.query('ROLLBACK').catch((e: unknown) => {
          broken = e instanceof Error ? e : new Error(String(e));
        });
      }
      throw err;
    } finally {
      // A connection that failed (or could not even roll back) is destroyed, not pooled.
      client.off('error', onError);
      client.release(broken);
    }
  }

  lockRow(lockId: string): Stmt[] {
    return [
      {
        sql: `INSERT INTO ${this.tables.locks} AS l (lock_id) VALUES (?) ON CONFLICT (lock_id) DO UPDATE SET token = l.token
              RETURNING token, seq, ${NOW_US} AS now_us`,
        params: [lockId],
      },
    ];
  }

  parseLockRow(results: readonly SqlResult[]): LockRow {
    const r = results[0]?.rows[0];
    if (!r) throw new Error('no lock row returned');
    return { token: big(r['token']), seq: big(r['seq']), nowUs: micros(r['now_us']) };
  }

  announce(lockId: string): Stmt[] {
    // Delivered on commit, only when somebody waits, naming the first waiter (who alone is woken).
    return [
      {
        sql: `SELECT pg_notify(?, ? || h.seq::text || ':' || ?) FROM
              (SELECT seq FROM ${this.tables.queue} WHERE lock_id = ? AND expires_us > ${NOW_US} ORDER BY seq LIMIT 1) h`,
        params: [this.#options.channel, this.#origin, lockId, lockId],
      },
    ];
  }

  #touched(lockId: string): Stmt[] {
    // Only while some watch holds its advisory lock: free otherwise (docs/backends/postgres.md, "Watching").
    const channel = this.#options.watchChannel;
    return [
      {
        sql: `SELECT pg_notify(?, ?) WHERE NOT pg_try_advisory_xact_lock(hashtext('locksmith-watch'), hashtext(?))`,
        params: [channel, lockId, channel],
      },
    ];
  }

  #changes(prefix: string, signal: AbortSignal): AsyncIterable<string | null> {
    // close() ends the watches too: their reconnect must not outlive the pool.
    return pgChanges(this.#pool, this.#options.watchChannel, prefix, AbortSignal.any([signal, this.#closing.signal]));
  }

  onChange(listener: (lockId: string | undefined, head: bigint | undefined) => void): void {
    this.#listeners.push(listener);
  }

  isTransient(err: unknown): boolean {
    return TRANSIENT.has(causeCode(err) ?? '');
  }

  isMissingTable(err: unknown): boolean {
    return causeCode(err) === '42P01';
  }

  isMissingColumn(err: unknown): boolean {
    return causeCode(err) === '42703';
  }

  isConnectionLost(err: unknown): boolean {
    if (LOST.has(causeCode(err) ?? '')) return true;
    // pg's own errors for a client whose connection already ended carry no code.
    return err instanceof Error && /Connection terminated|not queryable/.test(err.message);
  }

  async close(): Promise<void> {
    this.#closing.abort();
    await this.#listener?.close();
    this.#listeners = [];
    if (this.#options.ownsPool) await this.#pool.end();
  }
}

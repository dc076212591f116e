/**
 * What the shared SQL algorithm (docs/backends/postgres.md, docs/backends/mysql.md) needs
 * from an engine: one transaction on one pooled connection, the lock row taken with the
 * database's clock read after the lock, and (optionally) a wake-up sent on commit.
 */
import type { LockKind } from '../kit.js';

/** A statement parameter. Times travel as microseconds of the database's clock. */
export type SqlValue = string | number | bigint | null;

/** What a statement returned. */
export interface SqlResult {
  readonly rows: readonly Record<string, unknown>[];
  /** Rows inserted, updated or deleted. */
  readonly affected: number;
}

/** One statement with `?` placeholders and their values. */
export interface Stmt {
  readonly sql: string;
  readonly params: readonly SqlValue[];
}

/** The statements of one transaction, sent in as few round trips as the engine can. */
export interface SqlTx {
  /**
   * Run `stmts` in order (one round trip where the engine can batch them) and return one
   * result per statement. `commit` appends the COMMIT to the same round trip.
   */
  run(stmts: readonly Stmt[], commit?: boolean): Promise<SqlResult[]>;
}

/** The lock row of one lock id, locked by the running transaction. */
export interface LockRow {
  /** The last fencing token issued for the id (0 before the first grant). */
  readonly token: bigint;
  /** The last queue sequence number issued for the id. */
  readonly seq: bigint;
  /** The database's clock in µs since the epoch, read after the row lock was taken. */
  readonly nowUs: number;
}

/** The table names of one lock table set (validated: letters, digits, underscores). */
export interface SqlTables {
  readonly locks: string;
  readonly holders: string;
  readonly queue: string;
}

/** The engine half of a SQL backend: a driver, its dialect, its wake-ups. */
export interface SqlEngine {
  /** `postgres` or `mysql`. */
  readonly name: string;
  readonly tables: SqlTables;
  /**
   * Run `work` in one READ COMMITTED transaction with a short lock-wait bound (the BEGIN
   * travels with the first statements); commit after it unless it committed itself; roll
   * back on error.
   */
  transaction<T>(work: (tx: SqlTx) => Promise<T>): Promise<T>;
  /** The statements that create (if missing) and lock the row of `lockId`, then read the clock. */
  lockRow(lockId: string): Stmt[];
  /** The {@link LockRow} from the results of exactly the {@link lockRow} statements. */
  parseLockRow(results: readonly SqlResult[]): LockRow;
  /** An SQL expression: the database's clock in µs since the epoch, read when it is evaluated. */
  readonly nowSql: string;
  /**
   * An SQL expression of the `lock_id` column that compares and sorts byte by byte, whatever
   * the column's collation: listing pages by `>` and `ORDER BY`, which must agree.
   */
  readonly binaryId: string;
  /**
   * Statements that tell other clients, on commit, that `lockId` changed and which waiter is
   * first now (none without notifications, or when nobody waits).
   */
  announce(lockId: string): Stmt[];
  /**
   * One statement that reads the first live waiter's `seq` (as a column of that name) and
   * announces the change, where both are needed; undefined or absent: the shared head read,
   * then {@link announce}.
   */
  announceHead?(lockId: string): Stmt | undefined;
  /** Deliver notifications: a lock id and its first waiter, or `undefined` when some may have been missed. */
  onChange(listener: (lockId: string | undefined, head: bigint | undefined) => void): void;
  /** Statements that tell watchers, on commit, that the holders or queue of `lockId` were written (absent: nobody is told). */
  touched?(lockId: string): Stmt[];
  /** The ids under `prefix` as they are touched, `null` once listening and after each reconnect (absent: watches poll). */
  changes?(prefix: string, signal: AbortSignal): AsyncIterable<string | null>;
  /**
   * Block on the server until a commit announcing `lockId` rings waiter `seq` (true), `ms`
   * pass (false) or `signal` aborts; undefined when it could not (then the waiter polls).
   * Absent: the engine has no server-side wait (docs/backends/mysql.md, "Waiting").
   */
  bell?(lockId: string, seq: bigint, ms: number, signal: AbortSignal): Promise<boolean | undefined>;
  /** True when the engine delivers notifications (LISTEN/NOTIFY). */
  readonly notifies: boolean;
  /** A lock wait that timed out, a deadlock, a serialization failure: try again. */
  isTransient(err: unknown): boolean;
  /** The lock tables do not exist (not migrated). */
  isMissingTable(err: unknown): boolean;
  /** A column the statements name does not exist (tables of an older version, not migrated). */
  isMissingColumn(err: unknown): boolean;
  /** The connection was gone (killed, reset, the server restarted): the statements may not have reached it. */
  isConnectionLost(err: unknown): boolean;
  close(): Promise<void>;
}

/** One hold as stored in the holders table. */
export interface HolderRow {
  readonly token: bigint;
  readonly ownerId: string;
  readonly kind: LockKind;
  readonly count: number;
  /** Semaphore holds: the semaphore's size (0 for other kinds and rows an older version wrote). */
  readonly permits: number;
  /** The permits the hold takes (1 but for a weighted semaphore hold). */
  readonly weight: number;
  readonly expiresUs: number;
  readonly lockDelayMs: number;
  /** The holder's identity as the locker encoded it ('' when an older version wrote the row). */
  readonly identity: string;
  /** When the hold began, µs of the database's clock (0 when an older version wrote the row). */
  readonly acquiredUs: number;
}

/** One queued acquisition as stored in the queue table. */
export interface WaiterRow {
  readonly seq: bigint;
  readonly ownerId: string;
  readonly kind: LockKind;
  readonly permits: number;
  /** The permits it asks for (1 but for a weighted semaphore acquisition). */
  readonly weight: number;
  readonly expiresUs: number;
  /** The waiter's identity as the locker encoded it ('' when an older version wrote the row). */
  readonly identity: string;
  /** When it joined the queue, µs of the database's clock (0 when an older version wrote the row). */
  readonly sinceUs: number;
  /** It asked for fair (FIFO) order. */
  readonly fair: boolean;
}

/** The queue position a contended waiting attempt leaves behind. */
export interface SqlTicket {
  /** The queue row's sequence number. */
  readonly seq: bigint;
  /** Look again after this long at the latest: the next holder or waiter expiry the attempt saw. */
  readonly retryMs: number;
  /** Waiters ahead of this one when the attempt looked (behind others, it polls less often). */
  readonly ahead: number;
  /** A mutex or a writer: it cannot be granted while anyone waits ahead of it. */
  readonly exclusive: boolean;
}

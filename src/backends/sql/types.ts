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

/** Run one statement (placeholders are `?`; an engine rewrites them when it numbers them). */
export type SqlQuery = (sql: string, params?: readonly SqlValue[]) => Promise<SqlResult>;

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
  /** Run `work` in one READ COMMITTED transaction with a short lock-wait bound; commit or roll back. */
  transaction<T>(work: (q: SqlQuery) => Promise<T>): Promise<T>;
  /** Create (if missing) and lock the row of `lockId`, and read the database's clock. */
  lockRow(q: SqlQuery, lockId: string): Promise<LockRow>;
  /** Tell other clients, on commit, that `lockId` changed (no-op without notifications). */
  announce(q: SqlQuery, lockId: string): Promise<void>;
  /** Deliver notifications: `lockId`, or `undefined` when some may have been missed. */
  onChange(listener: (lockId: string | undefined) => void): void;
  /** True when the engine delivers notifications (LISTEN/NOTIFY). */
  readonly notifies: boolean;
  /** A lock wait that timed out, a deadlock, a serialization failure: try again. */
  isTransient(err: unknown): boolean;
  /** The database clock in µs since the epoch (no lock taken). */
  nowUs(q: SqlQuery): Promise<number>;
  /** The lock tables do not exist (not migrated). */
  isMissingTable(err: unknown): boolean;
  close(): Promise<void>;
}

/** One hold as stored in the holders table. */
export interface HolderRow {
  readonly token: bigint;
  readonly ownerId: string;
  readonly kind: LockKind;
  readonly count: number;
  readonly expiresUs: number;
  readonly lockDelayMs: number;
}

/** One queued acquisition as stored in the queue table. */
export interface WaiterRow {
  readonly seq: bigint;
  readonly ownerId: string;
  readonly kind: LockKind;
  readonly permits: number;
  readonly expiresUs: number;
}

/** The queue position a contended waiting attempt leaves behind. */
export interface SqlTicket {
  /** The queue row's sequence number. */
  readonly seq: bigint;
  /** Look again after this long at the latest: the next holder or waiter expiry the attempt saw. */
  readonly retryMs: number;
  /** The change count of the lock id before the attempt (see wakeups.ts). */
  readonly generation: number;
}

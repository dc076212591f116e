/**
 * The statements both engines share, written in the SQL both understand (`?` placeholders;
 * PostgreSQL's driver numbers them). Every statement runs inside a transaction that holds
 * the lock row first, so statements of one lock id are serialized and no statement waits
 * on another lock id's rows. Times are µs of the database's clock (docs/backends/postgres.md).
 */
import { InvalidArgumentError, type LockKind } from '../kit.js';
import type { HolderRow, SqlQuery, SqlTables, SqlValue, WaiterRow } from './types.js';

/** Table prefixes are spliced into SQL: only plain identifiers. */
const IDENT = /^[a-z_][a-z0-9_]{0,40}$/;

/** The three table names for `prefix` (throws `InvalidArgumentError` for a bad prefix). */
export function tablesOf(prefix: string): SqlTables {
  if (!IDENT.test(prefix)) {
    throw new InvalidArgumentError('table', `table prefix must match ${IDENT.source}, got '${prefix}'`);
  }
  return { locks: `${prefix}_locks`, holders: `${prefix}_holders`, queue: `${prefix}_queue` };
}

const KINDS: readonly LockKind[] = ['mutex', 'read', 'write', 'semaphore'];

function text(v: unknown): string {
  return Buffer.isBuffer(v) ? v.toString('utf8') : String(v);
}

function kindOf(v: unknown): LockKind {
  const k = KINDS.find((x) => x === text(v));
  if (k === undefined) throw new Error(`unknown lock kind '${text(v)}' in the holders table`);
  return k;
}

/** A bigint column, whatever the driver made of it (string, number, bigint). */
export function big(v: unknown): bigint {
  return BigInt(typeof v === 'bigint' || typeof v === 'number' ? v : text(v));
}

/** A µs column as a number (exact: µs since 1970 stay below 2^53 until the year 2255). */
export function micros(v: unknown): number {
  return Number(typeof v === 'bigint' || typeof v === 'number' ? v : text(v));
}

/** The statements of one table set. */
export class Statements {
  readonly #t: SqlTables;

  constructor(tables: SqlTables) {
    this.#t = tables;
  }

  /** Holders and queue of one id in one round trip (`t` tells the tables apart). */
  async state(q: SqlQuery, lockId: string): Promise<{ holders: HolderRow[]; queue: WaiterRow[] }> {
    const { rows } = await q(
      `SELECT 'h' AS t, token AS n, owner_id, kind, count AS c, expires_us, lock_delay_ms AS d FROM ${this.#t.holders} WHERE lock_id = ?
       UNION ALL
       SELECT 'q' AS t, seq AS n, owner_id, kind, permits AS c, expires_us, 0 AS d FROM ${this.#t.queue} WHERE lock_id = ?`,
      [lockId, lockId],
    );
    const holders: HolderRow[] = [];
    const queue: WaiterRow[] = [];
    for (const r of rows) {
      const common = { ownerId: text(r['owner_id']), kind: kindOf(r['kind']), expiresUs: micros(r['expires_us']) };
      if (text(r['t']) === 'h') holders.push({ ...common, token: big(r['n']), count: Number(r['c']), lockDelayMs: Number(r['d']) });
      else queue.push({ ...common, seq: big(r['n']), permits: Number(r['c']) });
    }
    return { holders, queue };
  }

  /** Delete holds past their lease and lock delay, and waiters past their expiry. */
  async purge(q: SqlQuery, lockId: string, nowUs: number, holders: boolean, waiters: boolean): Promise<void> {
    if (holders) await q(`DELETE FROM ${this.#t.holders} WHERE lock_id = ? AND expires_us + lock_delay_ms * 1000 <= ?`, [lockId, nowUs]);
    if (waiters) await q(`DELETE FROM ${this.#t.queue} WHERE lock_id = ? AND expires_us <= ?`, [lockId, nowUs]);
  }

  /** Store the counters of the lock row (under its lock: tokens and sequences only grow). */
  async setCounters(q: SqlQuery, lockId: string, token: bigint, seq: bigint): Promise<void> {
    await q(`UPDATE ${this.#t.locks} SET token = ?, seq = ? WHERE lock_id = ?`, [token.toString(), seq.toString(), lockId]);
  }

  async insertHolder(q: SqlQuery, lockId: string, h: HolderRow): Promise<void> {
    await q(
      `INSERT INTO ${this.#t.holders} (lock_id, token, owner_id, kind, count, expires_us, lock_delay_ms) VALUES (?, ?, ?, ?, ?, ?, ?)`,
      [lockId, h.token.toString(), h.ownerId, h.kind, h.count, h.expiresUs, h.lockDelayMs],
    );
  }

  /** One more entry into a hold, its lease stretched to `expiresUs` (never shortened). */
  async reenter(q: SqlQuery, lockId: string, token: bigint, expiresUs: number): Promise<void> {
    await q(`UPDATE ${this.#t.holders} SET count = count + 1, expires_us = GREATEST(expires_us, ?) WHERE lock_id = ? AND token = ?`, [
      expiresUs,
      lockId,
      token.toString(),
    ]);
  }

  /** Stretch a live hold of `owner` to `expiresUs`; false when it is not held any more. */
  async extend(q: SqlQuery, lockId: string, token: bigint, ownerId: string, nowUs: number, expiresUs: number): Promise<boolean> {
    const r = await q(
      `UPDATE ${this.#t.holders} SET expires_us = GREATEST(expires_us, ?) WHERE lock_id = ? AND token = ? AND owner_id = ? AND expires_us > ?`,
      [expiresUs, lockId, token.toString(), ownerId, nowUs],
    );
    return r.affected > 0;
  }

  /** One exit from a live hold (deleted at zero: a clean release leaves no lock delay). */
  async release(q: SqlQuery, lockId: string, token: bigint, ownerId: string, nowUs: number): Promise<boolean> {
    const key: SqlValue[] = [lockId, token.toString(), ownerId];
    const r = await q(
      `UPDATE ${this.#t.holders} SET count = count - 1 WHERE lock_id = ? AND token = ? AND owner_id = ? AND expires_us > ?`,
      [...key, nowUs],
    );
    if (r.affected === 0) return false;
    await q(`DELETE FROM ${this.#t.holders} WHERE lock_id = ? AND token = ? AND owner_id = ? AND count <= 0`, key);
    return true;
  }

  async insertWaiter(q: SqlQuery, lockId: string, w: WaiterRow): Promise<void> {
    await q(`INSERT INTO ${this.#t.queue} (lock_id, seq, owner_id, kind, permits, expires_us) VALUES (?, ?, ?, ?, ?, ?)`, [
      lockId,
      w.seq.toString(),
      w.ownerId,
      w.kind,
      w.permits,
      w.expiresUs,
    ]);
  }

  async refreshWaiter(q: SqlQuery, lockId: string, seq: bigint, expiresUs: number): Promise<void> {
    await q(`UPDATE ${this.#t.queue} SET expires_us = ? WHERE lock_id = ? AND seq = ?`, [expiresUs, lockId, seq.toString()]);
  }

  async deleteWaiter(q: SqlQuery, lockId: string, seq: bigint): Promise<number> {
    return (await q(`DELETE FROM ${this.#t.queue} WHERE lock_id = ? AND seq = ?`, [lockId, seq.toString()])).affected;
  }

  /** Everything of one owner (an attempt whose reply was lost may have left a hold or a waiter). */
  async deleteOwner(q: SqlQuery, lockId: string, ownerId: string): Promise<number> {
    const a = await q(`DELETE FROM ${this.#t.holders} WHERE lock_id = ? AND owner_id = ?`, [lockId, ownerId]);
    const b = await q(`DELETE FROM ${this.#t.queue} WHERE lock_id = ? AND owner_id = ?`, [lockId, ownerId]);
    return a.affected + b.affected;
  }

  /** The last token issued for `lockId` (no lock taken), for `inspect`. */
  async lastToken(q: SqlQuery, lockId: string): Promise<bigint | undefined> {
    const { rows } = await q(`SELECT token FROM ${this.#t.locks} WHERE lock_id = ?`, [lockId]);
    return rows[0] === undefined ? undefined : big(rows[0]['token']);
  }
}

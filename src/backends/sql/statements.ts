/**
 * The statements both engines share, written in the SQL both understand (`?` placeholders;
 * PostgreSQL's driver numbers them). Every statement runs inside a transaction that holds
 * the lock row first, so statements of one lock id are serialized and no statement waits
 * on another lock id's rows. Times are µs of the database's clock (docs/backends/postgres.md).
 */
import { InvalidArgumentError, type LockKind } from '../kit.js';
import type { HolderRow, SqlResult, SqlTables, SqlValue, Stmt, WaiterRow } from './types.js';

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

/** A text or binary column as a string (MySQL's VARBINARY arrives as a Buffer). */
export function text(v: unknown): string {
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
  /** The engine's clock expression (µs since the epoch, evaluated in the statement). */
  readonly #now: string;
  /** The engine's byte-by-byte form of `lock_id` (see {@link SqlEngine.binaryId}). */
  readonly #bin: string;

  constructor(tables: SqlTables, nowSql: string, binaryId: string) {
    this.#t = tables;
    this.#now = nowSql;
    this.#bin = binaryId;
  }

  /**
   * Holders and queue of one id in one statement (`t` tells the tables apart); see
   * {@link parseState}. An attempt reads no identities (`observe` false): it never needs them.
   */
  state(lockId: string, observe = false): Stmt {
    return { sql: this.#stateSql('lock_id = ?', observe), params: [lockId, lockId] };
  }

  /** {@link state} of many ids in one statement (rows carry `lock_id`), identities included. */
  statesOf(lockIds: readonly string[]): Stmt {
    const among = `lock_id IN (${lockIds.map(() => '?').join(', ')})`;
    return { sql: this.#stateSql(among, true), params: [...lockIds, ...lockIds] };
  }

  #stateSql(where: string, observe: boolean): string {
    const h = observe ? ', lock_id, identity, acquired_us AS at, 0 AS f' : '';
    const q = observe ? ', lock_id, identity, since_us AS at, fair AS f' : '';
    return `SELECT 'h' AS t, token AS n, owner_id, kind, count AS c, permits AS p, weight AS w, expires_us, lock_delay_ms AS d${h} FROM ${this.#t.holders} WHERE ${where}
       UNION ALL
       SELECT 'q' AS t, seq AS n, owner_id, kind, 0 AS c, permits AS p, weight AS w, expires_us, 0 AS d${q} FROM ${this.#t.queue} WHERE ${where}`;
  }

  /** The last token of many ids (no lock taken), for a listing. */
  tokensOf(lockIds: readonly string[]): Stmt {
    return {
      sql: `SELECT lock_id, token FROM ${this.#t.locks} WHERE lock_id IN (${lockIds.map(() => '?').join(', ')})`,
      params: lockIds,
    };
  }

  /**
   * Up to `limit` ids after `after` (byte order) starting with `prefix` that have a live hold
   * or a live waiter, in byte order: keyset paging, each side bounded before the union.
   */
  pageIds(prefix: string, after: string, limit: number): Stmt {
    const n = Math.max(1, Math.floor(limit));
    const like = prefix === '' ? '' : ` AND ${this.#bin} LIKE ? ESCAPE '!'`;
    const params = prefix === '' ? [after] : [after, likePrefix(prefix)];
    const side = (table: string): string =>
      `(SELECT DISTINCT ${this.#bin} AS lock_id FROM ${table}
        WHERE ${this.#bin} > ?${like} AND expires_us > ${this.#now} ORDER BY 1 LIMIT ${n})`;
    return {
      sql: `SELECT lock_id FROM (${side(this.#t.holders)} UNION ${side(this.#t.queue)}) ids ORDER BY lock_id LIMIT ${n}`,
      params: [...params, ...params],
    };
  }

  /**
   * Break every hold of `lockId` (under its lock row): bump the token when there is a hold to
   * break, then count the live holds and delete every holder row (lock delays included).
   */
  forceRelease(lockId: string): Stmt[] {
    return [
      {
        sql: `UPDATE ${this.#t.locks} SET token = token + 1 WHERE lock_id = ? AND EXISTS (SELECT 1 FROM ${this.#t.holders} WHERE lock_id = ?)`,
        params: [lockId, lockId],
      },
      { sql: `DELETE FROM ${this.#t.holders} WHERE lock_id = ? AND expires_us > ${this.#now}`, params: [lockId] },
      { sql: `DELETE FROM ${this.#t.holders} WHERE lock_id = ?`, params: [lockId] },
    ];
  }

  /** Delete holds past their lease and lock delay, and waiters past their expiry. */
  purge(lockId: string, nowUs: number, holders: boolean, waiters: boolean): Stmt[] {
    const out: Stmt[] = [];
    if (holders)
      out.push({
        sql: `DELETE FROM ${this.#t.holders} WHERE lock_id = ? AND expires_us + lock_delay_ms * 1000 <= ?`,
        params: [lockId, nowUs],
      });
    if (waiters) out.push({ sql: `DELETE FROM ${this.#t.queue} WHERE lock_id = ? AND expires_us <= ?`, params: [lockId, nowUs] });
    return out;
  }

  /** Up to `limit` lock ids with rows past their lease and lock delay, or waiters past their expiry (no lock taken). */
  staleIds(limit: number): Stmt {
    const n = Math.max(1, Math.floor(limit));
    return {
      sql: `(SELECT lock_id FROM ${this.#t.holders} WHERE expires_us + lock_delay_ms * 1000 <= ${this.#now} LIMIT ${n})
            UNION
            (SELECT lock_id FROM ${this.#t.queue} WHERE expires_us <= ${this.#now} LIMIT ${n})`,
      params: [],
    };
  }

  /** {@link purge} of every stale row of one id, on the clock read in the statement (for the sweep). */
  purgeStale(lockId: string): Stmt[] {
    return [
      { sql: `DELETE FROM ${this.#t.holders} WHERE lock_id = ? AND expires_us + lock_delay_ms * 1000 <= ${this.#now}`, params: [lockId] },
      { sql: `DELETE FROM ${this.#t.queue} WHERE lock_id = ? AND expires_us <= ${this.#now}`, params: [lockId] },
    ];
  }

  /** Store the counters of the lock row (under its lock: tokens and sequences only grow). */
  setCounters(lockId: string, token: bigint, seq: bigint): Stmt {
    return { sql: `UPDATE ${this.#t.locks} SET token = ?, seq = ? WHERE lock_id = ?`, params: [token.toString(), seq.toString(), lockId] };
  }

  insertHolder(lockId: string, h: HolderRow): Stmt {
    return {
      sql: `INSERT INTO ${this.#t.holders} (lock_id, token, owner_id, kind, count, permits, weight, expires_us, lock_delay_ms, identity, acquired_us)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
      params: [
        lockId,
        h.token.toString(),
        h.ownerId,
        h.kind,
        h.count,
        h.permits,
        h.weight,
        h.expiresUs,
        h.lockDelayMs,
        h.identity,
        h.acquiredUs,
      ],
    };
  }

  /** One more entry into a hold, its lease stretched to `expiresUs` (never shortened). */
  reenter(lockId: string, token: bigint, expiresUs: number): Stmt {
    return {
      sql: `UPDATE ${this.#t.holders} SET count = count + 1, expires_us = GREATEST(expires_us, ?) WHERE lock_id = ? AND token = ?`,
      params: [expiresUs, lockId, token.toString()],
    };
  }

  /** Stretch a live hold of `owner` to now + `ttlMs` on the database's clock (affects 0 rows when not held). */
  extend(lockId: string, token: bigint, ownerId: string, ttlMs: number): Stmt {
    return {
      sql: `UPDATE ${this.#t.holders} SET expires_us = GREATEST(expires_us, ${this.#now} + ?)
            WHERE lock_id = ? AND token = ? AND owner_id = ? AND expires_us > ${this.#now}`,
      params: [Math.round(ttlMs * 1000), lockId, token.toString(), ownerId],
    };
  }

  /**
   * One exit from a live hold, then its deletion at zero (a clean release leaves no lock
   * delay). The first statement affects 0 rows when the hold is not live any more.
   */
  release(lockId: string, token: bigint, ownerId: string): Stmt[] {
    const key: SqlValue[] = [lockId, token.toString(), ownerId];
    return [
      {
        sql: `UPDATE ${this.#t.holders} SET count = count - 1 WHERE lock_id = ? AND token = ? AND owner_id = ? AND expires_us > ${this.#now}`,
        params: key,
      },
      { sql: `DELETE FROM ${this.#t.holders} WHERE lock_id = ? AND token = ? AND owner_id = ? AND count <= 0`, params: key },
    ];
  }

  insertWaiter(lockId: string, w: WaiterRow): Stmt {
    return {
      sql: `INSERT INTO ${this.#t.queue} (lock_id, seq, owner_id, kind, permits, weight, expires_us, identity, since_us, fair)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
      params: [lockId, w.seq.toString(), w.ownerId, w.kind, w.permits, w.weight, w.expiresUs, w.identity, w.sinceUs, w.fair ? 1 : 0],
    };
  }

  refreshWaiter(lockId: string, seq: bigint, expiresUs: number): Stmt {
    return { sql: `UPDATE ${this.#t.queue} SET expires_us = ? WHERE lock_id = ? AND seq = ?`, params: [expiresUs, lockId, seq.toString()] };
  }

  /** Push the expiry of some queue rows of `lockId` to now + `ttlMs` (never shortened). */
  refreshWaiters(lockId: string, seqs: readonly bigint[], ttlMs: number): Stmt {
    return {
      sql: `UPDATE ${this.#t.queue} SET expires_us = GREATEST(expires_us, ${this.#now} + ?)
            WHERE lock_id = ? AND seq IN (${seqs.map(() => '?').join(', ')})`,
      params: [Math.round(ttlMs * 1000), lockId, ...seqs.map((q) => q.toString())],
    };
  }

  /** Live waiters ahead of `seq`, and whether the row `seq` is live itself (no lock taken). */
  position(lockId: string, seq: bigint): Stmt {
    const live = `lock_id = ? AND expires_us > ${this.#now}`;
    return {
      sql: `SELECT (SELECT count(*) FROM ${this.#t.queue} WHERE ${live} AND seq < ?) AS ahead,
                   (SELECT count(*) FROM ${this.#t.queue} WHERE ${live} AND seq = ?) AS mine`,
      params: [lockId, seq.toString(), lockId, seq.toString()],
    };
  }

  deleteWaiter(lockId: string, seq: bigint): Stmt {
    return { sql: `DELETE FROM ${this.#t.queue} WHERE lock_id = ? AND seq = ?`, params: [lockId, seq.toString()] };
  }

  /** Everything of one owner (an attempt whose reply was lost may have left a hold or a waiter). */
  deleteOwner(lockId: string, ownerId: string): Stmt[] {
    return [
      { sql: `DELETE FROM ${this.#t.holders} WHERE lock_id = ? AND owner_id = ?`, params: [lockId, ownerId] },
      { sql: `DELETE FROM ${this.#t.queue} WHERE lock_id = ? AND owner_id = ?`, params: [lockId, ownerId] },
    ];
  }

  /** The first live waiter's sequence (no row when nobody waits). */
  head(lockId: string): Stmt {
    return {
      sql: `SELECT seq FROM ${this.#t.queue} WHERE lock_id = ? AND expires_us > ${this.#now} ORDER BY seq LIMIT 1`,
      params: [lockId],
    };
  }

  /** The clock (no lock taken), for `inspect`. */
  now(): Stmt {
    return { sql: `SELECT ${this.#now} AS now_us`, params: [] };
  }

  /** The last token issued for `lockId` (no lock taken), for `inspect`. */
  lastToken(lockId: string): Stmt {
    return { sql: `SELECT token FROM ${this.#t.locks} WHERE lock_id = ?`, params: [lockId] };
  }
}

/** `prefix` as a LIKE pattern with `!` as the escape character (no quoting differences between engines). */
export function likePrefix(prefix: string): string {
  return `${prefix.replace(/[!%_]/g, (c) => `!${c}`)}%`;
}

/** Holders and queue of one id. */
export interface RawState {
  readonly holders: HolderRow[];
  readonly queue: WaiterRow[];
}

/** Holders and queue from the result of {@link Statements.state} (identities only when read). */
export function parseState(r: SqlResult | undefined): RawState {
  return parseStates(r, false).get('') ?? { holders: [], queue: [] };
}

/** Holders and queue per lock id from {@link Statements.statesOf} (`byId` false: all under ''). */
export function parseStates(r: SqlResult | undefined, byId = true): Map<string, RawState> {
  const out = new Map<string, RawState>();
  for (const row of r?.rows ?? []) {
    const id = byId ? text(row['lock_id']) : '';
    let s = out.get(id);
    if (s === undefined) out.set(id, (s = { holders: [], queue: [] }));
    const common = {
      ownerId: text(row['owner_id']),
      kind: kindOf(row['kind']),
      expiresUs: micros(row['expires_us']),
      identity: row['identity'] === undefined || row['identity'] === null ? '' : text(row['identity']),
      at: row['at'] === undefined || row['at'] === null ? 0 : micros(row['at']),
    };
    const { at, ...rest } = common;
    const sized = { permits: Number(row['p']), weight: Number(row['w']) };
    if (text(row['t']) === 'h') {
      s.holders.push({ ...rest, ...sized, acquiredUs: at, token: big(row['n']), count: Number(row['c']), lockDelayMs: Number(row['d']) });
    } else s.queue.push({ ...rest, ...sized, sinceUs: at, fair: Number(row['f'] ?? 0) !== 0, seq: big(row['n']) });
  }
  return out;
}

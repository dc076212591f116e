/**
 * The lock tables as typed statements (the schema is in schema.ts), and the arithmetic of
 * their cells: TTLs in whole seconds, the queue-entry names, shards. See
 * docs/backends/cassandra.md, "The tables".
 */
import { performance } from 'node:perf_hooks';
import type { Row, Session } from './session.js';

/** Queue entries counted ahead of a waiter per shard; beyond this the count stops growing. */
export const AHEAD_LIMIT = 8;
/** Main-row cells read per shard: the holder, the next in line, and a racer or two. */
const MAIN_LIMIT = 4;

/**
 * Cassandra TTLs are whole seconds and a cell written at second W with ttl n expires when
 * the server's clock reaches ⌊W⌋ + n, which can be as early as n − 1 s after the write. So
 * a lease of `ttlMs` is written as ⌈ttlMs / 1000⌉ + 1 s: the cell then outlives the lease
 * the core computes, at the price of a crashed holder's lock staying blocked up to ~2 s
 * past its lease.
 */
export function cellTtlSeconds(ttlMs: number): number {
  return Math.ceil(ttlMs / 1000) + 1;
}

/**
 * Until when (monotonic ms) a cell whose write was sent at `sentAt` with `ttlSec` surely
 * still exists, unless we deleted it: n − 1 s after the send, less a margin for the
 * server's clock rate. Inside this window a check read proves nothing new.
 */
export function aliveUntil(sentAt: number, ttlSec: number): number {
  const window = (ttlSec - 1) * 1000;
  return sentAt + window - 50 - window / 100;
}

/** True while {@link aliveUntil} has not passed. */
export function surelyAlive(sentAt: number, ttlSec: number): boolean {
  return performance.now() < aliveUntil(sentAt, ttlSec);
}

/** The queue column name: 20-digit zero-padded µs time, then the owner id. */
export function queueEntry(timeMicros: bigint, ownerId: string): string {
  return timeMicros.toString().padStart(20, '0') + ownerId;
}

/** The owner of a queue entry. */
export function entryOwner(entry: string): string {
  return entry.slice(20);
}

/** One cell of a main row: its owner, and the fencing token once that owner holds. */
export interface MainCell {
  readonly owner: string;
  /** Set by a holder (see fair.ts, "marks"); undefined for a candidate. */
  readonly fence: bigint | undefined;
}

function str(row: Row | undefined, col: string): string | undefined {
  const v: unknown = row?.get(col);
  return typeof v === 'string' ? v : undefined;
}

function big(row: Row | undefined, col: string): bigint | undefined {
  const v: unknown = row?.get(col);
  if (typeof v === 'bigint') return v;
  if (typeof v === 'number') return BigInt(v);
  return undefined;
}

/** The statements of the lock (and of the benchmark's shadow-table baseline). */
export class LockTables {
  readonly #s: Session;
  readonly #ks: string;

  constructor(session: Session) {
    this.#s = session;
    this.#ks = session.keyspace;
  }

  /** The fencing counter (0 before the first grant). */
  async counter(lockId: string, signal?: AbortSignal): Promise<bigint> {
    const r = await this.#s.exec('read', `SELECT fence FROM ${this.#ks}.lock_token WHERE lock_id = ?`, [lockId], signal);
    return big(r.first(), 'fence') ?? 0n;
  }

  /**
   * Compare-and-set the counter from `expected` to `expected + 1` (one Paxos round; `IF NOT
   * EXISTS` for the very first grant). Returns whether it applied and the value it found.
   */
  async cas(lockId: string, expected: bigint, signal?: AbortSignal): Promise<{ applied: boolean; current: bigint | undefined }> {
    const next = expected + 1n;
    const r =
      expected === 0n
        ? await this.#s.exec(
            'lwt',
            `INSERT INTO ${this.#ks}.lock_token (lock_id, fence) VALUES (?, ?) IF NOT EXISTS`,
            [lockId, next],
            signal,
          )
        : await this.#s.exec(
            'lwt',
            `UPDATE ${this.#ks}.lock_token SET fence = ? WHERE lock_id = ? IF fence = ?`,
            [next, lockId, expected],
            signal,
          );
    const row = r.first();
    return { applied: row?.get('[applied]') === true, current: big(row, 'fence') };
  }

  /** Entries of one queue partition that sort before `entry` (at most {@link AHEAD_LIMIT}). */
  async queueBefore(lockId: string, shard: bigint, entry: string, signal?: AbortSignal): Promise<string[]> {
    const r = await this.#s.exec(
      'read',
      `SELECT entry FROM ${this.#ks}.lock_queue WHERE lock_id = ? AND shard = ? AND entry < ? LIMIT ${AHEAD_LIMIT}`,
      [lockId, shard, entry],
      signal,
    );
    return r.rows.map((row) => str(row, 'entry')).filter((e): e is string => e !== undefined);
  }

  /** The entries of one queue partition (up to `limit`): `inspect`, and the benchmark's shadow row. */
  async queueAll(lockId: string, shard: bigint, limit: number, signal?: AbortSignal): Promise<string[]> {
    const r = await this.#s.exec(
      'read',
      `SELECT entry FROM ${this.#ks}.lock_queue WHERE lock_id = ? AND shard = ? LIMIT ${limit}`,
      [lockId, shard],
      signal,
    );
    return r.rows.map((row) => str(row, 'entry')).filter((e): e is string => e !== undefined);
  }

  /** The cells of one main row (at most {@link MAIN_LIMIT}, or `limit`). */
  async mainCells(lockId: string, shard: bigint, signal?: AbortSignal, limit = MAIN_LIMIT): Promise<MainCell[]> {
    const r = await this.#s.exec(
      'read',
      `SELECT owner, fence FROM ${this.#ks}.lock_main WHERE lock_id = ? AND shard = ? LIMIT ${limit}`,
      [lockId, shard],
      signal,
    );
    const cells: MainCell[] = [];
    for (const row of r.rows) {
      const owner = str(row, 'owner');
      if (owner !== undefined) cells.push({ owner, fence: big(row, 'fence') });
    }
    return cells;
  }

  /** Whether `owner` has a cell in one main row. */
  async hasMainCell(lockId: string, shard: bigint, owner: string): Promise<boolean> {
    const r = await this.#s.exec('read', `SELECT owner FROM ${this.#ks}.lock_main WHERE lock_id = ? AND shard = ? AND owner = ?`, [
      lockId,
      shard,
      owner,
    ]);
    return r.rowLength > 0;
  }

  /**
   * Write (or rewrite) `owner`'s main cell with a fresh TTL; `fence` marks a holder. A
   * candidate's cell is written without the column, not with null: a null would be a
   * tombstone per acquisition.
   */
  async writeMain(lockId: string, shard: bigint, owner: string, fence: bigint | null, ttlSec: number, signal?: AbortSignal): Promise<void> {
    if (fence === null) {
      await this.#s.exec(
        'write',
        `INSERT INTO ${this.#ks}.lock_main (lock_id, shard, owner) VALUES (?, ?, ?) USING TTL ?`,
        [lockId, shard, owner, ttlSec],
        signal,
      );
      return;
    }
    await this.#s.exec(
      'write',
      `INSERT INTO ${this.#ks}.lock_main (lock_id, shard, owner, fence) VALUES (?, ?, ?, ?) USING TTL ?`,
      [lockId, shard, owner, fence, ttlSec],
      signal,
    );
  }

  /** Take the holder's mark off `owner`'s cell (a bet on being alone that lost); the cell stays. */
  async unmark(lockId: string, shard: bigint, owner: string, signal?: AbortSignal): Promise<void> {
    await this.#s.exec(
      'write',
      `DELETE fence FROM ${this.#ks}.lock_main WHERE lock_id = ? AND shard = ? AND owner = ?`,
      [lockId, shard, owner],
      signal,
    );
  }

  /** Delete `owner`'s main cell (named by the owner alone: never another's). */
  async deleteMain(lockId: string, shard: bigint, owner: string, signal?: AbortSignal): Promise<void> {
    await this.#s.exec(
      'write',
      `DELETE FROM ${this.#ks}.lock_main WHERE lock_id = ? AND shard = ? AND owner = ?`,
      [lockId, shard, owner],
      signal,
    );
  }

  /** Write (or rewrite) a queue entry with a fresh TTL. */
  async writeQueue(lockId: string, shard: bigint, entry: string, ttlSec: number, signal?: AbortSignal): Promise<void> {
    await this.#s.exec(
      'write',
      `INSERT INTO ${this.#ks}.lock_queue (lock_id, shard, entry) VALUES (?, ?, ?) USING TTL ?`,
      [lockId, shard, entry, ttlSec],
      signal,
    );
  }

  /** Delete a queue entry. */
  async deleteQueue(lockId: string, shard: bigint, entry: string, signal?: AbortSignal): Promise<void> {
    await this.#s.exec(
      'write',
      `DELETE FROM ${this.#ks}.lock_queue WHERE lock_id = ? AND shard = ? AND entry = ?`,
      [lockId, shard, entry],
      signal,
    );
  }

  /** The time service's blind max-write: the value is its own write timestamp (see time-service.ts). */
  async pushTime(micros: bigint): Promise<void> {
    await this.#s.exec('write', `UPDATE ${this.#ks}.time_service USING TIMESTAMP ? SET t = ? WHERE id = 'now'`, [micros, micros]);
  }

  /** The time service's current maximum. */
  async readTime(): Promise<bigint | undefined> {
    return big((await this.#s.exec('read', `SELECT t FROM ${this.#ks}.time_service WHERE id = 'now'`, [])).first(), 't');
  }
}

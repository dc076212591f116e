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
 * The TTL of a holder's main cell: its lease's, plus the lock-delay in whole seconds. A
 * holder that releases deletes the cell; one that vanishes leaves it to block the lock for
 * the delay past its lease, on the servers' TTL clock alone (docs/backends/cassandra.md,
 * "Lock-delay").
 */
export function heldTtlSeconds(ttlSec: number, lockDelayMs: number): number {
  return ttlSec + Math.ceil(lockDelayMs / 1000);
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

/** Partitions of the listing index: few, so a full listing reads few partitions; fixed, because a lock's bucket is where it was written. */
export const INDEX_BUCKETS = 16;

/** The index bucket of `lockId`: FNV-1a of its UTF-8 bytes, stable across processes and versions. */
export function indexBucket(lockId: string): number {
  let h = 0x811c9dc5;
  for (const b of Buffer.from(lockId, 'utf8')) {
    h ^= b;
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h % INDEX_BUCKETS;
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

/** What a main cell says about who wrote it; `mark` makes it a holder's. */
export interface CellWrite {
  /** The writer's identity, verbatim (`AcquireRequest.identity`). */
  readonly identity: string;
  readonly mark?: {
    readonly fence: bigint;
    /** When the hold began, in ms of the time service. */
    readonly acquiredMs: bigint;
    /** The lease this write vouches for, from its write time. */
    readonly leaseMs: number;
  };
}

/** A main cell as `inspect` reads it. */
export interface HoldCell extends MainCell {
  readonly identity: string | undefined;
  readonly acquiredMs: bigint | undefined;
  readonly leaseMs: number | undefined;
  /** The cell's write time in µs, on the coordinator's clock (server-side timestamps). */
  readonly writtenMicros: bigint | undefined;
}

/** One queue entry with the identity stored beside it. */
export interface QueueCell {
  readonly entry: string;
  readonly identity: string | undefined;
}

function int(row: Row | undefined, col: string): number | undefined {
  const v: unknown = row?.get(col);
  return typeof v === 'number' ? v : undefined;
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

  /** Write (or rewrite) `owner`'s main cell with its identity, and with `cell.mark` a holder's mark. */
  async writeCell(lockId: string, shard: bigint, owner: string, cell: CellWrite, ttlSec: number, signal?: AbortSignal): Promise<void> {
    const m = cell.mark;
    await this.#s.exec(
      'write',
      m
        ? `INSERT INTO ${this.#ks}.lock_main (lock_id, shard, owner, identity, fence, acquired, lease_ms) VALUES (?, ?, ?, ?, ?, ?, ?) USING TTL ?`
        : `INSERT INTO ${this.#ks}.lock_main (lock_id, shard, owner, identity) VALUES (?, ?, ?, ?) USING TTL ?`,
      m ? [lockId, shard, owner, cell.identity, m.fence, m.acquiredMs, m.leaseMs, ttlSec] : [lockId, shard, owner, cell.identity, ttlSec],
      signal,
    );
  }

  /**
   * Write (or rewrite) a queue entry with its identity and, in the same unlogged batch (one
   * round trip), the lock's index cell. The index cell's write timestamp is the time it
   * lives until (`untilMicros`), so of the writes of all owners the longest-lived wins: a
   * max-register of expiry, like the time service (docs/backends/cassandra.md, "Listing").
   */
  async writeEntry(
    lockId: string,
    shard: bigint,
    entry: string,
    identity: string,
    ttlSec: number,
    untilMicros: bigint,
    signal?: AbortSignal,
  ): Promise<void> {
    await this.#s.batch(
      [
        {
          query: `INSERT INTO ${this.#ks}.lock_queue (lock_id, shard, entry, identity) VALUES (?, ?, ?, ?) USING TTL ?`,
          params: [lockId, shard, entry, identity, ttlSec],
        },
        {
          query: `INSERT INTO ${this.#ks}.lock_index (bucket, lock_id) VALUES (?, ?) USING TTL ? AND TIMESTAMP ?`,
          params: [indexBucket(lockId), lockId, ttlSec, untilMicros],
        },
      ],
      signal,
    );
  }

  /** The cells of one main row with what `inspect` shows (up to `limit`). */
  async holdCells(lockId: string, shard: bigint, limit: number, signal?: AbortSignal): Promise<HoldCell[]> {
    const r = await this.#s.exec(
      'read',
      `SELECT owner, fence, identity, acquired, lease_ms, WRITETIME(identity) AS wt FROM ${this.#ks}.lock_main WHERE lock_id = ? AND shard = ? LIMIT ${limit}`,
      [lockId, shard],
      signal,
    );
    const cells: HoldCell[] = [];
    for (const row of r.rows) {
      const owner = str(row, 'owner');
      if (owner === undefined) continue;
      cells.push({
        owner,
        fence: big(row, 'fence'),
        identity: str(row, 'identity'),
        acquiredMs: big(row, 'acquired'),
        leaseMs: int(row, 'lease_ms'),
        writtenMicros: big(row, 'wt'),
      });
    }
    return cells;
  }

  /** The entries of one queue partition with their identities, in queue order (up to `limit`). */
  async queueCells(lockId: string, shard: bigint, limit: number, signal?: AbortSignal): Promise<QueueCell[]> {
    const r = await this.#s.exec(
      'read',
      `SELECT entry, identity FROM ${this.#ks}.lock_queue WHERE lock_id = ? AND shard = ? LIMIT ${limit}`,
      [lockId, shard],
      signal,
    );
    const out: QueueCell[] = [];
    for (const row of r.rows) {
      const entry = str(row, 'entry');
      if (entry !== undefined) out.push({ entry, identity: str(row, 'identity') });
    }
    return out;
  }

  /**
   * Lock ids of one index bucket after `after` (or from it, with `inclusive`), in order, up
   * to `limit`: one bounded slice of one partition.
   */
  async indexSlice(bucket: number, after: string, inclusive: boolean, limit: number, signal?: AbortSignal): Promise<string[]> {
    const r = await this.#s.exec(
      'read',
      `SELECT lock_id FROM ${this.#ks}.lock_index WHERE bucket = ? AND lock_id ${inclusive ? '>=' : '>'} ? LIMIT ${limit}`,
      [bucket, after],
      signal,
    );
    return r.rows.map((row) => str(row, 'lock_id')).filter((id): id is string => id !== undefined);
  }

  /**
   * Delete a main cell and a queue entry as of `atMicros`, a time ahead of now: a broken
   * holder's renewal that was already under way lands before it and is shadowed, so it
   * cannot bring the hold back (docs/backends/cassandra.md, "Breaking a lock").
   */
  async breakHold(
    lockId: string,
    shard: bigint,
    owner: string,
    entries: ReadonlyArray<{ shard: bigint; entry: string }>,
    atMicros: bigint,
  ): Promise<void> {
    await this.#s.batch([
      {
        query: `DELETE FROM ${this.#ks}.lock_main USING TIMESTAMP ? WHERE lock_id = ? AND shard = ? AND owner = ?`,
        params: [atMicros, lockId, shard, owner],
      },
      ...entries.map((e) => ({
        query: `DELETE FROM ${this.#ks}.lock_queue USING TIMESTAMP ? WHERE lock_id = ? AND shard = ? AND entry = ?`,
        params: [atMicros, lockId, e.shard, e.entry],
      })),
    ]);
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

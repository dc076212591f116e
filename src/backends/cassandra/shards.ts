/**
 * Shard rotation: the fencing counter's value ÷ `shardSize`
 * names the current shard, and a holder's cells stay in the shard where it was granted, so
 * every look reads the current shard and the one before. A lock's partitions therefore
 * receive at most about `shardSize` grants each and are then never written again: their
 * tombstones stay bounded. See docs/backends/cassandra.md, "The fair algorithm" (its
 * paragraph on shard rotation) and "Tombstones".
 */
import type { LockTables, MainCell } from './tables.js';

/** Bounded retries of a token CAS that lost to another candidate's. */
const TOKEN_CAS_RETRIES = 5;

/** The shard arithmetic and the two-shard reads of one lock algorithm. */
export class Shards {
  readonly #t: LockTables;
  readonly #size: bigint;
  readonly #stored: (shard: bigint) => bigint;

  /**
   * `stored` maps a shard number (≥ 0) to the partition's `shard` column: the identity for
   * the fair lock; the benchmark's shadow-table baseline (bench/cassandra-shadow.ts) maps to
   * negative numbers, so the two never share a row.
   */
  constructor(tables: LockTables, shardSize: number, stored: (shard: bigint) => bigint = (s) => s) {
    this.#t = tables;
    this.#size = BigInt(shardSize);
    this.#stored = stored;
  }

  /** The shard the counter value names. */
  shardOf(counter: bigint): bigint {
    return counter / this.#size;
  }

  /** The partition key of shard `shard`. */
  stored(shard: bigint): bigint {
    return this.#stored(shard);
  }

  /** The main-row cells of shard `shard` and the one before (there is none before 0). */
  async main(lockId: string, shard: bigint, signal?: AbortSignal, limit?: number): Promise<MainCell[]> {
    const [cur, prev] = await Promise.all([
      this.#t.mainCells(lockId, this.#stored(shard), signal, limit),
      shard > 0n ? this.#t.mainCells(lockId, this.#stored(shard - 1n), signal, limit) : Promise.resolve([]),
    ]);
    return [...prev, ...cur];
  }

  /** Queue entries before `entry` in shard `shard` and the one before, in queue order. */
  async ahead(lockId: string, shard: bigint, entry: string, signal?: AbortSignal): Promise<string[]> {
    const [cur, prev] = await Promise.all([
      this.#t.queueBefore(lockId, this.#stored(shard), entry, signal),
      shard > 0n ? this.#t.queueBefore(lockId, this.#stored(shard - 1n), entry, signal) : Promise.resolve([]),
    ]);
    return [...prev, ...cur].sort();
  }

  /**
   * A token taken ahead of time (rule 3 of fair.ts): CAS the counter from `counter`, and
   * after losing to another CAS go on from the value found, as long as neither it nor the
   * token would leave `counter`'s shard. Undefined when refused.
   */
  async takeToken(lockId: string, counter: bigint, signal?: AbortSignal): Promise<bigint | undefined> {
    const shard = this.shardOf(counter);
    let expected = counter;
    for (let i = 0; i < TOKEN_CAS_RETRIES; i++) {
      const r = await this.#t.cas(lockId, expected, signal);
      if (r.applied) return expected + 1n;
      const cur = r.current;
      if (cur === undefined || this.shardOf(cur) !== shard || this.shardOf(cur + 1n) !== shard) return undefined;
      expected = cur;
    }
    return undefined;
  }
}

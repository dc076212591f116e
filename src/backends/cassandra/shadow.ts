/**
 * The old shadow-table lock (docs/backends/cassandra.md, "The shadow lock"), kept as the baseline the fair
 * lock is measured against: Success / AnotherThreadIsOwner / ConcurrentAttempt with the
 * original random backoffs. Its main row is `lock_main` and its shadow row `lock_queue`, both
 * at negative shards (never touched by the fair lock), rotated with the fencing counter
 * like the fair lock's rows. See docs/backends/cassandra.md, "The shadow lock".
 */
import { performance } from 'node:perf_hooks';
import { sleep, type AcquireRequest, type AcquireResult, type LockState } from '../kit.js';
import type { CassandraSettings } from './config.js';
import { Shards } from './shards.js';
import { cellTtlSeconds, type LockTables } from './tables.js';
import type { CassandraGrantData, CassandraTicket, LockAlgorithm } from './types.js';

/** What a shadow attempt learned, to choose its backoff. */
export interface ShadowTicket {
  readonly algorithm: 'shadow';
  readonly outcome: 'AnotherThreadIsOwner' | 'ConcurrentAttempt';
  readonly attempt: number;
}

/** What a shadow grant keeps for extend and release. */
export interface ShadowGrantData {
  readonly algorithm: 'shadow';
  /** The partition (`shard` column) of the main cell. */
  readonly shard: bigint;
  /** When the main cell's last write was sent, and its TTL. */
  sentAt: number;
  ttlSec: number;
}

type Result = AcquireResult<CassandraTicket, CassandraGrantData>;
type Req = AcquireRequest<CassandraTicket>;

/** Shard k of the shadow lock lives at `shard = −1 − k`. */
const storedShadow = (k: bigint): bigint => -1n - k;

/** The shadow algorithm of one backend. */
export class ShadowLock implements LockAlgorithm {
  readonly #t: LockTables;
  readonly #rows: Shards;

  constructor(tables: LockTables, settings: CassandraSettings) {
    this.#t = tables;
    this.#rows = new Shards(tables, settings.shardSize, storedShadow);
  }

  /**
   * One attempt of the shadow lock. The token is a CAS from the exact counter value read first:
   * it fails when anyone was granted since, which is what makes rotation safe (a holder
   * granted meanwhile may sit in a shard we did not read).
   */
  async acquire(req: Req): Promise<Result> {
    const { lockId, ownerId, signal } = req;
    const attempt = req.ticket?.algorithm === 'shadow' ? req.ticket.attempt : 0;
    const contended = (outcome: ShadowTicket['outcome']): Result => ({
      granted: false,
      contended: { ticket: req.wait ? { algorithm: 'shadow', outcome, attempt: attempt + 1 } : undefined },
    });
    const counter = await this.#t.counter(lockId, signal);
    const k = this.#rows.shardOf(counter);
    const at = this.#rows.stored(k);
    if ((await this.#rows.main(lockId, k, signal)).length > 0) return contended('AnotherThreadIsOwner');
    const ttlSec = cellTtlSeconds(req.ttlMs);
    await this.#t.writeQueue(lockId, at, ownerId, ttlSec, signal);
    let mainWritten = false;
    try {
      const shadow = await this.#t.queueAll(lockId, at, 2, signal);
      if (shadow.length === 1 && shadow[0] === ownerId && (await this.#rows.main(lockId, k, signal)).length === 0) {
        const sentAt = performance.now();
        mainWritten = true;
        await this.#t.writeMain(lockId, at, ownerId, counter + 1n, ttlSec, signal);
        await this.#t.deleteQueue(lockId, at, ownerId, signal);
        if ((await this.#t.cas(lockId, counter, signal)).applied) {
          const data: ShadowGrantData = { algorithm: 'shadow', shard: at, sentAt, ttlSec };
          return {
            granted: true,
            grant: { lockId, kind: req.kind, ownerId, token: counter + 1n, ttlMs: req.ttlMs, reentered: false, data },
          };
        }
        await this.#t.deleteMain(lockId, at, ownerId, signal);
        return contended('ConcurrentAttempt');
      }
      await this.#t.deleteQueue(lockId, at, ownerId, signal);
      return contended('ConcurrentAttempt');
    } catch (err) {
      void Promise.allSettled([
        this.#t.deleteQueue(lockId, at, ownerId),
        mainWritten ? this.#t.deleteMain(lockId, at, ownerId) : undefined,
      ]);
      throw err;
    }
  }

  /** The shadow lock's waits: 0–1000 ms behind another owner, 0–50·attempt ms after a concurrent attempt. */
  wait(any: CassandraTicket | undefined, signal: AbortSignal): Promise<void> {
    const ticket = any?.algorithm === 'shadow' ? any : undefined;
    const ms = !ticket || ticket.outcome === 'AnotherThreadIsOwner' ? Math.random() * 1000 : Math.random() * 50 * ticket.attempt;
    return sleep(Math.max(1, ms), signal);
  }

  /** Nothing to cancel: every attempt takes its own cells back before it returns. */
  async cancel(): Promise<void> {}

  /** Shadow waiters are not woken: they keep the original random backoffs. */
  released(): void {}

  /** Nothing kept in the process. */
  closed(): void {}

  /** `locksmith status`: the main row's cells, with the tokens they were written with. */
  async inspect(lockId: string): Promise<LockState> {
    const counter = await this.#t.counter(lockId);
    const cells = await this.#rows.main(lockId, this.#rows.shardOf(counter), undefined, 16);
    return {
      lockId,
      holders: cells.map((c) => ({ ownerId: c.owner, kind: 'mutex', token: c.fence ?? 0n, count: 1 })),
      waiters: 0,
      lastToken: counter,
    };
  }
}

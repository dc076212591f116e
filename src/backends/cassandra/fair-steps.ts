/**
 * The steps both fair paths share (the waiting lock in fair.ts, the one-shot tryLock in
 * fair-try.ts): writing our cells, the grant that crosses into
 * the next shard, and the grant itself. See docs/backends/cassandra.md, "The fair
 * algorithm".
 */
import { performance } from 'node:perf_hooks';
import type { AcquireRequest, AcquireResult } from '../kit.js';
import { localQueues, LocalWaiter, waiterKey } from './handoff.js';
import type { Shards } from './shards.js';
import { aliveUntil, cellTtlSeconds, heldTtlSeconds, queueEntry, type LockTables } from './tables.js';
import type { TimeService } from './time-service.js';
import type { Candidate, CassandraGrantData, CassandraTicket, FairGrantData, FairTicket } from './types.js';

/**
 * Remember what a look saw: the holder we wait behind, and the lock's pace. Each look that
 * read the counter is a sample of the time per grant: the time since the previous look
 * over the grants since (a look that saw no grant counts its whole gap as one grant, so
 * the estimate grows while a hold lasts).
 */
export function observe(t: FairTicket, seen: { counter?: bigint; holder?: string | undefined }): void {
  const now = performance.now();
  if (seen.counter !== undefined) {
    if (t.counterAt > 0) {
      const grants = seen.counter > t.counter ? Number(seen.counter - t.counter) : 1;
      const sample = (now - t.counterAt) / grants;
      t.perGrantMs = t.perGrantMs > 0 ? (t.perGrantMs + sample) / 2 : sample;
    }
    t.counter = seen.counter;
    t.counterAt = now;
  }
  if ('holder' in seen && seen.holder !== t.holder) {
    t.holder = seen.holder;
    t.holderSince = now;
  }
}

/** One attempt's result. */
export type Result = AcquireResult<CassandraTicket, CassandraGrantData>;
/** One attempt's request. */
export type Req = AcquireRequest<CassandraTicket>;

/** Shared steps over the tables, for one backend. */
export class FairSteps {
  readonly tables: LockTables;
  readonly rows: Shards;
  readonly #time: TimeService;
  readonly #scope: string;
  /** The locks this backend holds, as registered with `localQueues` (key → owner). */
  readonly #held = new Map<string, string>();

  constructor(tables: LockTables, rows: Shards, time: TimeService, scope: string) {
    this.tables = tables;
    this.rows = rows;
    this.#time = time;
    this.#scope = scope;
  }

  /** The registry key of `lockId` (see handoff.ts). */
  key(lockId: string): string {
    return waiterKey(this.#scope, lockId);
  }

  /** `ownerId` let go of `lockId` (released, or the backend closed). */
  letGo(lockId: string, ownerId: string): void {
    const key = this.key(lockId);
    localQueues.unhold(key, ownerId);
    if (this.#held.get(key) === ownerId) this.#held.delete(key);
  }

  /**
   * The backend closes: its holds no longer wake anyone, so local waiters behind them go
   * back to their short poll (a closed or crashed holder's cells expire by their TTL).
   */
  letGoAll(): void {
    for (const [key, owner] of this.#held) localQueues.unhold(key, owner);
    this.#held.clear();
  }

  /** A new ticket: the queue entry's name (time-service time + ownerId, step 2 of the fair algorithm), taken now. */
  ticket(req: Req, shard: bigint): FairTicket {
    const entry = queueEntry(this.#time.now(), req.ownerId);
    return {
      algorithm: 'fair',
      entry,
      waiter: new LocalWaiter(this.key(req.lockId), entry),
      queueShard: shard,
      queueSentAt: 0,
      ttlSec: cellTtlSeconds(req.ttlMs),
      shard,
      ahead: -1,
      holder: undefined,
      holderSince: 0,
      counter: -1n,
      counterAt: 0,
      perGrantMs: 0,
      candidate: undefined,
    };
  }

  /**
   * Write our main cell with our identity; with `mark` (the candidate about to hold) marked
   * with its token, the time of the hold and its lease, and kept `lockDelayMs` longer than
   * its lease (a candidate's cell never is: only a holder imposes the delay). Resolves with
   * when it was sent.
   */
  async writeCell(req: Req, shard: bigint, mark: Candidate | null, ttlSec: number): Promise<number> {
    const sentAt = performance.now();
    if (mark) mark.acquiredMs = this.#time.now() / 1000n;
    const cell = mark
      ? { identity: req.identity, mark: { fence: mark.token, acquiredMs: mark.acquiredMs, leaseMs: req.ttlMs } }
      : { identity: req.identity };
    const ttl = mark ? heldTtlSeconds(ttlSec, req.lockDelayMs) : ttlSec;
    await this.tables.writeCell(req.lockId, shard, req.ownerId, cell, ttl, req.signal);
    return sentAt;
  }

  /** Until when (time-service µs) a cell written now with `ttlSec` lives: the index cell's timestamp. */
  until(ttlSec: number): bigint {
    return this.#time.now() + BigInt(ttlSec) * 1_000_000n;
  }

  /** Write our queue entry in `shard` (a rewrite when it is already there), with the lock's index cell. */
  async writeEntry(req: Req, t: FairTicket, shard: bigint): Promise<void> {
    const sentAt = performance.now();
    await this.tables.writeEntry(req.lockId, shard, t.entry, req.identity, t.ttlSec, this.until(t.ttlSec), req.signal);
    t.queueShard = shard;
    t.queueSentAt = sentAt;
  }

  /** Rewrite our queue entry once a third of its TTL has passed (a crashed waiter's expires). */
  async refreshEntry(req: Req, t: FairTicket): Promise<void> {
    const now = performance.now();
    if (now - t.queueSentAt <= (t.ttlSec * 1000) / 3 && now < aliveUntil(t.queueSentAt, t.ttlSec)) return;
    await this.writeEntry(req, t, t.queueShard);
  }

  /** The queue rotated past our entry: move it (same name, so the same place in line). */
  async moveEntry(req: Req, t: FairTicket, shard: bigint): Promise<void> {
    const from = t.queueShard;
    await this.writeEntry(req, t, shard);
    await this.tables.deleteQueue(req.lockId, from, t.entry, req.signal);
  }

  /**
   * The grant that moves the counter into the next shard (rule 3 of fair.ts): alone
   * first, then the CAS from the exact value read before our cell was written, then the
   * mark. On failure our cell is taken back.
   */
  async crossShard(req: Req, t: FairTicket, counter: bigint, sentAt: number): Promise<Result> {
    const { lockId, ownerId, signal } = req;
    const s = this.rows.shardOf(counter);
    const cells = await this.rows.main(lockId, s, signal);
    const alone = cells.length === 1 && cells[0]?.owner === ownerId;
    const applied = alone && (await this.tables.cas(lockId, counter, signal)).applied;
    if (!applied) {
      await this.tables.deleteMain(lockId, s, ownerId, signal);
      return { granted: false, contended: { ticket: t } };
    }
    const cand: Candidate = { shard: s, token: counter + 1n, sentAt, ttlSec: t.ttlSec, acquiredMs: 0n };
    cand.sentAt = await this.writeCell(req, s, cand, t.ttlSec);
    return this.grant(req, t, cand);
  }

  /** Hold: leave the local queue, say so to the one behind us (it prepares now), grant. */
  grant(req: Req, t: FairTicket, cand: Candidate): Result {
    localQueues.remove(t.waiter);
    localQueues.hold(t.waiter.key, req.ownerId);
    this.#held.set(t.waiter.key, req.ownerId);
    localQueues.wakeFirst(t.waiter.key, 'granted');
    const data: FairGrantData = {
      algorithm: 'fair',
      shard: cand.shard,
      queueShard: t.queueShard,
      entry: t.entry,
      sentAt: cand.sentAt,
      ttlSec: cand.ttlSec,
      identity: req.identity,
      acquiredMs: cand.acquiredMs,
      lockDelayMs: req.lockDelayMs,
    };
    const { lockId, kind, ownerId, ttlMs } = req;
    return { granted: true, grant: { lockId, kind, ownerId, token: cand.token, ttlMs, reentered: false, data } };
  }
}

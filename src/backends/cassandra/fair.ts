/**
 * The fair queue lock (docs/backends/cassandra.md, "The fair algorithm") with a prepared
 * hand-off. The same section, with its theorems and its paragraph on waiting, is the argument.
 *
 * Per lockId a *queue* partition (entries named by time-service time + ownerId, so they
 * sort by arrival) and a *main* partition (cells named by ownerId), both per shard of the
 * fencing counter. A waiter writes its main cell only when it is *entitled*: first in the
 * queue, or next behind a marked holder. It then keeps that cell and takes its fencing
 * token ahead of time (a *candidate*), and holds as soon as a read of the main row shows
 * its cell alone. So a hand-off costs the releaser's delete plus one read.
 *
 * Safety rests on three rules, never on a wake-up:
 * 1. A candidate's cell is written before its token CAS and stays, continuously (kept
 *    within its surely-alive window), until it holds; a token is dropped with its cell.
 * 2. It holds only after a QUORUM read, issued after its CAS, shows its cell alone in the
 *    main rows of its shard and the one before.
 * 3. A CAS ahead of time never moves the counter into the next shard; the one that does
 *    runs after the alone read, and only from the exact value read before the cell write.
 * A holder marks its cell with its token (`fence`): that is what `inspect` shows, and what
 * tells the next in line that it waits behind a holder rather than another candidate.
 */
import { performance } from 'node:perf_hooks';
import type { ListPage, ListRequest } from '../../backend.js';
import { sleep, type LockState } from '../kit.js';
import { LockViews } from './observe.js';
import type { CassandraSettings } from './config.js';
import { FairSteps, observe, type Req, type Result } from './fair-steps.js';
import { tryLockOnce } from './fair-try.js';
import { localQueues, pollInterval, waiterKey } from './handoff.js';
import { Shards } from './shards.js';
import { entryOwner, surelyAlive, type LockTables, type MainCell } from './tables.js';
import type { TimeService } from './time-service.js';
import type { Candidate, CassandraTicket, FairTicket } from './types.js';

const waiting = (t: FairTicket): Result => ({ granted: false, contended: { ticket: t } });

/** The fair algorithm of one backend. */
export class FairLock {
  readonly #steps: FairSteps;
  readonly #t: LockTables;
  readonly #rows: Shards;
  readonly #pollMs: number;
  readonly #scope: string;
  readonly #views: LockViews;

  constructor(tables: LockTables, time: TimeService, settings: CassandraSettings, scope: string) {
    this.#t = tables;
    this.#rows = new Shards(tables, settings.shardSize);
    this.#steps = new FairSteps(tables, this.#rows, time, scope);
    this.#pollMs = settings.pollMs;
    this.#scope = scope;
    this.#views = new LockViews(tables, this.#rows, time);
  }

  /** One attempt: the one-shot tryLock path for `wait: false`, else one round of steps 1–4 of the fair algorithm. */
  async acquire(req: Req): Promise<Result> {
    if (!req.wait) return tryLockOnce(this.#steps, req);
    const known = req.ticket?.algorithm === 'fair' ? req.ticket : undefined;
    const t = known ?? this.#steps.ticket(req, 0n);
    try {
      if (!known) return await this.#firstRound(req, t);
      const hint = t.waiter.takeHint();
      if (t.candidate) return await this.#candidateRound(req, t, hint === 'released');
      if (hint === undefined && !localQueues.isFirst(t.waiter)) {
        // A local waiter is ahead of us and wakes us when it goes: only keep our place.
        await this.#steps.refreshEntry(req, t);
        return waiting(t);
      }
      return await this.#queuedRound(req, t);
    } catch (err) {
      // A ticket the core never saw would leak: clean it up here (the core cancels known ones).
      if (!known) void this.#drop(req, t);
      throw err;
    }
  }

  /**
   * Sleep until a local wake-up or the next poll (see handoff.ts), and in any case in time
   * to rewrite our cells before a third of their TTL has passed.
   */
  wait(ticket: CassandraTicket | undefined, signal: AbortSignal): Promise<boolean> {
    const t = ticket?.algorithm === 'fair' ? ticket : undefined;
    if (!t) return sleep(this.#pollMs, signal).then(() => false);
    const { candidate } = t;
    const now = performance.now();
    let ms = pollInterval({
      pollMs: this.#pollMs,
      ahead: candidate ? Math.min(t.ahead, 1) : t.ahead,
      follower: !localQueues.isFirst(t.waiter) || localQueues.holdsHere(t.waiter.key, t.holder),
      heldForMs: t.holder === undefined ? 0 : now - t.holderSince,
      perGrantMs: t.perGrantMs,
    });
    ms = Math.min(ms, t.queueSentAt + (t.ttlSec * 1000) / 3 - now);
    if (candidate) ms = Math.min(ms, candidate.sentAt + (candidate.ttlSec * 1000) / 3 - now);
    return t.waiter.sleep(Math.max(1, ms), signal);
  }

  /**
   * Leave the queue (idempotent, never throws: what we cannot delete expires by its TTL).
   * Without a ticket (the attempt's reply was lost) and for a generated owner, whatever
   * that owner left anywhere in the lock's live shards goes: its main cell (perhaps a
   * hold) and its queue entries, found by their names' owner part.
   */
  async cancel(req: Req, ticket: CassandraTicket | undefined): Promise<void> {
    if (ticket?.algorithm === 'fair') return this.#drop(req, ticket);
    if (!req.freshOwner) return;
    const { lockId, ownerId } = req;
    if (localQueues.removeOwner(this.#steps.key(lockId), ownerId)) localQueues.wakeFirst(this.#steps.key(lockId), 'left');
    const s = this.#rows.shardOf(await this.#t.counter(lockId));
    const shards = (s > 0n ? [s - 1n, s] : [s]).map((x) => this.#rows.stored(x));
    await Promise.all(
      shards.map(async (x) => {
        const entries = (await this.#t.queueCells(lockId, x, 1000)).filter((e) => entryOwner(e.entry) === ownerId);
        await Promise.all([this.#t.deleteMain(lockId, x, ownerId), ...entries.map((e) => this.#t.deleteQueue(lockId, x, e.entry))]);
      }),
    );
    this.released(lockId, ownerId);
  }

  /** A holder of this process deleted its main cell: the first local waiter may hold now. */
  released(lockId: string, ownerId: string): void {
    this.#steps.letGo(lockId, ownerId);
    localQueues.wakeFirst(waiterKey(this.#scope, lockId), 'released');
  }

  /** The backend closes (see {@link FairSteps.letGoAll}). */
  closed(): void {
    this.#steps.letGoAll();
  }

  /** `locksmith status` (see observe.ts). */
  inspect(lockId: string): Promise<LockState> {
    return this.#views.inspect(lockId);
  }

  /** One page of the locks that have a holder or a waiter (see observe.ts). */
  list(req: ListRequest): Promise<ListPage> {
    return this.#views.list(req);
  }

  /**
   * Break every hold of `lockId` (see observe.ts); a broken holder of this process no
   * longer counts as holding here. Local waiters are not woken: they find out by polling,
   * which reads the main row before rewriting their own cell.
   */
  async forceRelease(lockId: string): Promise<number> {
    const broken = await this.#views.forceRelease(lockId);
    for (const owner of broken) this.#steps.letGo(lockId, owner);
    return broken.length;
  }

  // ---------------------------------------------------------------- rounds

  /** Our entry goes, and our candidate cell; the next local waiter is told. */
  async #drop(req: Req, t: FairTicket): Promise<void> {
    const wasFirst = localQueues.isFirst(t.waiter);
    localQueues.remove(t.waiter);
    if (wasFirst) localQueues.wakeFirst(t.waiter.key, 'left');
    const cand = t.candidate;
    t.candidate = undefined;
    await Promise.allSettled([
      this.#t.deleteQueue(req.lockId, t.queueShard, t.entry),
      cand ? this.#t.deleteMain(req.lockId, cand.shard, req.ownerId) : undefined,
    ]);
  }

  /** Enqueue (step 2 of the fair algorithm) while reading the main row, then look. */
  async #firstRound(req: Req, t: FairTicket): Promise<Result> {
    const { lockId, signal } = req;
    const counter = await this.#t.counter(lockId, signal);
    const s = this.#rows.shardOf(counter);
    t.shard = s;
    localQueues.add(t.waiter);
    const [, cells] = await Promise.all([this.#steps.writeEntry(req, t, s), this.#rows.main(lockId, s, signal)]);
    // An empty main row: write our cell with the look (taken back unless we are first).
    const optimistic = cells.length === 0 ? this.#steps.writeCell(req, s, null, t.ttlSec) : undefined;
    const [ahead, sentAt] = await Promise.all([this.#rows.ahead(lockId, s, t.entry, signal), optimistic]);
    return this.#decide(req, t, counter, ahead, cells, sentAt);
  }

  /**
   * A waiter without a cell looks at the counter and its place in line, and at the main
   * row when it was near the front (only the first two may become candidates).
   */
  async #queuedRound(req: Req, t: FairTicket): Promise<Result> {
    const { lockId, signal } = req;
    const near = t.ahead <= 2;
    const [counter, aheadGuess, cellsGuess] = await Promise.all([
      this.#t.counter(lockId, signal),
      this.#rows.ahead(lockId, t.shard, t.entry, signal),
      near ? this.#rows.main(lockId, t.shard, signal) : undefined,
      this.#steps.refreshEntry(req, t),
    ]);
    observe(t, { counter });
    const s = this.#rows.shardOf(counter);
    let ahead = aheadGuess;
    let cells = cellsGuess;
    if (s !== t.shard) {
      // The shard moved since our last look: follow it (and move our entry if it fell behind).
      t.shard = s;
      cells = undefined;
      if (t.queueShard < s - 1n) await this.#steps.moveEntry(req, t, s);
      ahead = await this.#rows.ahead(lockId, s, t.entry, signal);
    }
    if (ahead.length > 1) {
      t.ahead = ahead.length;
      return waiting(t);
    }
    cells ??= await this.#rows.main(lockId, s, signal);
    return this.#decide(req, t, counter, ahead, cells, undefined);
  }

  /**
   * Entitled (first, or next behind a marked holder): become a candidate. Otherwise keep
   * waiting (and take back an optimistic cell). Across a shard boundary there is no
   * candidate state (rule 3): the first writes only into an empty main row.
   */
  async #decide(
    req: Req,
    t: FairTicket,
    counter: bigint,
    ahead: string[],
    cells: MainCell[],
    cellSentAt: number | undefined,
  ): Promise<Result> {
    t.ahead = ahead.length;
    observe(t, { counter, holder: cells.find((c) => c.fence !== undefined)?.owner });
    const head = ahead.length === 0;
    const first = ahead[0];
    const behindHolder = ahead.length === 1 && first !== undefined && t.holder === entryOwner(first);
    const s = this.#rows.shardOf(counter);
    const crossing = this.#rows.shardOf(counter + 1n) !== s;
    const entitled = crossing ? head && cells.every((c) => c.owner === req.ownerId) : head || behindHolder;
    if (!entitled) {
      if (cellSentAt !== undefined) await this.#t.deleteMain(req.lockId, s, req.ownerId, req.signal);
      return waiting(t);
    }
    const sentAt = cellSentAt ?? (await this.#steps.writeCell(req, s, null, t.ttlSec));
    if (crossing) return this.#steps.crossShard(req, t, counter, sentAt);
    const token = await this.#rows.takeToken(req.lockId, counter, req.signal);
    if (token === undefined) {
      await this.#t.deleteMain(req.lockId, s, req.ownerId, req.signal);
      return waiting(t);
    }
    t.candidate = { shard: s, token, sentAt, ttlSec: t.ttlSec, acquiredMs: 0n };
    return head ? this.#candidateRound(req, t, true) : waiting(t);
  }

  /**
   * A candidate looks at the main row: alone → it holds. With `markNow` (its first look,
   * or woken by a release) it marks its cell in parallel with the read, betting on being
   * alone, and takes the mark back when it lost the bet.
   */
  async #candidateRound(req: Req, t: FairTicket, markNow: boolean): Promise<Result> {
    const { lockId, ownerId, signal } = req;
    const cand = t.candidate;
    if (!cand) return this.#queuedRound(req, t);
    if (!surelyAlive(cand.sentAt, cand.ttlSec)) {
      // Our cell may have expired unseen: its token is no longer ours (rule 1).
      t.candidate = undefined;
      await this.#t.deleteMain(lockId, cand.shard, ownerId, signal);
      return this.#queuedRound(req, t);
    }
    const rewrite = markNow || performance.now() - cand.sentAt > (cand.ttlSec * 1000) / 3;
    const [cells, sentAt] = await Promise.all([
      this.#rows.main(lockId, cand.shard, signal),
      rewrite ? this.#steps.writeCell(req, cand.shard, markNow ? cand : null, cand.ttlSec) : undefined,
      this.#steps.refreshEntry(req, t),
    ]);
    if (sentAt !== undefined) cand.sentAt = sentAt;
    if (!cells.some((c) => c.owner === ownerId)) {
      t.candidate = undefined;
      return waiting(t);
    }
    const others = cells.filter((c) => c.owner !== ownerId);
    observe(t, { holder: others.find((c) => c.fence !== undefined)?.owner });
    if (others.length === 0) {
      if (!markNow) cand.sentAt = await this.#steps.writeCell(req, cand.shard, cand, cand.ttlSec);
      return this.#steps.grant(req, t, cand);
    }
    if (markNow) await this.#t.unmark(lockId, cand.shard, ownerId, signal);
    await this.#yieldIfBehind(req, t, cand, others);
    return waiting(t);
  }

  /**
   * Another candidate's cell beside ours: the one further back in the queue takes its cell
   * away, so two candidates never wait for each other. A cell whose owner is not ahead of
   * us in the queue is a racer behind us, or stale (it expires).
   */
  async #yieldIfBehind(req: Req, t: FairTicket, cand: Candidate, others: MainCell[]): Promise<void> {
    const unmarked = others.filter((c) => c.fence === undefined);
    if (unmarked.length === 0) return;
    const ahead = await this.#rows.ahead(req.lockId, cand.shard, t.entry, req.signal);
    t.ahead = ahead.length;
    const owners = new Set(ahead.map(entryOwner));
    if (!unmarked.some((c) => owners.has(c.owner))) return;
    t.candidate = undefined;
    await this.#t.deleteMain(req.lockId, cand.shard, req.ownerId, req.signal);
  }
}

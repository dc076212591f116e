/**
 * The SQL lease backend shared by PostgreSQL and MySQL/MariaDB: one lock row per lock id
 * (its fencing token and queue counter, never deleted), one row per hold with its expiry on
 * the database's clock, and an optional queue of waiters. Every operation is one short
 * transaction that locks the lock row first; nothing depends on a session, so any pool (or a
 * transaction-pooling proxy) works. See docs/backends/postgres.md and docs/backends/mysql.md.
 */
import {
  backendLog,
  BackendUnavailableError,
  exclusiveKind,
  failureCode,
  InvalidArgumentError,
  LockLostError,
  logRoundTrips,
  logWake,
  wakeClock,
  type Log,
  raceAbort,
  unavailable,
  type AcquireRequest,
  type AcquireResult,
  type Backend,
  type Capabilities,
  type Extension,
  type Grant,
  type LockState,
} from '../kit.js';
import type { ListPage, ListRequest } from '../../backend.js';
import { listPage, lockStateOf } from './observe.js';
import { decide, nextExpiryMs, US, view, type LockView } from './state.js';
import { big, micros, parseState, Statements, text } from './statements.js';
import type { HolderRow, LockRow, SqlEngine, SqlResult, SqlTicket, SqlTx, Stmt } from './types.js';
import { QueueKeepalive } from './keepalive.js';
import { sharedWakeups, Wakeups } from './wakeups.js';
import { Sweeper } from './sweep.js';

/** Options of a {@link SqlBackend}. */
export interface SqlBackendOptions {
  /** Longest sleep of a waiter between two attempts (the poll, or the fallback of NOTIFY). */
  readonly pollMs: number;
  /** Secrets never to show in an error message (the URL's password). */
  readonly secrets?: readonly string[];
  /**
   * The database and tables, as the server names them: backends of one process with the same
   * scope share their waiters' wake-ups (see wakeups.ts). Without it, only this backend's own
   * commits and the engine's notifications wake its waiters.
   */
  readonly scope?: string;
  /** How often to sweep expired rows of ids nobody uses any more (ms; 0: never). @default 60000 */
  readonly sweepMs?: number;
}

/** Without a queue position (a transient conflict), look again after this long. */
const UNQUEUED_RETRY_MS = 20;
/** For {@link SqlBackend.#oneTrip} callers that change nothing others wait for. */
const NEVER = (): boolean => false;
/** A transient conflict in release is retried this many times. */
const RELEASE_TRIES = 3;
/** Attempts of a transaction that met connections the server had dropped (see #transaction). */
const LOST_CONNECTION_TRIES = 5;

/** What every SQL backend can do. */
export function sqlCapabilities(notify: boolean): Capabilities {
  return Object.freeze({ fair: true, shared: true, permits: true, notify, lockDelay: true, reentrant: true, weightedPermits: true });
}

/** The shared SQL backend; an engine module supplies the driver half ({@link SqlEngine}). */
export class SqlBackend implements Backend<SqlTicket, undefined> {
  readonly name: string;
  readonly capabilities: Capabilities;
  readonly #engine: SqlEngine;
  readonly #st: Statements;
  readonly #wakeups: Wakeups;
  readonly #releaseWakeups: () => void;
  readonly #pollMs: number;
  readonly #waiterTtlMs: number;
  readonly #secrets: readonly string[];
  readonly #keepalive: QueueKeepalive;
  readonly #sweeper: Sweeper;
  readonly #log: Log;
  /** The ids under a prefix as their holders or queue change (only where the engine notifies; docs/backends/postgres.md, "Watching"). */
  readonly changes?: (req: { readonly prefix: string; readonly signal: AbortSignal }) => AsyncIterable<string | null>;
  #closed = false;

  constructor(engine: SqlEngine, options: SqlBackendOptions) {
    this.name = engine.name;
    this.#log = backendLog(engine.name);
    logRoundTrips(this, this.#log);
    this.#engine = engine;
    this.#st = new Statements(engine.tables, engine.nowSql, engine.binaryId);
    const shared = options.scope === undefined ? undefined : sharedWakeups(`${engine.name}:${options.scope}`);
    this.#wakeups = shared?.wakeups ?? new Wakeups();
    this.#releaseWakeups = shared?.release ?? (() => undefined);
    this.#pollMs = options.pollMs;
    // The keepalive refreshes a queued waiter's row every third of this; a waiter whose process stops is dropped after it.
    this.#waiterTtlMs = Math.max(5_000, 4 * options.pollMs);
    this.#secrets = options.secrets ?? [];
    const waiterTtlMs = this.#waiterTtlMs;
    this.#keepalive = new QueueKeepalive(
      (stmts) => engine.transaction((tx) => tx.run(stmts, true)),
      (lockId, seqs) => this.#st.refreshWaiters(lockId, seqs, waiterTtlMs),
      waiterTtlMs / 3,
    );
    this.capabilities = sqlCapabilities(engine.notifies);
    this.#sweeper = new Sweeper(
      {
        staleIds: async (limit) => {
          const [r] = await this.#transaction((tx) => tx.run([this.#st.staleIds(limit)], true), true);
          return (r?.rows ?? []).map((row) => text(row['lock_id']));
        },
        purge: (lockId) => this.#purgeStale(lockId),
      },
      options.sweepMs ?? 60_000,
    );
    const changes = engine.changes?.bind(engine);
    if (engine.notifies && changes) this.changes = (req) => changes(req.prefix, req.signal);
    engine.onChange((lockId, head) => (lockId === undefined ? this.#wakeups.wakeAll() : this.#wakeups.wake(lockId, head)));
  }

  async tryAcquire(req: AcquireRequest<SqlTicket>): Promise<AcquireResult<SqlTicket, undefined>> {
    const attempt = this.#attempt(req);
    try {
      return await raceAbort(attempt, req.signal);
    } catch (err) {
      if (req.signal.aborted) {
        this.#undoLate(req, attempt);
        throw err;
      }
      if (!this.#engine.isTransient(err)) throw this.#fail(`acquire of '${req.lockId}'`, err);
      // Another transaction held the lock row past the lock-wait bound: just another contended attempt.
      return { granted: false, contended: { ticket: req.wait ? req.ticket : undefined } };
    }
  }

  /**
   * An attempt the caller gave up on still runs: it may be waiting for a pooled connection,
   * or its COMMIT may be in flight. What it commits after the abort is nobody's, so it is
   * given back here (the hold, or the one level of re-entry it added, by its token and owner;
   * a queue entry it made), whatever the owner: the core's own clean-up may have run before
   * it (docs/backends/postgres.md, "Failure modes").
   */
  #undoLate(req: AcquireRequest<SqlTicket>, attempt: Promise<AcquireResult<SqlTicket, undefined>>): void {
    attempt
      .then(async (r) => {
        if (this.#closed) return;
        if (r.granted) await this.release(r.grant);
        else if (r.contended.ticket && r.contended.ticket !== req.ticket) await this.cancel(req, r.contended.ticket);
        if (this.#log.enabled)
          this.#log('%s: undid an attempt that landed after its abort (%s)', req.lockId, r.granted ? 'granted' : 'queued');
      })
      .catch(() => undefined);
  }

  /** One attempt in two round trips: lock row and state; then the writes with the COMMIT. */
  async #attempt(req: AcquireRequest<SqlTicket>): Promise<AcquireResult<SqlTicket, undefined>> {
    const { lockId } = req;
    const lockStmts = this.#engine.lockRow(lockId);
    const step = await this.#transaction(async (tx) => {
      const first = await tx.run([...lockStmts, this.#st.state(lockId)]);
      const row = this.#engine.parseLockRow(first.slice(0, lockStmts.length));
      const raw = parseState(first[lockStmts.length]);
      const v = view(row.nowUs, raw.holders, raw.queue);
      const writes = this.#st.purge(lockId, row.nowUs, v.staleHolders, v.staleWaiters);
      const s = this.#decide(req, row, v, writes);
      if (s.changed) writes.push(...this.#engine.announce(lockId));
      if (writes.length > 0) writes.push(...(this.#engine.touched?.(lockId) ?? []));
      await tx.run(writes, true);
      return s;
    });
    if (step.changed) this.#wakeups.wake(lockId, step.head);
    return step.value;
  }

  /** Decide the attempt and queue its writes. */
  #decide(req: AcquireRequest<SqlTicket>, row: LockRow, v: LockView, writes: Stmt[]): Step<AcquireResult<SqlTicket, undefined>> {
    let changed = v.staleHolders || v.staleWaiters;
    const seq = req.ticket?.seq;
    const d = decide(v, req, seq);
    if (d.type !== 'contended') {
      if (seq !== undefined) this.#keepalive.delete(req.lockId, seq);
      const head = v.queue.find((w) => w.seq !== seq)?.seq;
      // Leaving the queue may let the next waiters in (readers, permits).
      if (seq !== undefined && v.queue.some((w) => w.seq === seq)) {
        writes.push(this.#st.deleteWaiter(req.lockId, seq));
        changed = true;
      }
      const expiresUs = row.nowUs + req.ttlMs * US;
      let token: bigint;
      if (d.type === 'reenter') {
        token = d.holder.token;
        writes.push(this.#st.reenter(req.lockId, token, expiresUs));
      } else {
        token = row.token + 1n;
        const holder = holderOf(req, token, row.nowUs, expiresUs);
        writes.push(this.#st.setCounters(req.lockId, token, row.seq), this.#st.insertHolder(req.lockId, holder));
      }
      // The lease ends at db-now + ttl, and db-now is after the core sent the request: ttlMs holds.
      const grant: Grant<undefined> = {
        lockId: req.lockId,
        kind: req.kind,
        ownerId: req.ownerId,
        token,
        ttlMs: req.ttlMs,
        reentered: d.type === 'reenter',
        data: undefined,
      };
      return { value: { granted: true, grant }, changed, head };
    }
    const head = v.queue[0]?.seq ?? (req.wait ? row.seq + 1n : undefined);
    if (!req.wait) return { value: { granted: false, contended: { ticket: undefined } }, changed, head };
    return { value: { granted: false, contended: { ticket: this.#queue(row, v, req, d.mine?.seq, writes) } }, changed, head };
  }

  /** Keep (or take) a place in the queue, its expiry pushed forward by this attempt. */
  #queue(row: LockRow, v: LockView, req: AcquireRequest<SqlTicket>, mine: bigint | undefined, writes: Stmt[]): SqlTicket {
    const expiresUs = row.nowUs + this.#waiterTtlMs * US;
    let seq = mine;
    if (seq !== undefined) writes.push(this.#st.refreshWaiter(req.lockId, seq, expiresUs));
    else {
      seq = row.seq + 1n;
      writes.push(
        this.#st.setCounters(req.lockId, row.token, seq),
        this.#st.insertWaiter(req.lockId, {
          seq,
          ownerId: req.ownerId,
          kind: req.kind,
          permits: req.permits,
          weight: req.weight ?? 1,
          expiresUs,
          identity: req.identity,
          sinceUs: row.nowUs,
          fair: req.fair,
        }),
      );
    }
    const old = req.ticket?.seq;
    if (old !== undefined && old !== seq) this.#keepalive.delete(req.lockId, old);
    this.#keepalive.add(req.lockId, seq);
    const at = v.queue.findIndex((w) => w.seq === seq);
    const exclusive = exclusiveKind(req.kind);
    return { seq, retryMs: nextExpiryMs(v), ahead: at >= 0 ? at : v.queue.length, exclusive };
  }

  /**
   * Sleep until a change names this waiter first, or its poll comes. A mutex or writer behind
   * others cannot be granted before it is first, so its poll asks only for its position (one
   * indexed read, no lock row) and attempts once nobody live is ahead: a thousand waiters
   * then cost the lock row nothing while they wait (docs/backends/postgres.md, "Waiting").
   */
  async waitForChange(lockId: string, ticket: SqlTicket | undefined, signal: AbortSignal): Promise<void> {
    const since = wakeClock(this.#log);
    if (!ticket) {
      const woken = await this.#wakeups.wait(lockId, undefined, UNQUEUED_RETRY_MS, signal);
      logWake(this.#log, lockId, woken ? 'notification' : 'poll', since);
      return;
    }
    for (let ahead = ticket.ahead; ;) {
      const woken = await this.#wakeups.wait(lockId, ticket.seq, this.#pollFor(ticket, ahead), signal);
      if (woken || !ticket.exclusive || ahead === 0) return logWake(this.#log, lockId, woken ? 'notification' : 'poll', since);
      const p = await this.#position(lockId, ticket.seq);
      if (p === undefined || p.ahead === 0 || !p.live) return logWake(this.#log, lockId, 'poll', since);
      ahead = p.ahead;
    }
  }

  /** The poll of a waiter `ahead` places back: further back, less often (the first is woken by the changes that matter). */
  #pollFor(ticket: SqlTicket, ahead: number): number {
    const base = Math.min(this.#pollMs, ticket.retryMs);
    // The keepalive refreshes the queue row, so the cap is the next expiry the attempt saw.
    return Math.min(base * (1 + ahead), Math.max(base, Math.min(ticket.retryMs, this.#waiterTtlMs)));
  }

  /** How many live waiters are ahead of `seq`, and whether its row is live; undefined when the read failed (then attempt). */
  async #position(lockId: string, seq: bigint): Promise<{ ahead: number; live: boolean } | undefined> {
    try {
      const [r] = await this.#transaction((tx) => tx.run([this.#st.position(lockId, seq)], true), true);
      const row = r?.rows[0];
      return { ahead: Number(row?.['ahead'] ?? 0), live: Number(row?.['mine'] ?? 0) > 0 };
    } catch {
      return undefined;
    }
  }

  async cancel(req: AcquireRequest<SqlTicket>, ticket: SqlTicket | undefined): Promise<void> {
    if (ticket) this.#keepalive.delete(req.lockId, ticket.seq);
    const stmts = [
      ...(ticket ? [this.#st.deleteWaiter(req.lockId, ticket.seq)] : []),
      ...(req.freshOwner ? this.#st.deleteOwner(req.lockId, req.ownerId) : []),
    ];
    if (stmts.length === 0) return;
    try {
      const removed = (rs: readonly SqlResult[]): boolean => rs.some((r) => r.affected > 0);
      await this.#oneTrip(req.lockId, stmts, removed, removed);
    } catch (err) {
      throw this.#fail(`cancel on '${req.lockId}'`, err);
    }
  }

  async extend(grant: Grant<undefined>, ttlMs: number): Promise<Extension> {
    let held: boolean;
    try {
      // A renewal sets the expiry again from the database's now: sent twice, it vouches for no
      // less (the lease counts from the first send), so a dropped pooled connection is retried.
      held = await this.#retryLost(() =>
        this.#oneTrip(
          grant.lockId,
          [this.#st.extend(grant.lockId, grant.token, grant.ownerId, ttlMs)],
          NEVER,
          (rs) => (rs[0]?.affected ?? 0) > 0,
        ),
      );
    } catch (err) {
      throw this.#fail(`extend of '${grant.lockId}'`, err);
    }
    if (!held) throw new LockLostError(grant.lockId, 'not-held', { context: { backend: this.name } });
    return { ttlMs };
  }

  async release(grant: Grant<undefined>): Promise<boolean> {
    const stmts = this.#st.release(grant.lockId, grant.token, grant.ownerId);
    const released = (rs: readonly SqlResult[]): boolean => (rs[0]?.affected ?? 0) > 0;
    for (let i = 1; ; i += 1) {
      try {
        return await this.#oneTrip(grant.lockId, stmts, released, released);
      } catch (err) {
        if (i >= RELEASE_TRIES || !this.#engine.isTransient(err)) throw this.#fail(`release of '${grant.lockId}'`, err);
      }
    }
  }

  /** Delete the expired rows of `lockId` under its lock row; wake its waiters if a waiter row went. */
  async #purgeStale(lockId: string): Promise<void> {
    const removed = (rs: readonly SqlResult[]): boolean => rs.some((r) => r.affected > 0);
    await this.#oneTrip(lockId, this.#st.purgeStale(lockId), removed, () => undefined);
  }

  /** Sweep expired rows of ids nobody uses any more now (see sweep.ts); resolves with the ids purged. */
  sweep(): Promise<number> {
    return this.#sweeper.sweep();
  }

  /**
   * Lock row, `stmts`, the announcement and the COMMIT in one round trip. `changed` tells
   * from the results of `stmts` whether local waiters should be woken; `value` what to return.
   */
  async #oneTrip<T>(
    lockId: string,
    stmts: readonly Stmt[],
    changed: (rs: readonly SqlResult[]) => boolean,
    value: (rs: readonly SqlResult[]) => T,
  ): Promise<T> {
    const lockStmts = this.#engine.lockRow(lockId);
    const tail =
      changed === NEVER ? [] : [this.#st.head(lockId), ...this.#engine.announce(lockId), ...(this.#engine.touched?.(lockId) ?? [])];
    const rs = await this.#engine.transaction((tx) => tx.run([...lockStmts, ...stmts, ...tail], true));
    const mine = rs.slice(lockStmts.length, lockStmts.length + stmts.length);
    if (changed(mine)) {
      const head = rs[lockStmts.length + stmts.length]?.rows[0]?.['seq'];
      this.#wakeups.wake(lockId, head === undefined ? undefined : big(head));
    }
    return value(mine);
  }

  async inspect(lockId: string): Promise<LockState> {
    try {
      const [now, state, last] = await this.#transaction(
        (tx) => tx.run([this.#st.now(), this.#st.state(lockId, true), this.#st.lastToken(lockId)], true),
        true,
      );
      const lastRow = last?.rows[0];
      return lockStateOf(lockId, micros(now?.rows[0]?.['now_us']), parseState(state), lastRow === undefined ? 0n : big(lastRow['token']));
    } catch (err) {
      throw this.#fail(`inspect of '${lockId}'`, err);
    }
  }

  /** One page of the locks with a live hold or waiter: keyset paging in byte order (observe.ts). */
  async list(req: ListRequest): Promise<ListPage> {
    const run = (stmts: readonly Stmt[]): Promise<SqlResult[]> => this.#transaction((tx) => tx.run(stmts, true), true);
    try {
      return await raceAbort(listPage(run, this.#st, req), req.signal);
    } catch (err) {
      if (req.signal.aborted || err instanceof InvalidArgumentError) throw err;
      throw this.#fail(`list of '${req.prefix}*'`, err);
    }
  }

  /**
   * End every hold of `lockId` and bump its token, in one transaction under its lock row;
   * the first waiter is woken at once (NOTIFY, or this process's wake-ups). Resolves the live holds ended.
   */
  async forceRelease(lockId: string): Promise<number> {
    const ended = (rs: readonly SqlResult[]): number => rs[1]?.affected ?? 0;
    try {
      return await this.#oneTrip(lockId, this.#st.forceRelease(lockId), (rs) => rs.some((r, i) => i > 0 && r.affected > 0), ended);
    } catch (err) {
      throw this.#fail(`forceRelease of '${lockId}'`, err);
    }
  }

  /**
   * A transaction, run again on another connection when its first round trip failed because
   * the connection was already gone: a pooled connection the server dropped (a restart, a
   * kill) whose goodbye the driver had not read yet when the pool handed it out. Only when
   * nothing can have been committed: the first round trip carried no COMMIT, or the work only
   * reads (`readOnly`). A lost COMMIT may have happened, and is never repeated.
   */
  /** `call` (idempotent) again on a fresh connection when the server dropped the one it got. */
  async #retryLost<T>(call: () => Promise<T>): Promise<T> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await call();
      } catch (err) {
        if (attempt >= LOST_CONNECTION_TRIES || this.#closed || !this.#engine.isConnectionLost(err)) throw err;
        if (this.#log.enabled) this.#log('connection dropped by the server (%s): once more on a fresh one', failureCode(err));
      }
      await new Promise<void>((resolve) => setImmediate(resolve));
    }
  }

  async #transaction<T>(work: (tx: SqlTx) => Promise<T>, readOnly = false): Promise<T> {
    for (let attempt = 1; ; attempt++) {
      let trips = 0;
      let firstFailed = false;
      let firstCommits = false;
      const counted = (tx: SqlTx): SqlTx => ({
        run: (stmts, commit) => {
          trips += 1;
          if (trips === 1) firstCommits = commit === true;
          const sent = tx.run(stmts, commit);
          if (trips === 1) sent.catch(() => (firstFailed = true));
          return sent;
        },
      });
      try {
        return await this.#engine.transaction((tx) => work(counted(tx)));
      } catch (err) {
        const safe = trips === 1 && firstFailed && (readOnly || !firstCommits);
        if (!safe || attempt >= LOST_CONNECTION_TRIES || this.#closed || !this.#engine.isConnectionLost(err)) throw err;
        if (this.#log.enabled) this.#log('connection dropped by the server (%s): once more on a fresh one', failureCode(err));
      }
      // The pool's other dropped connections have their goodbye waiting in this same poll
      // phase: let the driver read it (and the pool evict them) before taking another one.
      await new Promise<void>((resolve) => setImmediate(resolve));
    }
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.#keepalive.close();
    this.#sweeper.close();
    // Shared with other backends, whose waiters then look once more: harmless.
    this.#wakeups.wakeAll();
    this.#releaseWakeups();
    await this.#engine.close();
  }

  #fail(what: string, err: unknown): Error {
    if (this.#engine.isMissingTable(err)) return missingTable(this.name, this.#engine.tables.locks, err);
    if (this.#engine.isMissingColumn(err)) return missingColumns(this.name, this.#engine.tables.holders, err);
    return unavailable(this.name, what, err, { secrets: this.#secrets });
  }
}

/** What one transaction produced, whether others should hear of it, and who waits first now. */
interface Step<T> {
  readonly value: T;
  readonly changed: boolean;
  readonly head: bigint | undefined;
}

function holderOf(req: AcquireRequest<SqlTicket>, token: bigint, nowUs: number, expiresUs: number): HolderRow {
  const { ownerId, kind, lockDelayMs, identity } = req;
  const permits = kind === 'semaphore' ? req.permits : 0;
  return { token, ownerId, kind, count: 1, permits, weight: req.weight ?? 1, expiresUs, lockDelayMs, identity, acquiredUs: nowUs };
}

/** The typed error for lock tables of an older version (without columns this version added), never migrated. */
export function missingColumns(engine: string, table: string, cause: unknown): BackendUnavailableError {
  return new BackendUnavailableError(
    engine,
    `${engine}: the lock tables ('${table}', …) lack columns of this version (identities, semaphore sizes): run migrate() from ` +
      `'locksmith-dlm/${engine}' or add ?migrate=true to the URL (it adds them in place), see docs/backends/${engine}.md`,
    { cause, context: { table, causeCode: 'MISSING_COLUMN' } },
  );
}

/** The typed error for lock tables that were never created. */
export function missingTable(engine: string, table: string, cause: unknown): BackendUnavailableError {
  return new BackendUnavailableError(
    engine,
    `${engine}: the lock table '${table}' does not exist: run migrate() from 'locksmith-dlm/${engine}', ` +
      `add ?migrate=true to the URL, or apply the DDL of docs/backends/${engine}.md`,
    { cause, context: { table, causeCode: 'MISSING_TABLE' } },
  );
}

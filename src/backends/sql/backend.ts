/**
 * The SQL lease backend shared by PostgreSQL and MySQL/MariaDB: one lock row per lock id
 * (its fencing token and queue counter, never deleted), one row per hold with its expiry on
 * the database's clock, and an optional queue of waiters. Every operation is one short
 * transaction that locks the lock row first; nothing depends on a session, so any pool (or a
 * transaction-pooling proxy) works. See docs/backends/postgres.md and docs/backends/mysql.md.
 */
import {
  BackendUnavailableError,
  LockLostError,
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
import { decide, nextExpiryMs, US, view, type LockView } from './state.js';
import { Statements } from './statements.js';
import type { HolderRow, LockRow, SqlEngine, SqlQuery, SqlTicket } from './types.js';
import { Wakeups } from './wakeups.js';

/** Options of a {@link SqlBackend}. */
export interface SqlBackendOptions {
  /** Longest sleep of a waiter between two attempts (the poll, or the fallback of NOTIFY). */
  readonly pollMs: number;
  /** Secrets never to show in an error message (the URL's password). */
  readonly secrets?: readonly string[];
}

/** Without a queue position (a transient conflict), look again after this long. */
const UNQUEUED_RETRY_MS = 20;
/** A transient conflict in release is retried this many times. */
const RELEASE_TRIES = 3;

/** What every SQL backend can do. */
export function sqlCapabilities(notify: boolean): Capabilities {
  return Object.freeze({ fair: true, shared: true, permits: true, notify, lockDelay: true, reentrant: true });
}

/** The shared SQL backend; an engine module supplies the driver half ({@link SqlEngine}). */
export class SqlBackend implements Backend<SqlTicket, undefined> {
  readonly name: string;
  readonly capabilities: Capabilities;
  readonly #engine: SqlEngine;
  readonly #st: Statements;
  readonly #wakeups = new Wakeups();
  readonly #pollMs: number;
  readonly #waiterTtlMs: number;
  readonly #secrets: readonly string[];
  #closed = false;

  constructor(engine: SqlEngine, options: SqlBackendOptions) {
    this.name = engine.name;
    this.#engine = engine;
    this.#st = new Statements(engine.tables);
    this.#pollMs = options.pollMs;
    // A waiter re-attempts at least every pollMs (+25 % jitter); one that stops is dropped after this.
    this.#waiterTtlMs = Math.max(5_000, 4 * options.pollMs);
    this.#secrets = options.secrets ?? [];
    this.capabilities = sqlCapabilities(engine.notifies);
    engine.onChange((lockId) => (lockId === undefined ? this.#wakeups.wakeAll() : this.#wakeups.wake(lockId)));
  }

  async tryAcquire(req: AcquireRequest<SqlTicket>): Promise<AcquireResult<SqlTicket, undefined>> {
    try {
      const generation = this.#wakeups.generation(req.lockId);
      return await raceAbort(
        this.#run(req.lockId, (q, row) => this.#attempt(q, row, req, generation)),
        req.signal,
      );
    } catch (err) {
      if (req.signal.aborted) throw err;
      if (!this.#engine.isTransient(err)) throw this.#fail(`acquire of '${req.lockId}'`, err);
      // Another transaction held the lock row past the lock-wait bound: just another contended attempt.
      return { granted: false, contended: { ticket: req.wait ? req.ticket : undefined } };
    }
  }

  async #attempt(
    q: SqlQuery,
    row: LockRow,
    req: AcquireRequest<SqlTicket>,
    generation: number,
  ): Promise<Step<AcquireResult<SqlTicket, undefined>>> {
    const raw = await this.#st.state(q, req.lockId);
    const v = view(row.nowUs, raw.holders, raw.queue);
    await this.#st.purge(q, req.lockId, row.nowUs, v.staleHolders, v.staleWaiters);
    let changed = v.staleHolders || v.staleWaiters;
    const seq = req.ticket?.seq;
    const d = decide(v, req, seq);
    if (d.type !== 'contended') {
      // Leaving the queue may let the next waiters in (readers, permits).
      if (seq !== undefined && (await this.#st.deleteWaiter(q, req.lockId, seq)) > 0) changed = true;
      const expiresUs = row.nowUs + req.ttlMs * US;
      let token: bigint;
      if (d.type === 'reenter') {
        token = d.holder.token;
        await this.#st.reenter(q, req.lockId, token, expiresUs);
      } else {
        token = row.token + 1n;
        await this.#st.setCounters(q, req.lockId, token, row.seq);
        await this.#st.insertHolder(q, req.lockId, holderOf(req, token, expiresUs));
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
      return { value: { granted: true, grant }, changed };
    }
    if (!req.wait) return { value: { granted: false, contended: { ticket: undefined } }, changed };
    return { value: { granted: false, contended: { ticket: await this.#queue(q, row, v, req, d.mine?.seq, generation) } }, changed };
  }

  /** Keep (or take) a place in the queue, its expiry pushed forward by this attempt. */
  async #queue(
    q: SqlQuery,
    row: LockRow,
    v: LockView,
    req: AcquireRequest<SqlTicket>,
    mine: bigint | undefined,
    generation: number,
  ): Promise<SqlTicket> {
    const expiresUs = row.nowUs + this.#waiterTtlMs * US;
    let seq = mine;
    if (seq !== undefined) await this.#st.refreshWaiter(q, req.lockId, seq, expiresUs);
    else {
      seq = row.seq + 1n;
      await this.#st.setCounters(q, req.lockId, row.token, seq);
      await this.#st.insertWaiter(q, req.lockId, { seq, ownerId: req.ownerId, kind: req.kind, permits: req.permits, expiresUs });
    }
    return { seq, retryMs: nextExpiryMs(v), generation };
  }

  async waitForChange(lockId: string, ticket: SqlTicket | undefined, signal: AbortSignal): Promise<void> {
    if (!ticket) return this.#wakeups.wait(lockId, undefined, this.#wakeups.generation(lockId), UNQUEUED_RETRY_MS, signal);
    const ms = Math.min(this.#pollMs, ticket.retryMs);
    // Never so long that the queue row (refreshed by each attempt) could expire meanwhile.
    await this.#wakeups.wait(lockId, ticket.seq, ticket.generation, ms, signal, Math.min(ticket.retryMs, this.#waiterTtlMs / 3));
  }

  async cancel(req: AcquireRequest<SqlTicket>, ticket: SqlTicket | undefined): Promise<void> {
    try {
      await this.#run(req.lockId, async (q) => {
        let removed = ticket ? await this.#st.deleteWaiter(q, req.lockId, ticket.seq) : 0;
        if (req.freshOwner) removed += await this.#st.deleteOwner(q, req.lockId, req.ownerId);
        return { value: undefined, changed: removed > 0 };
      });
    } catch (err) {
      throw this.#fail(`cancel on '${req.lockId}'`, err);
    }
  }

  async extend(grant: Grant<undefined>, ttlMs: number): Promise<Extension> {
    let held: boolean;
    try {
      held = await this.#run(grant.lockId, async (q, row) => ({
        value: await this.#st.extend(q, grant.lockId, grant.token, grant.ownerId, row.nowUs, row.nowUs + ttlMs * US),
        changed: false,
      }));
    } catch (err) {
      throw this.#fail(`extend of '${grant.lockId}'`, err);
    }
    if (!held) throw new LockLostError(grant.lockId, 'not-held', { context: { backend: this.name } });
    return { ttlMs };
  }

  async release(grant: Grant<undefined>): Promise<boolean> {
    for (let i = 1; ; i += 1) {
      try {
        return await this.#run(grant.lockId, async (q, row) => {
          const released = await this.#st.release(q, grant.lockId, grant.token, grant.ownerId, row.nowUs);
          return { value: released, changed: released };
        });
      } catch (err) {
        if (i >= RELEASE_TRIES || !this.#engine.isTransient(err)) throw this.#fail(`release of '${grant.lockId}'`, err);
      }
    }
  }

  async inspect(lockId: string): Promise<LockState> {
    try {
      return await this.#engine.transaction(async (q) => {
        const nowUs = await this.#engine.nowUs(q);
        const raw = await this.#st.state(q, lockId);
        const v = view(nowUs, raw.holders, raw.queue);
        const last = await this.#st.lastToken(q, lockId);
        const holders = v.holders
          .filter((h) => h.expiresUs > nowUs)
          .map((h) => ({
            ownerId: h.ownerId,
            kind: h.kind,
            token: h.token,
            count: h.count,
            expiresInMs: Math.round((h.expiresUs - nowUs) / US),
          }));
        return { lockId, holders, waiters: v.queue.length, ...(last !== undefined && last > 0n ? { lastToken: last } : {}) };
      });
    } catch (err) {
      throw this.#fail(`inspect of '${lockId}'`, err);
    }
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.#wakeups.wakeAll();
    await this.#engine.close();
  }

  /** One transaction on `lockId`'s row; a change is announced on commit and woken here at once. */
  async #run<T>(lockId: string, work: (q: SqlQuery, row: LockRow) => Promise<Step<T>>): Promise<T> {
    const step = await this.#engine.transaction(async (q) => {
      const row = await this.#engine.lockRow(q, lockId);
      const s = await work(q, row);
      if (s.changed) await this.#engine.announce(q, lockId);
      return s;
    });
    if (step.changed) this.#wakeups.wake(lockId);
    return step.value;
  }

  #fail(what: string, err: unknown): Error {
    if (this.#engine.isMissingTable(err)) return missingTable(this.name, this.#engine.tables.locks, err);
    return unavailable(this.name, what, err, { secrets: this.#secrets });
  }
}

/** What one transaction produced, and whether others should hear of it. */
interface Step<T> {
  readonly value: T;
  readonly changed: boolean;
}

function holderOf(req: AcquireRequest<SqlTicket>, token: bigint, expiresUs: number): HolderRow {
  return { token, ownerId: req.ownerId, kind: req.kind, count: 1, expiresUs, lockDelayMs: req.lockDelayMs };
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

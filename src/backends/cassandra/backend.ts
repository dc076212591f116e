/**
 * The Cassandra backend: one session (session.ts), the time service (time-service.ts) and
 * the fair lock (fair.ts), to which acquisition, waiting and inspection are dispatched;
 * extend and release rewrite or delete our own cells here. See docs/backends/cassandra.md.
 */
import { performance } from 'node:perf_hooks';
import {
  backendLog,
  InvalidArgumentError,
  LockLostError,
  logRoundTrips,
  logWake,
  unavailable,
  wakeClock,
  withDeadline,
  type AcquireRequest,
  type AcquireResult,
  type Backend,
  type Capabilities,
  type ConnectOptions,
  type Extension,
  type Grant,
  type LockState,
} from '../kit.js';
import type { ListPage, ListRequest } from '../../backend.js';
import { parseCassandraUrl, scopeOf, type CassandraSettings } from './config.js';
import { FairLock } from './fair.js';
import { ensureSchema } from './schema.js';
import { Session, type StatementCounts } from './session.js';
import { cellTtlSeconds, heldTtlSeconds, LockTables, surelyAlive } from './tables.js';
import { ownTimeService, sharedTimeService, type MicroClock, type TimeService, type TimeServiceLease } from './time-service.js';
import type { CassandraGrantData, CassandraTicket } from './types.js';

/** Options beyond the URL (for tests, benchmarks and embedding). */
export interface CassandraBackendOptions extends ConnectOptions {
  /** The wall clock that feeds the time service, in µs. Tests inject a skewed one. */
  readonly clock?: MicroClock;
  /**
   * Wake waiters of this process at once when a holder of this process releases (default
   * true). With false the backend behaves as a process of its own, woken only by polls:
   * the benchmark measures the cross-process hand-off with it.
   */
  readonly localWakeups?: boolean;
}

/** Default bound of the first connection (the URL's `connectTimeoutMs` comes from the locker). */
const log = backendLog('cassandra');
const DEFAULT_CONNECT_TIMEOUT_MS = 10_000;
/** Numbers the scopes of backends that must not share wake-ups with anyone. */
let isolated = 0;

/** The Cassandra backend. */
export class CassandraBackend implements Backend<CassandraTicket, CassandraGrantData> {
  readonly name = 'cassandra';
  readonly capabilities: Capabilities;
  /** What the URL said (hosts, keyspace, consistency, tuning). */
  readonly settings: CassandraSettings;
  readonly #session: Session;
  readonly #tables: LockTables;
  readonly #time: TimeServiceLease;
  readonly #algorithm: FairLock;
  #closing: Promise<void> | undefined;

  private constructor(settings: CassandraSettings, session: Session, options: CassandraBackendOptions) {
    this.settings = settings;
    this.#session = session;
    this.#tables = new LockTables(session);
    logRoundTrips(this, log);
    this.capabilities = Object.freeze({
      fair: true,
      shared: false,
      permits: false,
      notify: false,
      lockDelay: true,
      reentrant: false,
    });
    const tables = this.#tables;
    const cell = { push: (micros: bigint) => tables.pushTime(micros), read: () => tables.readTime() };
    const scope = options.localWakeups === false ? `isolated-${++isolated}` : scopeOf(settings);
    this.#time = options.clock
      ? ownTimeService(cell, options.clock, settings.timeRefreshMs)
      : sharedTimeService(scope, settings.timeRefreshMs, cell);
    this.#algorithm = new FairLock(tables, this.#time.service, settings, scope);
  }

  /**
   * Connect, create the schema if asked and start the time service, all within
   * `connectTimeoutMs`; stop (and release what was opened) when `options.signal` aborts.
   */
  static async connect(url: URL, options: CassandraBackendOptions = {}): Promise<CassandraBackend> {
    const settings = parseCassandraUrl(url);
    const timeoutMs = options.connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS;
    const deadline = performance.now() + timeoutMs;
    const { signal } = options;
    const session = await Session.open(settings, timeoutMs, signal);
    const backend = new CassandraBackend(settings, session, options);
    try {
      await withDeadline(backend.#setup(signal), {
        timeoutMs: Math.max(1, deadline - performance.now()),
        ...(signal ? { signal } : {}),
        onTimeout: () => new Error(`schema and time service not ready within ${timeoutMs} ms`),
      });
    } catch (err) {
      await backend.close();
      if (signal?.aborted && err === signal.reason) throw err;
      throw unavailable('cassandra', 'schema/time service setup', err);
    }
    return backend;
  }

  async #setup(signal: AbortSignal | undefined): Promise<void> {
    if (this.settings.create) await ensureSchema(this.#session, this.settings, signal);
    await this.#time.start();
  }

  /** The time service of this backend (the skew test reads it). */
  get timeService(): TimeService {
    return this.#time.service;
  }

  /** Statements sent so far by kind: the database cost of what this backend did. */
  get statements(): StatementCounts {
    return this.#session.counts;
  }

  async tryAcquire(req: AcquireRequest<CassandraTicket>): Promise<AcquireResult<CassandraTicket, CassandraGrantData>> {
    if (req.kind !== 'mutex') throw new InvalidArgumentError('kind', `the cassandra backend only has mutexes, not '${req.kind}'`);
    try {
      return await this.#algorithm.acquire(req);
    } catch (err) {
      if (req.signal.aborted) throw req.signal.reason;
      throw unavailable(this.name, 'acquire', err);
    }
  }

  async waitForChange(lockId: string, ticket: CassandraTicket | undefined, signal: AbortSignal): Promise<void> {
    const since = wakeClock(log);
    logWake(log, lockId, (await this.#algorithm.wait(ticket, signal)) ? 'notification' : 'poll', since);
  }

  async cancel(req: AcquireRequest<CassandraTicket>, ticket: CassandraTicket | undefined): Promise<void> {
    // Idempotent and never throws: whatever cannot be deleted expires by its TTL.
    await this.#algorithm.cancel(req, ticket).catch(() => undefined);
  }

  /**
   * Rewrite our cells with a fresh TTL. While the main cell surely still exists (its last
   * write was sent less than its TTL − 1 s ago) the check read runs beside the writes: only
   * a break can have removed the cell, and its tombstones, dated ahead, shadow these writes
   * (docs/backends/cassandra.md, "Breaking a lock"). After that, check first: if the cell
   * expired, someone else may hold now, and rewriting would resurrect us beside them.
   * Another owner's cell beside ours is a waiter's, not a loss.
   */
  async extend(grant: Grant<CassandraGrantData>, ttlMs: number): Promise<Extension> {
    const d = grant.data;
    const { lockId, ownerId, token } = grant;
    const sentAt = performance.now();
    const ttlSec = cellTtlSeconds(ttlMs);
    const lost = (): LockLostError => new LockLostError(lockId, 'not-held', { context: { backend: this.name } });
    const write = (): Promise<unknown> =>
      Promise.all([
        this.#tables.writeCell(
          lockId,
          d.shard,
          ownerId,
          { identity: d.identity, mark: { fence: token, acquiredMs: d.acquiredMs, leaseMs: ttlMs } },
          heldTtlSeconds(ttlSec, d.lockDelayMs),
        ),
        this.#tables.writeEntry(lockId, d.queueShard, d.entry, d.identity, ttlSec, this.#time.service.now() + BigInt(ttlSec) * 1_000_000n),
      ]);
    try {
      if (surelyAlive(d.sentAt, d.ttlSec)) {
        const [held] = await Promise.all([this.#tables.hasMainCell(lockId, d.shard, ownerId), write()]);
        if (!held) throw lost();
      } else {
        if (!(await this.#tables.hasMainCell(lockId, d.shard, ownerId))) throw lost();
        await write();
      }
      d.sentAt = sentAt;
      d.ttlSec = ttlSec;
      return { ttlMs };
    } catch (err) {
      throw unavailable(this.name, 'extend', err);
    }
  }

  /**
   * Delete our cells (named by us alone, so never a later holder's) and wake the next local
   * waiter as soon as the main cell is gone. Resolves whether the main cell was still ours.
   */
  async release(grant: Grant<CassandraGrantData>): Promise<boolean> {
    const d = grant.data;
    const { lockId, ownerId } = grant;
    try {
      const held = surelyAlive(d.sentAt, d.ttlSec) || (await this.#tables.hasMainCell(lockId, d.shard, ownerId));
      await Promise.all([
        this.#tables.deleteMain(lockId, d.shard, ownerId).then(() => this.#algorithm.released(lockId, ownerId)),
        this.#tables.deleteQueue(lockId, d.queueShard, d.entry),
      ]);
      return held;
    } catch (err) {
      throw unavailable(this.name, 'release', err);
    }
  }

  async inspect(lockId: string): Promise<LockState> {
    try {
      return await this.#algorithm.inspect(lockId);
    } catch (err) {
      throw unavailable(this.name, 'inspect', err);
    }
  }

  /** One page of the locks that have a holder or a waiter, read from the index (docs/backends/cassandra.md, "Listing"). */
  async list(req: ListRequest): Promise<ListPage> {
    try {
      return await this.#algorithm.list(req);
    } catch (err) {
      if (err instanceof InvalidArgumentError) throw err;
      if (req.signal.aborted) throw req.signal.reason;
      throw unavailable(this.name, 'list', err);
    }
  }

  /** End every hold of `lockId` and bump its fencing counter (docs/backends/cassandra.md, "Breaking a lock"). */
  async forceRelease(lockId: string): Promise<number> {
    try {
      return await this.#algorithm.forceRelease(lockId);
    } catch (err) {
      throw unavailable(this.name, 'forceRelease', err);
    }
  }

  /** Stop the time service and close the session. Leases not released expire by their TTL. */
  close(): Promise<void> {
    if (!this.#closing) {
      this.#algorithm.closed();
      this.#time.release();
      this.#closing = this.#session.close();
    }
    return this.#closing;
  }
}

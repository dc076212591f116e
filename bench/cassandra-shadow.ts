/**
 * The old shadow-table lock on Cassandra, the baseline `npm run bench:cassandra` measures the
 * fair lock against (docs/backends/cassandra.md, "History: the shadow lock"). It is not part
 * of the package: it is unfair, and its random backoffs make a contended waiter wait seconds
 * where the fair lock hands off in milliseconds. It reuses the backend's session, tables and
 * shard rotation, so the two differ only in the algorithm.
 *
 * One attempt: if the main row has a cell, another owner holds (`AnotherThreadIsOwner`);
 * else write our cell into the shadow row (the queue table, at negative shards), read it
 * back, and if we are alone there and the main row is still empty, write the main row,
 * clear the shadow cell and take the fencing token; otherwise clear the shadow cell
 * (`ConcurrentAttempt`). Waits: 0–1000 ms behind an owner, 0–50·attempt ms after a
 * concurrent attempt.
 */
import { performance } from 'node:perf_hooks';
import {
  encodeHostList,
  LockLostError,
  sleep,
  unavailable,
  type AcquireRequest,
  type AcquireResult,
  type Backend,
  type Capabilities,
  type Extension,
  type Grant,
  type LockState,
} from '../src/backends/kit.js';
import { parseCassandraUrl } from '../src/backends/cassandra/config.js';
import { ensureSchema } from '../src/backends/cassandra/schema.js';
import { Session, type StatementCounts } from '../src/backends/cassandra/session.js';
import { Shards } from '../src/backends/cassandra/shards.js';
import { cellTtlSeconds, LockTables, surelyAlive } from '../src/backends/cassandra/tables.js';

/** What an attempt learned, to choose the next backoff. */
export interface ShadowTicket {
  readonly outcome: 'AnotherThreadIsOwner' | 'ConcurrentAttempt';
  readonly attempt: number;
}

/** What a grant keeps for extend and release. */
export interface ShadowGrantData {
  /** The partition (`shard` column) of the main cell. */
  readonly shard: bigint;
  /** When the main cell's last write was sent, and its TTL. */
  sentAt: number;
  ttlSec: number;
}

type Req = AcquireRequest<ShadowTicket>;
type Result = AcquireResult<ShadowTicket, ShadowGrantData>;

/** Shard k of the shadow lock lives at `shard = −1 − k`: never a row of the fair lock. */
const storedShadow = (k: bigint): bigint => -1n - k;

/** The shadow-table lock over one session. */
export class ShadowBackend implements Backend<ShadowTicket, ShadowGrantData> {
  readonly name = 'cassandra-shadow';
  readonly capabilities: Capabilities = Object.freeze({
    fair: false,
    shared: false,
    permits: false,
    notify: false,
    lockDelay: false,
    reentrant: false,
  });
  readonly #session: Session;
  readonly #t: LockTables;
  readonly #rows: Shards;

  private constructor(session: Session, shardSize: number) {
    this.#session = session;
    this.#t = new LockTables(session);
    this.#rows = new Shards(this.#t, shardSize, storedShadow);
  }

  /** Connect to the cluster and keyspace of a `cassandra://` URL (its `create` and `shardSize` apply). */
  static async connect(url: string, connectTimeoutMs = 10_000): Promise<ShadowBackend> {
    const settings = parseCassandraUrl(new URL(encodeHostList(url)));
    const session = await Session.open(settings, connectTimeoutMs, undefined);
    if (settings.create) await ensureSchema(session, settings);
    return new ShadowBackend(session, settings.shardSize);
  }

  /** Statements sent so far by kind. */
  get statements(): StatementCounts {
    return this.#session.counts;
  }

  async tryAcquire(req: Req): Promise<Result> {
    try {
      return await this.#attempt(req);
    } catch (err) {
      if (req.signal.aborted) throw req.signal.reason;
      throw unavailable(this.name, 'acquire', err);
    }
  }

  /** One attempt; the token is a CAS from the counter value read first (safe with rotation). */
  async #attempt(req: Req): Promise<Result> {
    const { lockId, ownerId, signal } = req;
    const attempt = req.ticket?.attempt ?? 0;
    const contended = (outcome: ShadowTicket['outcome']): Result => ({
      granted: false,
      contended: { ticket: req.wait ? { outcome, attempt: attempt + 1 } : undefined },
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
          const data: ShadowGrantData = { shard: at, sentAt, ttlSec };
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

  /** The original random backoffs. */
  waitForChange(_lockId: string, ticket: ShadowTicket | undefined, signal: AbortSignal): Promise<void> {
    const ms = !ticket || ticket.outcome === 'AnotherThreadIsOwner' ? Math.random() * 1000 : Math.random() * 50 * ticket.attempt;
    return sleep(Math.max(1, ms), signal);
  }

  /** Nothing to cancel: every attempt takes its own cells back before it returns. */
  async cancel(): Promise<void> {}

  async extend(grant: Grant<ShadowGrantData>, ttlMs: number): Promise<Extension> {
    const d = grant.data;
    const sentAt = performance.now();
    if (!surelyAlive(d.sentAt, d.ttlSec) && !(await this.#t.hasMainCell(grant.lockId, d.shard, grant.ownerId))) {
      throw new LockLostError(grant.lockId, 'not-held', { context: { backend: this.name } });
    }
    const ttlSec = cellTtlSeconds(ttlMs);
    await this.#t.writeMain(grant.lockId, d.shard, grant.ownerId, grant.token, ttlSec);
    d.sentAt = sentAt;
    d.ttlSec = ttlSec;
    return { ttlMs };
  }

  async release(grant: Grant<ShadowGrantData>): Promise<boolean> {
    const d = grant.data;
    const held = surelyAlive(d.sentAt, d.ttlSec) || (await this.#t.hasMainCell(grant.lockId, d.shard, grant.ownerId));
    await this.#t.deleteMain(grant.lockId, d.shard, grant.ownerId);
    return held;
  }

  /** The main row's cells, with the tokens they were written with. */
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

  close(): Promise<void> {
    return this.#session.close();
  }
}

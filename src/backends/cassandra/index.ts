/**
 * `cassandra://host1,host2[:port]/keyspace?consistency=quorum` — seed 000 on Apache Cassandra.
 *
 * Two algorithms, chosen with `?algorithm=`:
 * - `fair` (default), seed 000 §5 (listings 5–7): per lockId a *queue* partition whose
 *   clustering column is a 20-digit zero-padded microsecond time (from the time service,
 *   §5.4) followed by the ownerId, and a *main* partition whose clustering column is the
 *   ownerId. The head of the queue writes itself into the main partition and holds only if
 *   that partition then has exactly one cell; everyone else waits, polling its position.
 * - `shadow`, seed 000 §4 (listings 3–4): the older shadow-table algorithm with its
 *   Success / AnotherThreadIsOwner / ConcurrentAttempt outcomes and random backoffs, kept
 *   as the baseline the fair algorithm is measured against.
 *
 * Every cell carries a TTL and the core's renewals rewrite it (§5.3); a crashed holder's
 * cells simply expire. Reads and writes run at QUORUM by default (the theorems need
 * R + W > RF). The fencing token is a lightweight transaction on a per-lock counter, taken
 * once by each new holder; the fair algorithm also uses that counter to rotate its queue
 * and main partitions every `shardSize` acquisitions, so tombstones stay bounded.
 *
 * See docs/backends/cassandra.md for the argument and the failure modes.
 */
import cassandra from 'cassandra-driver';
import { performance } from 'node:perf_hooks';
import type {
  AcquireRequest,
  AcquireResult,
  Backend,
  Capabilities,
  Extension,
  Grant,
  HolderState,
  LockState,
} from '../../backend.js';
import type { ConnectOptions } from '../../connect.js';
import { BackendUnavailableError, InvalidArgumentError, LockLostError, LocksmithError } from '../../errors.js';
import { parseCassandraUrl, type CassandraSettings } from './config.js';
import { systemMicroClock, TimeService, type MicroClock } from './time-service.js';

export { parseCassandraUrl, type CassandraSettings, type CassandraAlgorithm } from './config.js';
export { TimeService, systemMicroClock, type MicroClock } from './time-service.js';

const { Client, types } = cassandra;
type CassandraClient = InstanceType<typeof Client>;
type Row = InstanceType<typeof types.Row>;

/** Options beyond the URL (for tests, benchmarks and embedding). */
export interface CassandraBackendOptions extends ConnectOptions {
  /** The wall clock that feeds the time service, in µs. Tests inject a skewed one. */
  readonly clock?: MicroClock;
}

/** The queue partition a waiter or holder lives in, and its entry there. */
interface FairTicket {
  readonly algorithm: 'fair';
  shard: bigint;
  readonly entry: string;
  /** Monotonic ms of the last (re)write of the queue cell, to rewrite it before it expires. */
  writtenAt: number;
  ttlSec: number;
}

/** What a shadow-algorithm attempt learned, to choose the seed's backoff. */
interface ShadowTicket {
  readonly algorithm: 'shadow';
  readonly outcome: 'AnotherThreadIsOwner' | 'ConcurrentAttempt';
  readonly attempt: number;
}

/** Backend-private part of a grant. */
interface GrantData {
  readonly algorithm: 'fair' | 'shadow';
  readonly shard: bigint;
  /** The queue entry (fair only). */
  readonly entry: string;
}

/** The shadow algorithm's main partition lives at this shard of the main table. */
const SHADOW_SHARD = -1n;
/** Bounded retries of listing 7's step 4–10 loop (the head of a tryLock race waiting for the main row to empty). */
const TRY_LOCK_HEAD_RETRIES = 20;
/** Bounded retries of the token CAS (it only loses to a holder whose lease has run out). */
const TOKEN_CAS_RETRIES = 5;

function isFairTicket(t: unknown): t is FairTicket {
  return typeof t === 'object' && t !== null && (t as { algorithm?: unknown }).algorithm === 'fair';
}
function isShadowTicket(t: unknown): t is ShadowTicket {
  return typeof t === 'object' && t !== null && (t as { algorithm?: unknown }).algorithm === 'shadow';
}
function isGrantData(d: unknown): d is GrantData {
  return typeof d === 'object' && d !== null && typeof (d as { shard?: unknown }).shard === 'bigint';
}

/**
 * Cassandra TTLs are whole seconds and a cell written at second W with ttl n expires when
 * the server's clock reaches W + n, which can be as early as n − 1 s after the write. So a
 * lease of `ttlMs` is written as ⌈ttlMs / 1000⌉ + 1 s: the cell then outlives the lease
 * the core computes (the grant vouches for exactly `ttlMs` from when the request was sent),
 * at the price of a crashed holder's lock staying blocked up to ~2 s past its lease.
 */
export function cellTtlSeconds(ttlMs: number): number {
  return Math.ceil(ttlMs / 1000) + 1;
}

/** The seed's column name (listing 5): 20-digit zero-padded µs time, then the owner id. */
export function queueEntry(timeMicros: bigint, ownerId: string): string {
  return timeMicros.toString().padStart(20, '0') + ownerId;
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

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(signal.reason);
      return;
    }
    const onAbort = (): void => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    timer.unref();
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

const CONSISTENCY: Record<CassandraSettings['consistency'], number> = {
  quorum: types.consistencies.quorum,
  all: types.consistencies.all,
  local_quorum: types.consistencies.localQuorum,
  each_quorum: types.consistencies.eachQuorum,
  one: types.consistencies.one,
};

/** Per-(hosts, keyspace) schema creation, so that lockers of one process do it once. */
const schemaDone = new Map<string, Promise<void>>();

/** The Cassandra backend (both algorithms). */
export class CassandraBackend implements Backend {
  readonly name = 'cassandra';
  readonly capabilities: Capabilities;
  readonly settings: CassandraSettings;
  readonly #client: CassandraClient;
  readonly #time: TimeService;
  readonly #cl: number;
  readonly #serial: number;
  #closed = false;
  #closing: Promise<void> | undefined;

  private constructor(settings: CassandraSettings, client: CassandraClient, clock: MicroClock) {
    this.settings = settings;
    this.#client = client;
    this.#cl = CONSISTENCY[settings.consistency];
    this.#serial = settings.serialConsistency === 'serial' ? types.consistencies.serial : types.consistencies.localSerial;
    this.capabilities = Object.freeze({
      fair: settings.algorithm === 'fair',
      shared: false,
      permits: false,
      notify: false,
      lockDelay: false,
      reentrant: false,
    });
    const ks = settings.keyspace;
    this.#time = new TimeService(
      {
        push: async (micros) => {
          // The value is its own write timestamp: last-write-wins keeps the maximum.
          await this.#exec(`UPDATE ${ks}.time_service USING TIMESTAMP ? SET t = ? WHERE id = 'now'`, [micros, micros]);
        },
        read: async () => big((await this.#exec(`SELECT t FROM ${ks}.time_service WHERE id = 'now'`, [])).first(), 't'),
      },
      clock,
      settings.timeRefreshMs,
    );
  }

  /** Connect (bounded by `connectTimeoutMs`), create the schema if asked, start the time service. */
  static async connect(url: URL, options: CassandraBackendOptions = {}): Promise<CassandraBackend> {
    const settings = parseCassandraUrl(url);
    const connectTimeoutMs = options.connectTimeoutMs ?? 10_000;
    const client = new Client({
      contactPoints: settings.hosts.map((h) => `${h}:${settings.port}`),
      localDataCenter: settings.localDataCenter,
      queryOptions: { consistency: CONSISTENCY[settings.consistency], prepare: true },
      socketOptions: { connectTimeout: connectTimeoutMs, readTimeout: 12_000 },
      encoding: { useBigIntAsLong: true },
      policies: {
        // Server-side write timestamps: lock cells must not depend on the clients' clocks
        // (a skewed client's delete could otherwise shadow a later write of the same cell).
        timestampGeneration: null as unknown as InstanceType<typeof cassandra.policies.timestampGeneration.TimestampGenerator>,
      },
    });
    // The driver logs through events only; without a listener nothing is printed or thrown.
    let timer: NodeJS.Timeout | undefined;
    try {
      await Promise.race([
        client.connect(),
        new Promise<never>((_, reject) => {
          timer = setTimeout(
            () => reject(new Error(`no connection within ${connectTimeoutMs} ms`)),
            connectTimeoutMs,
          );
          timer.unref();
        }),
      ]);
    } catch (cause) {
      clearTimeout(timer);
      await client.shutdown().catch(() => undefined);
      throw new BackendUnavailableError('cassandra', `cannot connect to cassandra at ${settings.hosts.join(',')}:${settings.port}`, {
        cause,
        context: { hosts: settings.hosts, port: settings.port },
      });
    }
    clearTimeout(timer);
    const backend = new CassandraBackend(settings, client, options.clock ?? systemMicroClock);
    try {
      if (settings.create) await backend.#createSchema();
      await backend.#time.start();
    } catch (err) {
      await backend.close();
      throw backend.#wrap(err, 'schema/time service setup');
    }
    return backend;
  }

  /** The time service of this backend (the skew test reads it). */
  get timeService(): TimeService {
    return this.#time;
  }

  #createSchema(): Promise<void> {
    const s = this.settings;
    const key = `${s.hosts.join(',')}:${s.port}/${s.keyspace}`;
    let p = schemaDone.get(key);
    if (!p) {
      p = this.#runSchema();
      schemaDone.set(key, p);
      p.catch(() => schemaDone.delete(key));
    }
    return p;
  }

  async #runSchema(): Promise<void> {
    const ks = this.settings.keyspace;
    const ddl = [
      `CREATE KEYSPACE IF NOT EXISTS ${ks} WITH replication = {'class': 'SimpleStrategy', 'replication_factor': ${this.settings.replication}}`,
      // The queue: one partition per (lock, shard), entries sorted by time then owner.
      `CREATE TABLE IF NOT EXISTS ${ks}.lock_queue (lock_id text, shard bigint, entry text, PRIMARY KEY ((lock_id, shard), entry))`,
      // The main row: who holds (fair: one partition per shard; shadow: shard -1).
      `CREATE TABLE IF NOT EXISTS ${ks}.lock_main (lock_id text, shard bigint, owner text, PRIMARY KEY ((lock_id, shard), owner))`,
      // The fencing counter, moved only by lightweight transactions; its value also names the shard.
      `CREATE TABLE IF NOT EXISTS ${ks}.lock_token (lock_id text PRIMARY KEY, token bigint)`,
      // The shadow table of the old algorithm (§4).
      `CREATE TABLE IF NOT EXISTS ${ks}.lock_shadow (lock_id text, owner text, PRIMARY KEY (lock_id, owner))`,
      // The time service's max-register.
      `CREATE TABLE IF NOT EXISTS ${ks}.time_service (id text PRIMARY KEY, t bigint)`,
    ];
    for (const q of ddl) {
      await this.#client.execute(q, [], { consistency: types.consistencies.all });
    }
    // Schema changes must reach every node before the first QUORUM statement uses them.
    await this.#client.metadata.checkSchemaAgreement();
  }

  // ---------------------------------------------------------------- plumbing

  #wrap(err: unknown, what: string): LocksmithError {
    if (err instanceof LocksmithError) return err;
    return new BackendUnavailableError('cassandra', `cassandra ${what} failed: ${err instanceof Error ? err.message : String(err)}`, {
      cause: err,
    });
  }

  async #exec(query: string, params: unknown[], serial = false): Promise<InstanceType<typeof types.ResultSet>> {
    if (this.#closed) throw new BackendUnavailableError('cassandra', 'the cassandra backend is closed');
    try {
      return await this.#client.execute(query, params, {
        prepare: true,
        consistency: this.#cl,
        ...(serial ? { serialConsistency: this.#serial } : {}),
      });
    } catch (err) {
      throw this.#wrap(err, 'query');
    }
  }

  get #ks(): string {
    return this.settings.keyspace;
  }

  async #readToken(lockId: string): Promise<bigint> {
    const r = await this.#exec(`SELECT token FROM ${this.#ks}.lock_token WHERE lock_id = ?`, [lockId]);
    return big(r.first(), 'token') ?? 0n;
  }

  #shardOf(token: bigint): bigint {
    return token / BigInt(this.settings.shardSize);
  }

  /** The first entry of the queue over the previous and the current shard. */
  async #queueHead(lockId: string, shard: bigint): Promise<string | undefined> {
    const q = `SELECT entry FROM ${this.#ks}.lock_queue WHERE lock_id = ? AND shard = ? LIMIT 1`;
    const [prev, cur] = await Promise.all([this.#exec(q, [lockId, shard - 1n]), this.#exec(q, [lockId, shard])]);
    const a = str(prev.first(), 'entry');
    const b = str(cur.first(), 'entry');
    if (a === undefined) return b;
    if (b === undefined) return a;
    return a < b ? a : b;
  }

  async #mainOwners(lockId: string, shard: bigint, limit: number): Promise<string[]> {
    const r = await this.#exec(`SELECT owner FROM ${this.#ks}.lock_main WHERE lock_id = ? AND shard = ? LIMIT ${limit}`, [
      lockId,
      shard,
    ]);
    return r.rows.map((row) => str(row, 'owner')).filter((o): o is string => o !== undefined);
  }

  async #hasMainCell(lockId: string, shard: bigint, owner: string): Promise<boolean> {
    const r = await this.#exec(`SELECT owner FROM ${this.#ks}.lock_main WHERE lock_id = ? AND shard = ? AND owner = ?`, [
      lockId,
      shard,
      owner,
    ]);
    return r.rowLength > 0;
  }

  #writeQueue(lockId: string, shard: bigint, entry: string, ttlSec: number): Promise<unknown> {
    return this.#exec(`INSERT INTO ${this.#ks}.lock_queue (lock_id, shard, entry) VALUES (?, ?, ?) USING TTL ?`, [
      lockId,
      shard,
      entry,
      ttlSec,
    ]);
  }
  #deleteQueue(lockId: string, shard: bigint, entry: string): Promise<unknown> {
    return this.#exec(`DELETE FROM ${this.#ks}.lock_queue WHERE lock_id = ? AND shard = ? AND entry = ?`, [lockId, shard, entry]);
  }
  #writeMain(lockId: string, shard: bigint, owner: string, ttlSec: number): Promise<unknown> {
    return this.#exec(`INSERT INTO ${this.#ks}.lock_main (lock_id, shard, owner) VALUES (?, ?, ?) USING TTL ?`, [
      lockId,
      shard,
      owner,
      ttlSec,
    ]);
  }
  #deleteMain(lockId: string, shard: bigint, owner: string): Promise<unknown> {
    return this.#exec(`DELETE FROM ${this.#ks}.lock_main WHERE lock_id = ? AND shard = ? AND owner = ?`, [lockId, shard, owner]);
  }

  /**
   * The fencing token: compare-and-set the per-lock counter from the value just read to
   * value + 1 (one Paxos round; `IF NOT EXISTS` for the very first grant). Only a holder
   * calls this, so the CAS loses only to a holder whose lease already ran out; then the
   * current value returned by the failed CAS is used for the next try.
   */
  async #takeToken(lockId: string, seen: bigint): Promise<bigint> {
    let expected = seen;
    for (let i = 0; i < TOKEN_CAS_RETRIES; i++) {
      const next = expected + 1n;
      const r =
        expected === 0n
          ? await this.#exec(`INSERT INTO ${this.#ks}.lock_token (lock_id, token) VALUES (?, ?) IF NOT EXISTS`, [lockId, next], true)
          : await this.#exec(`UPDATE ${this.#ks}.lock_token SET token = ? WHERE lock_id = ? IF token = ?`, [next, lockId, expected], true);
      const row = r.first();
      if (row?.get('[applied]') === true) return next;
      expected = big(row, 'token') ?? expected;
    }
    throw new BackendUnavailableError('cassandra', `could not take a fencing token for '${lockId}' (contended CAS)`);
  }

  // ---------------------------------------------------------------- the fair algorithm

  /**
   * Make sure our queue entry exists in the current shard and is fresh. Returns the ticket.
   * A waiter's cell has a TTL like every other (a crashed waiter must leave the queue), so
   * it is rewritten once a third of its TTL has passed.
   */
  async #enqueue(req: AcquireRequest, shard: bigint, ticket: FairTicket | undefined): Promise<FairTicket> {
    const ttlSec = cellTtlSeconds(req.ttlMs);
    if (!ticket) {
      const entry = queueEntry(this.#time.now(), req.ownerId);
      await this.#writeQueue(req.lockId, shard, entry, ttlSec);
      return { algorithm: 'fair', shard, entry, writtenAt: performance.now(), ttlSec };
    }
    if (ticket.shard < shard - 1n) {
      // The queue rotated past us: move the entry (same name, so the same place in line).
      await this.#writeQueue(req.lockId, shard, ticket.entry, ttlSec);
      await this.#deleteQueue(req.lockId, ticket.shard, ticket.entry);
      ticket.shard = shard;
      ticket.writtenAt = performance.now();
      ticket.ttlSec = ttlSec;
    } else if (performance.now() - ticket.writtenAt > (ticket.ttlSec * 1000) / 3) {
      await this.#writeQueue(req.lockId, ticket.shard, ticket.entry, ttlSec);
      ticket.writtenAt = performance.now();
      ticket.ttlSec = ttlSec;
    }
    return ticket;
  }

  /**
   * Listing 6 steps 3–8 for the head of the queue: write into the main row, hold only if it
   * then has exactly one cell (ours). Two more checks make shard rotation safe: the previous
   * shard's main row must be empty (a holder from before the rotation), and the counter
   * must still name our shard (no grant happened in between). Returns the token, or
   * undefined after removing our main cell again.
   */
  async #enterMain(req: AcquireRequest, shard: bigint, ttlSec: number): Promise<bigint | undefined> {
    const { lockId, ownerId } = req;
    await this.#writeMain(lockId, shard, ownerId, ttlSec);
    const [cur, prev] = await Promise.all([this.#mainOwners(lockId, shard, 2), this.#mainOwners(lockId, shard - 1n, 1)]);
    if (cur.length === 1 && cur[0] === ownerId && prev.length === 0) {
      // Read after the main-row check: a grant that rotated the shard meanwhile is seen here.
      const token = await this.#readToken(lockId);
      if (this.#shardOf(token) === shard) {
        try {
          return await this.#takeToken(lockId, token);
        } catch (err) {
          await this.#deleteMain(lockId, shard, ownerId).catch(() => undefined);
          throw err;
        }
      }
    }
    await this.#deleteMain(lockId, shard, ownerId);
    return undefined;
  }

  async #fairAcquire(req: AcquireRequest): Promise<AcquireResult> {
    const { lockId, ownerId } = req;
    const ttlSec = cellTtlSeconds(req.ttlMs);
    if (!req.wait) return this.#fairTryOnce(req, ttlSec);

    const previous = isFairTicket(req.ticket) ? req.ticket : undefined;
    // One round trip for the counter and (when we already queue) our place in line.
    const [token, headGuess] = await Promise.all([
      this.#readToken(lockId),
      previous ? this.#queueHead(lockId, previous.shard) : Promise.resolve(undefined),
    ]);
    const shard = this.#shardOf(token);
    const ticket = await this.#enqueue(req, shard, previous);
    // The guess read the right partitions only if the shard did not move since the last poll.
    const head = previous && previous.shard === shard && ticket.shard === shard ? headGuess : await this.#queueHead(lockId, shard);
    if (head !== ticket.entry) {
      return { granted: false, contended: { ticket } };
    }
    const got = await this.#enterMain(req, shard, ttlSec);
    if (got === undefined) return { granted: false, contended: { ticket } };
    const data: GrantData = { algorithm: 'fair', shard, entry: ticket.entry };
    return { granted: true, grant: { lockId, kind: req.kind, ownerId, token: got, ttlMs: req.ttlMs, reentered: false, data } };
  }

  /** Listing 7 (tryGetLock): never leaves a queue entry behind when it fails. */
  async #fairTryOnce(req: AcquireRequest, ttlSec: number): Promise<AcquireResult> {
    const { lockId, ownerId } = req;
    const shard = this.#shardOf(await this.#readToken(lockId));
    const [cur, prev] = await Promise.all([this.#mainOwners(lockId, shard, 1), this.#mainOwners(lockId, shard - 1n, 1)]);
    if (cur.length > 0 || prev.length > 0) return { granted: false, contended: {} };
    const entry = queueEntry(this.#time.now(), ownerId);
    await this.#writeQueue(lockId, shard, entry, ttlSec);
    try {
      for (let i = 0; i < TRY_LOCK_HEAD_RETRIES; i++) {
        const head = await this.#queueHead(lockId, shard);
        if (head !== entry) break;
        const got = await this.#enterMain(req, shard, ttlSec);
        if (got !== undefined) {
          const data: GrantData = { algorithm: 'fair', shard, entry };
          return { granted: true, grant: { lockId, kind: req.kind, ownerId, token: got, ttlMs: req.ttlMs, reentered: false, data } };
        }
        // Theorem 3: the head keeps trying while the others, not first, leave the main row.
        await sleep(2 + Math.random() * 8);
      }
    } catch (err) {
      await this.#deleteQueue(lockId, shard, entry).catch(() => undefined);
      throw err;
    }
    await this.#deleteQueue(lockId, shard, entry);
    return { granted: false, contended: {} };
  }

  // ---------------------------------------------------------------- the shadow algorithm (§4)

  /** Listing 3, one attempt. */
  async #shadowTry(req: AcquireRequest): Promise<AcquireResult> {
    const { lockId, ownerId } = req;
    const ks = this.#ks;
    const ttlSec = cellTtlSeconds(req.ttlMs);
    const attempt = isShadowTicket(req.ticket) ? req.ticket.attempt : 0;
    const contended = (outcome: ShadowTicket['outcome']): AcquireResult => ({
      granted: false,
      contended: { ticket: { algorithm: 'shadow', outcome, attempt: attempt + 1 } satisfies ShadowTicket },
    });
    const main = await this.#mainOwners(lockId, SHADOW_SHARD, 2);
    if (main.length > 0) return contended('AnotherThreadIsOwner');
    await this.#exec(`INSERT INTO ${ks}.lock_shadow (lock_id, owner) VALUES (?, ?) USING TTL ?`, [lockId, ownerId, ttlSec]);
    const deleteShadow = (): Promise<unknown> =>
      this.#exec(`DELETE FROM ${ks}.lock_shadow WHERE lock_id = ? AND owner = ?`, [lockId, ownerId]);
    try {
      const shadow = await this.#exec(`SELECT owner FROM ${ks}.lock_shadow WHERE lock_id = ? LIMIT 2`, [lockId]);
      if (shadow.rowLength === 1 && str(shadow.first(), 'owner') === ownerId) {
        if ((await this.#mainOwners(lockId, SHADOW_SHARD, 1)).length === 0) {
          await this.#writeMain(lockId, SHADOW_SHARD, ownerId, ttlSec);
          await deleteShadow();
          let token: bigint;
          try {
            token = await this.#takeToken(lockId, await this.#readToken(lockId));
          } catch (err) {
            await this.#deleteMain(lockId, SHADOW_SHARD, ownerId).catch(() => undefined);
            throw err;
          }
          const data: GrantData = { algorithm: 'shadow', shard: SHADOW_SHARD, entry: '' };
          return { granted: true, grant: { lockId, kind: req.kind, ownerId, token, ttlMs: req.ttlMs, reentered: false, data } };
        }
      }
    } catch (err) {
      await deleteShadow().catch(() => undefined);
      throw err;
    }
    await deleteShadow();
    return contended('ConcurrentAttempt');
  }

  // ---------------------------------------------------------------- Backend

  async tryAcquire(req: AcquireRequest): Promise<AcquireResult> {
    if (req.kind !== 'mutex') throw new InvalidArgumentError('kind', `the cassandra backend only has mutexes, not '${req.kind}'`);
    try {
      return this.settings.algorithm === 'shadow' ? await this.#shadowTry(req) : await this.#fairAcquire(req);
    } catch (err) {
      throw this.#wrap(err, 'acquire');
    }
  }

  /**
   * Cassandra cannot notify, so this is a short jittered sleep: for the fair lock around
   * `pollMs` (only the head of the queue then touches the main row), for the shadow lock
   * the seed's backoffs (listing 4: 0–1000 ms when another owner holds it, 0–50·attempt ms
   * after a concurrent attempt).
   */
  waitForChange(_lockId: string, ticket: unknown, signal: AbortSignal): Promise<void> {
    let ms: number;
    if (isShadowTicket(ticket)) {
      ms = ticket.outcome === 'AnotherThreadIsOwner' ? Math.random() * 1000 : Math.random() * 50 * ticket.attempt;
    } else {
      const base = this.settings.pollMs;
      ms = base / 2 + Math.random() * base;
    }
    return sleep(Math.max(1, ms), signal);
  }

  async cancel(req: AcquireRequest, ticket: unknown): Promise<void> {
    if (!isFairTicket(ticket)) return;
    try {
      await this.#deleteQueue(req.lockId, ticket.shard, ticket.entry);
    } catch {
      // Idempotent and never throws: an entry we cannot delete expires by its TTL.
    }
  }

  /**
   * Rewrite our cells with a fresh TTL. First check that our main cell still exists: if it
   * expired, someone else may hold now and rewriting would resurrect us beside them.
   * Another owner's cell beside ours does not mean loss: only a head that saw exactly one
   * cell holds, and a transient racer removes its own cell again.
   */
  async extend(grant: Grant, ttlMs: number): Promise<Extension> {
    const data = grant.data;
    if (!isGrantData(data)) throw new LockLostError(grant.lockId, 'not-held', { context: { backend: this.name } });
    try {
      if (!(await this.#hasMainCell(grant.lockId, data.shard, grant.ownerId))) {
        throw new LockLostError(grant.lockId, 'not-held', { context: { backend: this.name } });
      }
      const ttlSec = cellTtlSeconds(ttlMs);
      await Promise.all([
        this.#writeMain(grant.lockId, data.shard, grant.ownerId, ttlSec),
        data.algorithm === 'fair' ? this.#writeQueue(grant.lockId, data.shard, data.entry, ttlSec) : Promise.resolve(),
      ]);
      return { ttlMs };
    } catch (err) {
      throw this.#wrap(err, 'extend');
    }
  }

  async release(grant: Grant): Promise<boolean> {
    const data = grant.data;
    if (!isGrantData(data)) return false;
    try {
      const held = await this.#hasMainCell(grant.lockId, data.shard, grant.ownerId);
      // Both cells are named by us alone, so deleting them never touches a later holder.
      await Promise.all([
        this.#deleteMain(grant.lockId, data.shard, grant.ownerId),
        data.algorithm === 'fair' ? this.#deleteQueue(grant.lockId, data.shard, data.entry) : Promise.resolve(),
      ]);
      return held;
    } catch (err) {
      throw this.#wrap(err, 'release');
    }
  }

  async inspect(lockId: string): Promise<LockState> {
    try {
      const token = await this.#readToken(lockId);
      const shard = this.#shardOf(token);
      const [prev, cur, legacy, q1, q2] = await Promise.all([
        this.#mainOwners(lockId, shard - 1n, 10),
        this.#mainOwners(lockId, shard, 10),
        this.#mainOwners(lockId, SHADOW_SHARD, 10),
        this.#exec(`SELECT entry FROM ${this.#ks}.lock_queue WHERE lock_id = ? AND shard = ? LIMIT 1000`, [lockId, shard - 1n]),
        this.#exec(`SELECT entry FROM ${this.#ks}.lock_queue WHERE lock_id = ? AND shard = ? LIMIT 1000`, [lockId, shard]),
      ]);
      const owners = [...prev, ...cur, ...legacy];
      // The holder's token is the counter's value: only a holder moves it.
      const holders: HolderState[] = owners.map((ownerId) => ({ ownerId, kind: 'mutex', token, count: 1 }));
      const holding = new Set(owners);
      const queued = [...q1.rows, ...q2.rows]
        .map((r) => str(r, 'entry'))
        .filter((e): e is string => e !== undefined && !holding.has(e.slice(20)));
      return { lockId, holders, waiters: queued.length, lastToken: token };
    } catch (err) {
      throw this.#wrap(err, 'inspect');
    }
  }

  async close(): Promise<void> {
    if (this.#closing) return this.#closing;
    this.#time.close();
    this.#closing = (async () => {
      this.#closed = true;
      await this.#client.shutdown().catch(() => undefined);
    })();
    return this.#closing;
  }

  /** For tests (`abandon`): drop the connection without releasing anything. */
  async dropConnections(): Promise<void> {
    await this.close();
  }
}

/** Factory used by `createLocker('cassandra://…')`. */
export function createBackend(url: URL, options: ConnectOptions = {}): Promise<Backend> {
  return CassandraBackend.connect(url, options);
}

/** Like {@link createBackend}, with options beyond the URL (an injected clock). */
export function createCassandraBackend(url: string | URL, options: CassandraBackendOptions = {}): Promise<CassandraBackend> {
  return CassandraBackend.connect(typeof url === 'string' ? new URL(url) : url, options);
}

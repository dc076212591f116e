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
import type { policies as DriverPolicies, types as DriverTypes } from 'cassandra-driver';
import { performance } from 'node:perf_hooks';
import type { AcquireRequest, AcquireResult, Backend, Capabilities, Extension, Grant, HolderState, LockState } from '../../backend.js';
import type { ConnectOptions } from '../../connect.js';
import { BackendUnavailableError, InvalidArgumentError, LockLostError, LocksmithError } from '../../errors.js';
import { parseCassandraUrl, type CassandraSettings } from './config.js';
import { systemMicroClock, TimeService, type MicroClock } from './time-service.js';

export { parseCassandraUrl, type CassandraSettings, type CassandraAlgorithm } from './config.js';
export { TimeService, systemMicroClock, type MicroClock } from './time-service.js';

const { Client, types } = cassandra;
type CassandraClient = InstanceType<typeof Client>;
type Row = DriverTypes.Row;

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
  /** Entries ahead of ours at the last look (capped): waiters further back poll less often. */
  ahead: number;
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
  /** The shard of our main cell. */
  readonly shard: bigint;
  /** The shard of our queue entry: one behind `shard` when the queue rotated while we waited. */
  readonly queueShard: bigint;
  /** The queue entry (fair only). */
  readonly entry: string;
}

/** The shadow algorithm's main partition lives at this shard of the main table. */
const SHADOW_SHARD = -1n;
/** Bounded retries of listing 7's step 4–10 loop (the head of a tryLock race waiting for the main row to empty). */
const TRY_LOCK_HEAD_RETRIES = 20;
/**
 * Lock reads are tiny and on the critical path of every renewal: when a replica dies, the
 * coordinator must not wait for it until the failure detector convicts it (seconds, longer
 * than a short lease has), so it asks another replica after a fixed 20 ms instead of the
 * default latency percentile.
 */
const TABLE_OPTIONS = "WITH speculative_retry = '20ms' AND additional_write_policy = '20ms'";
/** Attempts of one statement when a node just died under it (see {@link retryable}). */
const RETRY_ATTEMPTS = 4;

const codes = types.responseErrorCodes;
/** Server answers that say "not now" rather than "never": worth another try for an idempotent statement. */
const TRANSIENT_CODES: ReadonlySet<number> = new Set([
  codes.unavailableException,
  codes.overloaded,
  codes.isBootstrapping,
  codes.writeTimeout,
  codes.readTimeout,
  codes.writeFailure,
]);

/**
 * Right after a node dies the driver can fail a statement without sending it (no usable
 * connection, even while preparing it): safe to repeat for any statement, an LWT included.
 * A statement that may have reached the server is repeated only when it is idempotent.
 */
function retryable(err: unknown, idempotent: boolean): boolean {
  if (err instanceof cassandra.errors.NoHostAvailableError) return true;
  if (err instanceof Error && err.message === 'No connection available') return true;
  if (!idempotent) return false;
  if (err instanceof cassandra.errors.ResponseError) return TRANSIENT_CODES.has(err.code);
  return err instanceof cassandra.errors.DriverError && !(err instanceof cassandra.errors.ArgumentError);
}
/** Queue entries counted ahead of a waiter per shard; beyond this the poll interval stops growing. */
const AHEAD_LIMIT = 8;
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
  /** What the URL said (hosts, keyspace, algorithm, consistency, tuning). */
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
        timestampGeneration: null as unknown as DriverPolicies.timestampGeneration.TimestampGenerator,
      },
    });
    // The driver logs through events only; without a listener nothing is printed or thrown.
    let timer: NodeJS.Timeout | undefined;
    try {
      await Promise.race([
        client.connect(),
        new Promise<never>((_, reject) => {
          timer = setTimeout(() => reject(new Error(`no connection within ${connectTimeoutMs} ms`)), connectTimeoutMs);
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
      `CREATE TABLE IF NOT EXISTS ${ks}.lock_queue (lock_id text, shard bigint, entry text, PRIMARY KEY ((lock_id, shard), entry)) ${TABLE_OPTIONS}`,
      // The main row: who holds (fair: one partition per shard; shadow: shard -1).
      `CREATE TABLE IF NOT EXISTS ${ks}.lock_main (lock_id text, shard bigint, owner text, PRIMARY KEY ((lock_id, shard), owner)) ${TABLE_OPTIONS}`,
      // The fencing counter, moved only by lightweight transactions; its value also names the shard.
      `CREATE TABLE IF NOT EXISTS ${ks}.lock_token (lock_id text PRIMARY KEY, fence bigint) ${TABLE_OPTIONS}`,
      // The shadow table of the old algorithm (§4).
      `CREATE TABLE IF NOT EXISTS ${ks}.lock_shadow (lock_id text, owner text, PRIMARY KEY (lock_id, owner)) ${TABLE_OPTIONS}`,
      // The time service's max-register.
      `CREATE TABLE IF NOT EXISTS ${ks}.time_service (id text PRIMARY KEY, t bigint) ${TABLE_OPTIONS}`,
    ];
    for (const q of ddl) {
      await this.#client.execute(q, [], { consistency: types.consistencies.all });
    }
    // The driver waits for schema agreement after each DDL statement (maxSchemaAgreementWaitSeconds).
  }

  // ---------------------------------------------------------------- plumbing

  #wrap(err: unknown, what: string): LocksmithError {
    if (err instanceof LocksmithError) return err;
    return new BackendUnavailableError('cassandra', `cassandra ${what} failed: ${err instanceof Error ? err.message : String(err)}`, {
      cause: err,
    });
  }

  async #exec(query: string, params: unknown[], serial = false): Promise<DriverTypes.ResultSet> {
    if (this.#closed) throw new BackendUnavailableError('cassandra', 'the cassandra backend is closed');
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.#client.execute(query, params, {
          prepare: true,
          consistency: this.#cl,
          // Plain reads, inserts with TTL and deletes of our own cells can be repeated safely,
          // so the driver may retry them on another node when one dies mid-request; an LWT not.
          isIdempotent: !serial,
          ...(serial ? { serialConsistency: this.#serial } : {}),
        });
      } catch (err) {
        if (attempt < RETRY_ATTEMPTS && !this.#closed && retryable(err, !serial)) {
          await sleep(50 * attempt);
          continue;
        }
        throw this.#wrap(err, 'query');
      }
    }
  }

  get #ks(): string {
    return this.settings.keyspace;
  }

  async #readToken(lockId: string): Promise<bigint> {
    const r = await this.#exec(`SELECT fence FROM ${this.#ks}.lock_token WHERE lock_id = ?`, [lockId]);
    return big(r.first(), 'fence') ?? 0n;
  }

  #shardOf(token: bigint): bigint {
    return token / BigInt(this.settings.shardSize);
  }

  /**
   * How many queue entries sort before `entry` over the previous and the current shard
   * (counted up to {@link AHEAD_LIMIT} per shard). 0 means we are the head of the queue.
   */
  async #aheadOf(lockId: string, shard: bigint, entry: string): Promise<number> {
    const q = `SELECT entry FROM ${this.#ks}.lock_queue WHERE lock_id = ? AND shard = ? AND entry < ? LIMIT ${AHEAD_LIMIT}`;
    const [prev, cur] = await Promise.all([this.#exec(q, [lockId, shard - 1n, entry]), this.#exec(q, [lockId, shard, entry])]);
    return prev.rowLength + cur.rowLength;
  }

  async #mainOwners(lockId: string, shard: bigint, limit: number): Promise<string[]> {
    const r = await this.#exec(`SELECT owner FROM ${this.#ks}.lock_main WHERE lock_id = ? AND shard = ? LIMIT ${limit}`, [lockId, shard]);
    return r.rows.map((row: Row) => str(row, 'owner')).filter((o: string | undefined): o is string => o !== undefined);
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
   * The fencing token: compare-and-set the per-lock counter from `seen` to `seen + 1` (one
   * Paxos round; `IF NOT EXISTS` for the very first grant). A failed CAS returns the current
   * value; `accept` decides whether to go on from it (the fair lock refuses when the value
   * names another shard: a grant happened since it read the counter). Resolves undefined
   * when refused.
   */
  async #takeToken(lockId: string, seen: bigint, accept: (current: bigint) => boolean): Promise<bigint | undefined> {
    let expected = seen;
    for (let i = 0; i < TOKEN_CAS_RETRIES; i++) {
      const next = expected + 1n;
      const r =
        expected === 0n
          ? await this.#exec(`INSERT INTO ${this.#ks}.lock_token (lock_id, fence) VALUES (?, ?) IF NOT EXISTS`, [lockId, next], true)
          : await this.#exec(`UPDATE ${this.#ks}.lock_token SET fence = ? WHERE lock_id = ? IF fence = ?`, [next, lockId, expected], true);
      const row = r.first();
      if (row?.get('[applied]') === true) return next;
      const current = big(row, 'fence');
      if (current === undefined || !accept(current)) return undefined;
      expected = current;
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
      return { algorithm: 'fair', shard, entry, writtenAt: performance.now(), ttlSec, ahead: 0 };
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
   * must still name our shard when we take the token (the CAS is linearizable, so a grant
   * that rotated the shard after we read the counter makes it fail).
   *
   * The token CAS runs in parallel with the main-row reads (both only need our main cell to
   * be written first): one round trip less per hand-off. When the reads then say "not
   * alone", that token is simply never used — tokens stay unique and increasing, with a
   * gap. Returns the token, or undefined after removing our main cell again.
   */
  async #enterMain(req: AcquireRequest, shard: bigint, seenToken: bigint, ttlSec: number): Promise<bigint | undefined> {
    const { lockId, ownerId } = req;
    await this.#writeMain(lockId, shard, ownerId, ttlSec);
    let token: bigint | undefined;
    let alone: boolean;
    try {
      const [cur, prev, taken] = await Promise.all([
        this.#mainOwners(lockId, shard, 2),
        this.#mainOwners(lockId, shard - 1n, 1),
        this.#takeToken(lockId, seenToken, (current) => this.#shardOf(current) === shard),
      ]);
      alone = cur.length === 1 && cur[0] === ownerId && prev.length === 0;
      token = taken;
    } catch (err) {
      await this.#deleteMain(lockId, shard, ownerId).catch(() => undefined);
      throw err;
    }
    if (alone && token !== undefined) return token;
    await this.#deleteMain(lockId, shard, ownerId);
    return undefined;
  }

  async #fairAcquire(req: AcquireRequest): Promise<AcquireResult> {
    const { lockId, ownerId } = req;
    const ttlSec = cellTtlSeconds(req.ttlMs);
    if (!req.wait) return this.#fairTryOnce(req, ttlSec);

    const previous = isFairTicket(req.ticket) ? req.ticket : undefined;
    // One round trip for the counter and (when we already queue) our place in line.
    const [token, aheadGuess] = await Promise.all([
      this.#readToken(lockId),
      previous ? this.#aheadOf(lockId, previous.shard, previous.entry) : Promise.resolve(-1),
    ]);
    const shard = this.#shardOf(token);
    const ticket = await this.#enqueue(req, shard, previous);
    // The guess read the right partitions only if the shard did not move since the last poll.
    ticket.ahead =
      previous && previous.shard === shard && ticket.shard === shard && aheadGuess >= 0
        ? aheadGuess
        : await this.#aheadOf(lockId, shard, ticket.entry);
    if (ticket.ahead > 0) {
      return { granted: false, contended: { ticket } };
    }
    const got = await this.#enterMain(req, shard, token, ttlSec);
    if (got === undefined) return { granted: false, contended: { ticket } };
    const data: GrantData = { algorithm: 'fair', shard, queueShard: ticket.shard, entry: ticket.entry };
    return { granted: true, grant: { lockId, kind: req.kind, ownerId, token: got, ttlMs: req.ttlMs, reentered: false, data } };
  }

  /** Listing 7 (tryGetLock): never leaves a queue entry behind when it fails. */
  async #fairTryOnce(req: AcquireRequest, ttlSec: number): Promise<AcquireResult> {
    const { lockId, ownerId } = req;
    let token = await this.#readToken(lockId);
    let shard = this.#shardOf(token);
    const [cur, prev] = await Promise.all([this.#mainOwners(lockId, shard, 1), this.#mainOwners(lockId, shard - 1n, 1)]);
    if (cur.length > 0 || prev.length > 0) return { granted: false, contended: {} };
    const entry = queueEntry(this.#time.now(), ownerId);
    await this.#writeQueue(lockId, shard, entry, ttlSec);
    try {
      for (let i = 0; i < TRY_LOCK_HEAD_RETRIES; i++) {
        if (i > 0) {
          // A failed round may have taken a token (and so rotated the shard): follow it.
          token = await this.#readToken(lockId);
          const now = this.#shardOf(token);
          if (now !== shard) {
            await this.#writeQueue(lockId, now, entry, ttlSec);
            await this.#deleteQueue(lockId, shard, entry);
            shard = now;
          }
        }
        if ((await this.#aheadOf(lockId, shard, entry)) > 0) break;
        const got = await this.#enterMain(req, shard, token, ttlSec);
        if (got !== undefined) {
          const data: GrantData = { algorithm: 'fair', shard, queueShard: shard, entry };
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
            const taken = await this.#takeToken(lockId, await this.#readToken(lockId), () => true);
            if (taken === undefined) throw new BackendUnavailableError('cassandra', 'fencing counter vanished');
            token = taken;
          } catch (err) {
            await this.#deleteMain(lockId, SHADOW_SHARD, ownerId).catch(() => undefined);
            throw err;
          }
          const data: GrantData = { algorithm: 'shadow', shard: SHADOW_SHARD, queueShard: SHADOW_SHARD, entry: '' };
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
   * Cassandra cannot notify, so this is a short jittered sleep. Fair lock: around `pollMs`
   * for the waiter next in line, proportionally longer for those further back (up to
   * {@link AHEAD_LIMIT}×), so a long queue does not flood the cluster with reads; only the
   * head ever touches the main row. Shadow lock: the seed's backoffs (listing 4: 0–1000 ms
   * when another owner holds it, 0–50·attempt ms after a concurrent attempt).
   */
  waitForChange(_lockId: string, ticket: unknown, signal: AbortSignal): Promise<void> {
    let ms: number;
    if (isShadowTicket(ticket)) {
      ms = ticket.outcome === 'AnotherThreadIsOwner' ? Math.random() * 1000 : Math.random() * 50 * ticket.attempt;
    } else {
      const position = isFairTicket(ticket) ? Math.min(Math.max(ticket.ahead, 1), AHEAD_LIMIT) : 1;
      ms = this.settings.pollMs * position * (0.5 + Math.random());
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
        data.algorithm === 'fair' ? this.#writeQueue(grant.lockId, data.queueShard, data.entry, ttlSec) : Promise.resolve(),
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
        data.algorithm === 'fair' ? this.#deleteQueue(grant.lockId, data.queueShard, data.entry) : Promise.resolve(),
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
      // The counter's value is the holder's token, except after a head that lost a main-row
      // race took one in parallel (then it is larger): keeping the token in the main cell
      // would cost a write per acquisition for the sake of `status` alone.
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
}

/** Factory used by `createLocker('cassandra://…')`. */
export function createBackend(url: URL, options: ConnectOptions = {}): Promise<Backend> {
  return CassandraBackend.connect(url, options);
}

/** Like {@link createBackend}, with options beyond the URL (an injected clock). */
export function createCassandraBackend(url: string | URL, options: CassandraBackendOptions = {}): Promise<CassandraBackend> {
  return CassandraBackend.connect(typeof url === 'string' ? new URL(url) : url, options);
}

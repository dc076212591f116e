/**
 * Statement execution: one driver client, the consistency levels the URL chose, and the
 * retry policy for a node that just died (see docs/backends/cassandra.md, "Running it
 * here"). Every statement stops waiting when the caller's signal aborts, and is counted, so
 * that the database cost of waiting can be measured (`CassandraBackend.statements`).
 */
import cassandra from 'cassandra-driver';
import type { policies as DriverPolicies, types as DriverTypes } from 'cassandra-driver';
import { backendLog, BackendUnavailableError, raceAbort, sleep, unavailable, withDeadline } from '../kit.js';
import type { CassandraSettings } from './config.js';
import { guardControlRefresh, guardHosts } from './workarounds.js';

const log = backendLog('cassandra');

const { Client, types } = cassandra;
type DriverClient = InstanceType<typeof Client>;
/** One result of the driver. */
export type ResultSet = DriverTypes.ResultSet;
/** One row of a result. */
export type Row = DriverTypes.Row;

/** Attempts of one statement when a node just died under it (see {@link retryable}). */
const RETRY_ATTEMPTS = 4;
/** How long `close()` waits for the driver to let go of its sockets. */
const SHUTDOWN_BOUND_MS = 2_000;

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

/**
 * Reconnect after 0.5 s, at most every 5 s (the driver's default grows to 10 minutes, which
 * leaves a lock's renewals failing long after the node is back).
 */
const RECONNECTION = new cassandra.policies.reconnection.ExponentialReconnectionPolicy(500, 5_000, false);

const CONSISTENCY: Record<CassandraSettings['consistency'], number> = {
  quorum: types.consistencies.quorum,
  all: types.consistencies.all,
  local_quorum: types.consistencies.localQuorum,
  each_quorum: types.consistencies.eachQuorum,
  one: types.consistencies.one,
};

/**
 * The driver's typings omit the documented `null` ("let the server generate the
 * timestamp"): lock cells must not depend on the clients' clocks, or a skewed client's
 * delete could shadow a later write of the same cell.
 */
const SERVER_TIMESTAMPS = null as unknown as DriverPolicies.timestampGeneration.TimestampGenerator;

/** What kind of statement, for the counters. */
export type StatementKind = 'read' | 'write' | 'lwt' | 'schema';

/** Statements sent so far, by kind (retries included). */
export interface StatementCounts {
  readonly read: number;
  readonly write: number;
  readonly lwt: number;
  readonly schema: number;
}

/** One connected client and how statements go through it. */
export class Session {
  readonly #client: DriverClient;
  readonly #settings: CassandraSettings;
  readonly #cl: number;
  readonly #serial: number;
  readonly #counts = { read: 0, write: 0, lwt: 0, schema: 0 };
  #closed = false;
  #closing: Promise<void> | undefined;
  readonly #afterShutdown: () => void;

  private constructor(client: DriverClient, settings: CassandraSettings) {
    this.#client = client;
    this.#afterShutdown = guardHosts(client);
    this.#settings = settings;
    this.#cl = CONSISTENCY[settings.consistency];
    this.#serial = settings.serialConsistency === 'serial' ? types.consistencies.serial : types.consistencies.localSerial;
  }

  /**
   * Connect within `timeoutMs`, or until `signal` aborts (then reject with its reason). A
   * client that failed to connect is shut down in the background.
   */
  static async open(settings: CassandraSettings, timeoutMs: number, signal: AbortSignal | undefined): Promise<Session> {
    const client = new Client({
      contactPoints: settings.hosts.map((h) => (h.includes(':') ? `[${h}]:${settings.port}` : `${h}:${settings.port}`)),
      localDataCenter: settings.localDataCenter,
      queryOptions: { consistency: CONSISTENCY[settings.consistency], prepare: true },
      socketOptions: { connectTimeout: timeoutMs, readTimeout: 12_000 },
      encoding: { useBigIntAsLong: true },
      policies: { timestampGeneration: SERVER_TIMESTAMPS, reconnection: RECONNECTION },
    });
    guardControlRefresh(client);
    // The driver reports through events only; without a listener nothing is printed or thrown.
    try {
      await withDeadline(client.connect(), {
        timeoutMs,
        ...(signal ? { signal } : {}),
        onTimeout: () => new Error(`no answer from the cluster within ${timeoutMs} ms`),
      });
    } catch (err) {
      void withDeadline(client.shutdown(), { timeoutMs: SHUTDOWN_BOUND_MS }).catch(() => undefined);
      if (signal?.aborted && err === signal.reason) throw err;
      throw unavailable('cassandra', `connect to ${settings.hosts.join(',')}:${settings.port}`, err, {
        context: { hosts: settings.hosts, port: settings.port },
      });
    }
    // Reconnects are the driver's: say when a node leaves or comes back.
    client.on('hostDown', (host: { address: string }) => {
      if (log.enabled) log('node %s down', host.address);
    });
    client.on('hostUp', (host: { address: string }) => {
      if (log.enabled) log('node %s up again', host.address);
    });
    return new Session(client, settings);
  }

  /** The keyspace every statement names. */
  get keyspace(): string {
    return this.#settings.keyspace;
  }

  /** Statements sent so far (a copy). */
  get counts(): StatementCounts {
    return { ...this.#counts };
  }

  /**
   * Run one statement at the URL's consistency (an LWT with its serial consistency), retry
   * it when a node just died (see {@link retryable}), and give up when `signal` aborts:
   * then reject with `signal.reason` unchanged (the statement may still land; every cell
   * has a TTL).
   */
  async exec(kind: StatementKind, query: string, params: readonly unknown[], signal?: AbortSignal): Promise<ResultSet> {
    const lwt = kind === 'lwt';
    for (let attempt = 1; ; attempt++) {
      if (this.#closed) throw new BackendUnavailableError('cassandra', 'the cassandra backend is closed');
      signal?.throwIfAborted();
      this.#counts[kind] += 1;
      try {
        const run = this.#client.execute(query, [...params], {
          prepare: kind !== 'schema',
          consistency: kind === 'schema' ? types.consistencies.all : this.#cl,
          // Reads, writes with TTL and deletes of our own cells can be repeated safely, so
          // the driver may retry them on another node when one dies mid-request; an LWT not.
          isIdempotent: !lwt,
          ...(lwt ? { serialConsistency: this.#serial } : {}),
        });
        return await (signal ? raceAbort(run, signal) : run);
      } catch (err) {
        if (signal?.aborted) throw signal.reason;
        if (attempt < RETRY_ATTEMPTS && !this.#closed && retryable(err, !lwt)) {
          await sleep(50 * attempt, signal);
          continue;
        }
        throw unavailable('cassandra', 'query', err);
      }
    }
  }

  /**
   * Run writes to several partitions as ONE unlogged batch: one round trip from here, the
   * coordinator applies each (no atomicity across partitions, none needed: every write is
   * a TTL'd cell that may land alone). Idempotent writes only; retried like {@link exec}.
   */
  async batch(
    queries: ReadonlyArray<{ readonly query: string; readonly params: readonly unknown[] }>,
    signal?: AbortSignal,
  ): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      if (this.#closed) throw new BackendUnavailableError('cassandra', 'the cassandra backend is closed');
      signal?.throwIfAborted();
      this.#counts.write += 1;
      try {
        const run = this.#client.batch(
          queries.map((q) => ({ query: q.query, params: [...q.params] })),
          { prepare: true, logged: false, consistency: this.#cl, isIdempotent: true },
        );
        await (signal ? raceAbort(run, signal) : run);
        return;
      } catch (err) {
        if (signal?.aborted) throw signal.reason;
        if (attempt < RETRY_ATTEMPTS && !this.#closed && retryable(err, true)) {
          await sleep(50 * attempt, signal);
          continue;
        }
        throw unavailable('cassandra', 'batch', err);
      }
    }
  }

  /** Close the client (bounded: a driver still connecting somewhere does not hold us up). */
  close(): Promise<void> {
    this.#closed = true;
    this.#closing ??= withDeadline(this.#client.shutdown(), { timeoutMs: SHUTDOWN_BOUND_MS })
      .catch(() => undefined)
      .then(this.#afterShutdown);
    return this.#closing;
  }
}

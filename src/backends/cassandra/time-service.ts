/**
 * The time service (docs/backends/cassandra.md, "The time service"): a never-decreasing microsecond time shared by every
 * client, used to name queue entries so that the queue sorts by arrival even when the
 * clients' clocks disagree.
 *
 * The shared state is one cell whose value is written with an explicit write timestamp
 * equal to the value. Cassandra keeps the cell with the highest write timestamp (last write
 * wins), so a smaller time can never replace a larger one: the cell is a max-register and
 * needs neither a read-before-write nor a lightweight transaction. Every backend instance
 * (the replicas) pushes its local clock into it every `refreshMs` and reads back
 * the maximum; between refreshes it extrapolates from the last read with the monotonic
 * clock, so `now()` costs nothing and never goes backwards. On the real clock all the
 * backends of one process share one service (`sharedTimeService`).
 *
 * Bound: a client whose clock lags the fastest feeder by up to Δ still names its entries
 * no more than about 2·refreshMs (plus network delay) behind the fastest feeder's clock,
 * so arrival order is kept between entries further apart than that.
 */
import { performance } from 'node:perf_hooks';

/** A wall clock in microseconds since the epoch; injectable so tests can skew it. */
export type MicroClock = () => bigint;

/** The real wall clock in µs. */
export const systemMicroClock: MicroClock = () => BigInt(Date.now()) * 1000n;

/** The storage the service needs: a blind max-write and a read, both at the backend's consistency. */
export interface TimeCell {
  push(micros: bigint): Promise<void>;
  read(): Promise<bigint | undefined>;
}

/** One process's view of the shared time. */
export class TimeService {
  readonly #cell: TimeCell;
  readonly #clock: MicroClock;
  readonly #refreshMs: number;
  /** Shared value last read, and the monotonic ms at which it was read. */
  #base = 0n;
  #baseAt = 0;
  #last = 0n;
  #timer: NodeJS.Timeout | undefined;
  #inFlight: Promise<void> | undefined;
  #closed = false;
  /** The last refresh error (a refresh failure is not fatal: extrapolation continues). */
  lastError: unknown;

  constructor(cell: TimeCell, clock: MicroClock, refreshMs: number) {
    this.#cell = cell;
    this.#clock = clock;
    this.#refreshMs = refreshMs;
  }

  /** First refresh (awaited, so the first queue entry already sees the shared time), then the timer. */
  async start(): Promise<void> {
    await this.refresh();
    this.#schedule();
  }

  #schedule(): void {
    if (this.#closed) return;
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      // A failed refresh must never surface from a timer: keep it for diagnostics only.
      this.refresh()
        .catch((err: unknown) => {
          this.lastError = err;
        })
        .finally(() => this.#schedule());
    }, this.#refreshMs);
    this.#timer.unref();
  }

  /** Push the local clock into the shared cell and read the maximum back. */
  refresh(): Promise<void> {
    if (this.#inFlight) return this.#inFlight;
    const run = async (): Promise<void> => {
      await this.#cell.push(this.#clock());
      const sentAt = performance.now();
      const shared = await this.#cell.read();
      if (shared !== undefined) {
        // Credit the read with the time it was sent, not received: the value can only be older.
        const current = this.#base + BigInt(Math.floor((sentAt - this.#baseAt) * 1000));
        if (this.#baseAt === 0 || shared > current) {
          this.#base = shared;
          this.#baseAt = sentAt;
        }
      }
    };
    this.#inFlight = run().finally(() => {
      this.#inFlight = undefined;
    });
    return this.#inFlight;
  }

  /** The shared time in µs: max(local clock, shared value + elapsed, previous + 1). */
  now(): bigint {
    let t = this.#clock();
    if (this.#baseAt !== 0) {
      const extrapolated = this.#base + BigInt(Math.floor((performance.now() - this.#baseAt) * 1000));
      if (extrapolated > t) t = extrapolated;
    }
    if (t <= this.#last) t = this.#last + 1n;
    this.#last = t;
    return t;
  }

  /** Stop the refresh timer. */
  close(): void {
    this.#closed = true;
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = undefined;
  }
}

/** One process-wide time service, shared by every backend on the same cluster. */
interface Shared {
  readonly service: TimeService;
  readonly cells: Set<TimeCell>;
  started: Promise<void> | undefined;
}

const shared = new Map<string, Shared>();

/** A backend's use of a time service; `release()` when the backend closes. */
export interface TimeServiceLease {
  readonly service: TimeService;
  /** Resolves after the service's first refresh (the first call starts it). */
  start(): Promise<void>;
  release(): void;
}

/** A time service of one backend's own (an injected clock: tests skew it). */
export function ownTimeService(cell: TimeCell, clock: MicroClock, refreshMs: number): TimeServiceLease {
  const service = new TimeService(cell, clock, refreshMs);
  let started: Promise<void> | undefined;
  return { service, start: () => (started ??= service.start()), release: () => service.close() };
}

/**
 * The time service of this process for `key` (one cluster and keyspace), on the real
 * clock: one feeder per process is one replica, however many lockers it opens.
 * It talks through any of its users' cells, and stops with the last user.
 */
export function sharedTimeService(key: string, refreshMs: number, cell: TimeCell): TimeServiceLease {
  const k = `${key}@${refreshMs}`;
  let s = shared.get(k);
  if (!s) {
    const cells = new Set<TimeCell>();
    const pick = (): TimeCell => {
      for (const c of cells) return c;
      throw new Error('the time service has no open session');
    };
    s = {
      service: new TimeService({ push: (m) => pick().push(m), read: () => pick().read() }, systemMicroClock, refreshMs),
      cells,
      started: undefined,
    };
    shared.set(k, s);
  }
  const mine = s;
  mine.cells.add(cell);
  const forget = (): void => {
    mine.service.close();
    if (shared.get(k) === mine) shared.delete(k);
  };
  return {
    service: mine.service,
    start: () => {
      if (!mine.started) {
        const started = mine.service.start();
        // A first refresh that failed is not cached: the next backend starts afresh.
        started.catch(forget);
        mine.started = started;
      }
      return mine.started;
    },
    release: () => {
      mine.cells.delete(cell);
      if (mine.cells.size === 0) forget();
    },
  };
}

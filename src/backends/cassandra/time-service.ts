/**
 * Seed 000 §5.4, the time service: a never-decreasing microsecond time shared by every
 * client, used to name queue entries so that the queue sorts by arrival even when the
 * clients' clocks disagree.
 *
 * The shared state is one cell whose value is written with an explicit write timestamp
 * equal to the value. Cassandra keeps the cell with the highest write timestamp (last write
 * wins), so a smaller time can never replace a larger one: the cell is a max-register and
 * needs neither a read-before-write nor a lightweight transaction. Every backend instance
 * (the seed's "replicas") pushes its local clock into it every `refreshMs` and reads back
 * the maximum; between refreshes it extrapolates from the last read with the monotonic
 * clock, so `now()` costs nothing and never goes backwards.
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

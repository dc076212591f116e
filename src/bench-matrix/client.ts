/**
 * What the benchmark matrix measures: a "contender" makes independent clients of one lock
 * library, and each client acquires and releases locks by name. locksmith's `Locker` is one
 * implementation ({@link lockerContender}); the per-engine scripts in `bench/` write one per
 * peer library (node-redlock, redis-semaphore, Curator, ...), so every library runs the same
 * rows in the same process. See docs/benchmarks.md.
 */
import type { Locker } from '../locker.js';
import type { LockerOptions } from '../options.js';

/** A held lock of any library. */
export interface BenchHold {
  release(): Promise<void>;
  /** When the lock was held, on the machine's monotonic clock (`monoMs`), if it was held in another process. */
  readonly heldAtMs?: number;
}

/** Per-acquisition options a client receives from the matrix. */
export interface BenchAcquireOptions {
  /**
   * Aborted when the matrix no longer wants the lock (the end of a hot-lock row, the drain
   * budget of the waiters row). A client that cannot abort may ignore it: the rows then wait
   * for its grant and drop it.
   */
  readonly signal?: AbortSignal;
  /** Call once when this acquisition starts waiting (only clients of a contender with `reportsQueued`). */
  readonly onQueued?: () => void;
}

/** One independent client (its own connections or session) of a lock library. */
export interface BenchClient {
  /** Wait until the lock is held (no timeout of its own), or reject when `signal` aborts. */
  acquire(lockId: string, options?: BenchAcquireOptions): Promise<BenchHold>;
  /** Close the connections; outstanding acquisitions may reject or be left behind. */
  close(): Promise<void>;
  /**
   * One plain round trip to the server this client's locks live on, over the connection its
   * releases use (Redis: `PING`): the reference the hand-off row divides `release()` by.
   * Clients that cannot send one leave it out (the row then prints n/a).
   */
  roundTrip?(): Promise<void>;
}

/** A lock library under test: a name and a way to make clients. */
export interface Contender {
  /** The name in tables and JSON lines (`locksmith (fair)`, `redis-semaphore`, ...). */
  readonly name: string;
  /** True for a library locksmith is compared with; ratios are printed against the best peer. */
  readonly peer?: boolean;
  /** Fair (FIFO) mode, for the output; a contender without the notion leaves it unset. */
  readonly fair?: boolean;
  /**
   * True when clients call `onQueued` as an acquisition starts waiting. Otherwise the hand-off
   * row assumes the waiter queued after a fixed settle delay and says so in its output.
   */
  readonly reportsQueued: boolean;
  /**
   * Rows a library cannot run in reasonable time (a process per acquisition): hot-lock rows
   * above `maxContenders`, and the keys and waiters rows when false. Skipped rows print n/a.
   */
  readonly limits?: { readonly maxContenders?: number; readonly keys?: boolean; readonly waiters?: boolean };
  /** A new client. */
  client(): BenchClient | Promise<BenchClient>;
  /**
   * A new client in a second process (`forkedContender`, remote.ts): the hand-off row then
   * also measures a waiter in another process.
   */
  readonly remote?: () => Promise<BenchClient>;
}

/** Makes a fresh locksmith client of the backend under test. */
export type LockerFactory = (options?: Partial<LockerOptions>) => Locker;

/** What a row accepts: a contender, or a locksmith `Locker` factory (then the row's `fair` applies). */
export type BenchSource = Contender | LockerFactory;

/**
 * One plain round trip over the connection `locker`'s releases use (a script that builds the
 * locker's backend over its own driver client can send it; see {@link BenchClient.roundTrip}).
 */
export type LockerRoundTrip = (locker: Locker) => Promise<unknown>;

/** A client over one `Locker`: `onQueued` comes from the locker's `waiting` event. */
function lockerClient(locker: Locker, fair: boolean, roundTrip?: LockerRoundTrip): BenchClient {
  // Waiting events name the lock, not the call: callbacks of one lockId are served in order,
  // which is exact for one waiter and right in number for many (all the rows need).
  const queued = new Map<string, (() => void)[]>();
  locker.on('waiting', (e) => queued.get(e.lockId)?.shift()?.());
  const forget = (lockId: string, cb: () => void): void => {
    const list = queued.get(lockId);
    const i = list?.indexOf(cb) ?? -1;
    if (list && i >= 0) list.splice(i, 1);
    if (list?.length === 0) queued.delete(lockId);
  };
  return {
    async acquire(lockId, o = {}) {
      const cb = o.onQueued;
      if (cb) queued.set(lockId, [...(queued.get(lockId) ?? []), cb]);
      try {
        // No timeoutMs: `lock()` then waits without a timer of its own, as a plain call does.
        const lock = await locker.lock(lockId, o.signal ? { fair, signal: o.signal } : { fair });
        return { release: () => lock.release() };
      } finally {
        if (cb) forget(lockId, cb);
      }
    },
    close: () => locker.close(),
    ...(roundTrip ? { roundTrip: async () => void (await roundTrip(locker)) } : {}),
  };
}

/** locksmith as a contender: each client is a new `Locker` from `make` (with `roundTrip`, its clients can send one). */
export function lockerContender(name: string, make: LockerFactory, fair = false, roundTrip?: LockerRoundTrip): Contender {
  return { name, fair, reportsQueued: true, client: () => lockerClient(make(), fair, roundTrip) };
}

/** The contender a row runs: `source` itself, or locksmith over the factory. */
export function contenderOf(source: BenchSource, fair = false): Contender {
  return typeof source === 'function' ? lockerContender(fair ? 'locksmith (fair)' : 'locksmith', source, fair) : source;
}

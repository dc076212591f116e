/**
 * Local wake-ups of the waiters of one SQL backend. A waiter sleeps until a change of its
 * lock id is heard of (a NOTIFY, or a commit of this very backend) or until a bounded,
 * jittered timeout; the timeout bounds what a missed notification costs, and on MySQL, which
 * has no notifications, it is the poll (docs/backends/mysql.md).
 *
 * A change wakes only the local sleeper first in the queue (and those without a place): if
 * it is granted, its leaving the queue is itself a change that wakes the next one, so a
 * release costs one attempt per process instead of one per waiter. A change heard while a
 * waiter's attempt was in flight makes its next wait return at once (a generation count
 * per lock id), so no wake-up is lost between an attempt and its sleep.
 */

interface Sleeper {
  /** Queue position (smaller first); undefined for a waiter without one. */
  readonly order: bigint | undefined;
  readonly wake: () => void;
}

/** Generations kept at most for this many ids; the map is then cleared (a spurious retry at worst). */
const MAX_GENERATIONS = 10_000;

/** The sleepers of one backend, by lock id. */
export class Wakeups {
  readonly #byId = new Map<string, Set<Sleeper>>();
  readonly #generation = new Map<string, number>();

  /** The change count of `lockId`: capture it before an attempt, hand it to {@link wait}. */
  generation(lockId: string): number {
    return this.#generation.get(lockId) ?? 0;
  }

  /**
   * Sleep until a change of `lockId` reaches this sleeper, `ms` pass (jittered by ±25 %), or
   * `signal` aborts. Returns at once when `lockId` changed since generation `seen`. A sleeper
   * behind others of this process sleeps longer (`ms` times its rank, at most `maxMs`): the
   * first one is woken by the changes that matter, so the poll of the rest costs little.
   */
  async wait(lockId: string, order: bigint | undefined, seen: number, ms: number, signal: AbortSignal, maxMs = ms): Promise<void> {
    signal.throwIfAborted();
    if (this.generation(lockId) !== seen) return;
    let set = this.#byId.get(lockId);
    if (!set) {
      set = new Set();
      this.#byId.set(lockId, set);
    }
    let rank = 0;
    if (order !== undefined) for (const s of set) if (s.order !== undefined && s.order < order) rank += 1;
    const sleepMs = Math.min(Math.max(ms, maxMs), ms * (1 + rank));
    await this.#sleep(lockId, set, order, sleepMs, signal);
  }

  #sleep(lockId: string, set: Set<Sleeper>, order: bigint | undefined, ms: number, signal: AbortSignal): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      const done = (): void => {
        clearTimeout(timer);
        signal.removeEventListener('abort', onAbort);
        set.delete(sleeper);
        if (set.size === 0 && this.#byId.get(lockId) === set) this.#byId.delete(lockId);
      };
      const sleeper: Sleeper = {
        order,
        wake: () => {
          done();
          resolve();
        },
      };
      const onAbort = (): void => {
        done();
        reject(signal.reason);
      };
      // Ref'd: a caller awaiting a lock keeps the process alive (docs/architecture.md).
      const timer = setTimeout(sleeper.wake, Math.max(1, Math.round(ms * (0.75 + Math.random() * 0.5))));
      set.add(sleeper);
      signal.addEventListener('abort', onAbort, { once: true });
    });
  }

  /** `lockId` changed: wake its first local sleeper in queue order, and any without a place. */
  wake(lockId: string): void {
    if (this.#generation.size >= MAX_GENERATIONS) this.#generation.clear();
    this.#generation.set(lockId, this.generation(lockId) + 1);
    const set = this.#byId.get(lockId);
    if (!set) return;
    let first: Sleeper | undefined;
    for (const s of [...set]) {
      if (s.order === undefined) s.wake();
      else if (first?.order === undefined || s.order < first.order) first = s;
    }
    first?.wake();
  }

  /** Wake everyone (a notification may have been missed: reconnect, close). */
  wakeAll(): void {
    this.#generation.clear();
    for (const set of [...this.#byId.values()]) for (const s of [...set]) s.wake();
  }
}

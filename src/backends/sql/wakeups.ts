/**
 * Local wake-ups of the waiters of one SQL backend: a waiter sleeps until a change of its
 * lock id is heard of (a NOTIFY, or a commit of this very backend) or until a bounded,
 * jittered timeout, whichever comes first. The timeout bounds what a missed notification
 * costs; on MySQL, which has no notifications, it is the poll (docs/backends/mysql.md).
 */

interface Sleeper {
  readonly wake: () => void;
}

/** The sleepers of one backend, by lock id. */
export class Wakeups {
  readonly #byId = new Map<string, Set<Sleeper>>();

  /** Sleep until `wake(lockId)`, `wakeAll()`, `ms` (jittered by ±25 %), or `signal` aborts. */
  wait(lockId: string, ms: number, signal: AbortSignal): Promise<void> {
    signal.throwIfAborted();
    return new Promise<void>((resolve, reject) => {
      let set = this.#byId.get(lockId);
      if (!set) {
        set = new Set();
        this.#byId.set(lockId, set);
      }
      const done = (): void => {
        clearTimeout(timer);
        signal.removeEventListener('abort', onAbort);
        set.delete(sleeper);
        if (set.size === 0 && this.#byId.get(lockId) === set) this.#byId.delete(lockId);
      };
      const sleeper: Sleeper = {
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

  /** Wake every sleeper of `lockId`. */
  wake(lockId: string): void {
    const set = this.#byId.get(lockId);
    if (set) for (const s of [...set]) s.wake();
  }

  /** Wake everyone (a notification may have been missed: reconnect, close). */
  wakeAll(): void {
    for (const set of [...this.#byId.values()]) for (const s of [...set]) s.wake();
  }
}

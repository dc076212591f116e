/**
 * What wakes `election.observe()` between two looks at the election's lock
 * (docs/recipes/election.md, "Observing"): the backend's own lock watch where it has one
 * (ZooKeeper), its change feed (`Backend.changes`: file://, Redis, etcd, PostgreSQL with
 * notifications) otherwise, and a timer in every case — the poll where nothing notifies, a
 * slow safety net where something does.
 */
import { sleep } from './util/time.js';

/** Without a notification, an observer that is notified still looks this often (ms). */
export const WATCH_FALLBACK_MS = 30_000;

/** Margin past a lease end before the observer looks again (ms). */
const LEASE_END_MARGIN_MS = 5;

/** How soon the observer looks again at a leader whose lease end has passed (ms). */
const RECHECK_MS = 1_000;

/**
 * An optional backend hook (ZooKeeper has it): resolve once the lock's holders may have
 * changed, or after `maxMs` at the latest; reject with `signal.reason` when it aborts.
 */
interface LockWatcher {
  watchLock(lockId: string, maxMs: number, signal: AbortSignal): Promise<void>;
}

/** The `Backend.changes` seam method, as the election sees it (structural: no import cycle). */
interface ChangeFeeder {
  changes(req: { readonly prefix: string; readonly signal: AbortSignal }): AsyncIterable<string | null>;
}

function isLockWatcher(backend: object): backend is LockWatcher {
  return typeof (backend as Partial<LockWatcher>).watchLock === 'function';
}

function isChangeFeeder(backend: object): backend is ChangeFeeder {
  return typeof (backend as Partial<ChangeFeeder>).changes === 'function';
}

/** One observer's source of wake-ups; {@link arm} before each look, {@link wait} after it. */
export interface Waker {
  /** Start listening for the next change (call it before looking, so none is missed). */
  arm(): Promise<void>;
  /**
   * Resolve when the armed change comes or the timer for this round runs out; reject with
   * `signal.reason` when it aborts. `leaseEndsInMs`: the lease end of the current leader,
   * when the backend tells it (an expiry that writes nothing is still seen at that moment).
   */
  wait(armed: Promise<void>, leaseEndsInMs: number | undefined): Promise<void>;
}

/** The waker for `lockId` on `backend`, alive until `signal` aborts. */
export function wakerFor(backend: object, lockId: string, everyMs: number, signal: AbortSignal): Waker {
  if (isLockWatcher(backend)) {
    return {
      arm: () => {
        const p = backend.watchLock(lockId, WATCH_FALLBACK_MS, signal);
        p.catch(() => undefined);
        return p;
      },
      wait: (armed) => armed,
    };
  }
  if (isChangeFeeder(backend)) return new FeedWaker(backend, lockId, everyMs, signal);
  return { arm: () => Promise.resolve(), wait: () => sleep(everyMs, signal) };
}

/**
 * Wakes on the change feed's `null` (subscribed, or subscribed again: anything may have
 * changed) and on every change of the lock id. Until the first `null`, or once the feed has
 * ended (a failure the observer need not see), it polls every `everyMs` as before.
 */
class FeedWaker implements Waker {
  #subscribed = false;
  #fire: (() => void) | undefined;
  readonly #everyMs: number;
  readonly #signal: AbortSignal;

  constructor(backend: ChangeFeeder, lockId: string, everyMs: number, signal: AbortSignal) {
    this.#everyMs = everyMs;
    this.#signal = signal;
    void this.#pump(backend.changes({ prefix: lockId, signal }), lockId);
  }

  async #pump(feed: AsyncIterable<string | null>, lockId: string): Promise<void> {
    try {
      for await (const id of feed) {
        if (id === null) this.#subscribed = true;
        // The prefix also matches longer ids (`leader` and `leader-2`).
        else if (id !== lockId) continue;
        this.#wake();
      }
    } catch {
      // The feed failed: the observer polls again, which is all it did without one.
    }
    this.#subscribed = false;
    this.#wake();
  }

  #wake(): void {
    const fire = this.#fire;
    this.#fire = undefined;
    fire?.();
  }

  arm(): Promise<void> {
    return new Promise<void>((resolve) => (this.#fire = resolve));
  }

  async wait(armed: Promise<void>, leaseEndsInMs: number | undefined): Promise<void> {
    this.#signal.throwIfAborted();
    let ms = this.#everyMs;
    if (this.#subscribed) {
      // A lease that runs out writes nothing a feed could announce on some engines (Redis,
      // file://): look again at its end, as the notified watch does, and no more often than
      // every second while an ended lease is still shown (a clock apart, a lock delay).
      let leaseEnd = Infinity;
      if (leaseEndsInMs !== undefined) leaseEnd = leaseEndsInMs > 0 ? leaseEndsInMs + LEASE_END_MARGIN_MS : RECHECK_MS;
      ms = Math.min(WATCH_FALLBACK_MS, leaseEnd);
    }
    const timer = new AbortController();
    const stop = (): void => timer.abort(this.#signal.reason);
    this.#signal.addEventListener('abort', stop, { once: true });
    const nap = sleep(ms, timer.signal);
    // Ended by the `finally` when the change comes first: that rejection is no failure.
    nap.catch(() => undefined);
    try {
      await Promise.race([armed, nap]);
      this.#signal.throwIfAborted();
    } finally {
      this.#signal.removeEventListener('abort', stop);
      timer.abort();
    }
  }
}

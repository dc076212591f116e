/**
 * Local wake-ups of the waiters of one SQL backend. A waiter sleeps until the change that
 * makes it the first waiter is heard of (a NOTIFY, or a commit of this very backend), or
 * until a bounded, jittered timeout; the timeout bounds what a missed notification costs,
 * and on MySQL, which has no notifications, it is the poll (docs/backends/mysql.md).
 *
 * Every change names the first waiter as the changing transaction saw it, and only that one
 * is woken: if it is granted, its leaving the queue is itself a change that names the next
 * one, so a release costs one attempt, not one per waiter. A change naming a waiter whose
 * attempt is in flight is remembered, and its next wait returns at once: no wake-up is lost
 * between an attempt and its sleep.
 *
 * Backends of one process on the same database and tables share one registry
 * ({@link sharedWakeups}): a commit by any of them wakes the first waiter of another at once,
 * which on MySQL is the difference between a hand-off and a poll.
 */
import { pollSleep } from '../kit.js';

interface Sleeper {
  /** Queue position; undefined for a waiter without one (woken by every change). */
  readonly order: bigint | undefined;
  readonly wake: () => void;
}

/** Remembered heads are kept for at most this many ids; the map is then cleared (a poll at worst). */
const MAX_REMEMBERED = 10_000;

/** The sleepers of one backend, by lock id. */
export class Wakeups {
  readonly #byId = new Map<string, Set<Sleeper>>();
  /** The head a change named while it was not asleep, by lock id. */
  readonly #named = new Map<string, bigint>();

  /**
   * Sleep until a change names this sleeper (`order`) as the first waiter of `lockId`, `ms`
   * pass (jittered by ±25 %), or `signal` aborts. Returns at once when such a change came
   * while it was awake. Resolves true when woken by a change, false when the time ran out.
   */
  async wait(lockId: string, order: bigint | undefined, ms: number, signal: AbortSignal): Promise<boolean> {
    signal.throwIfAborted();
    if (order !== undefined && this.#named.get(lockId) === order) {
      this.#named.delete(lockId);
      return true;
    }
    let set = this.#byId.get(lockId);
    if (!set) {
      set = new Set();
      this.#byId.set(lockId, set);
    }
    return this.#sleep(lockId, set, order, ms, signal);
  }

  #sleep(lockId: string, set: Set<Sleeper>, order: bigint | undefined, ms: number, signal: AbortSignal): Promise<boolean> {
    // Dropped from the set as the sleep ends, synchronously: a change that comes after a
    // wake-up then finds nobody and is remembered for this waiter's next wait.
    const poll = pollSleep(ms, signal, {
      jitter: 0.25,
      onSettled: () => {
        set.delete(sleeper);
        if (set.size === 0 && this.#byId.get(lockId) === set) this.#byId.delete(lockId);
      },
    });
    const sleeper: Sleeper = { order, wake: poll.wake };
    set.add(sleeper);
    return poll.woken;
  }

  /** `lockId` changed and `head` waits first (undefined: nobody): wake it, and sleepers without a place. */
  wake(lockId: string, head: bigint | undefined): void {
    const set = this.#byId.get(lockId);
    let woken = false;
    for (const s of set ? [...set] : []) {
      if (s.order === undefined) s.wake();
      else if (s.order === head) {
        s.wake();
        woken = true;
      }
    }
    if (woken || head === undefined) return;
    if (this.#named.size >= MAX_REMEMBERED) this.#named.clear();
    this.#named.set(lockId, head);
  }

  /** Wake everyone (a notification may have been missed: reconnect, close). */
  wakeAll(): void {
    for (const set of [...this.#byId.values()]) for (const s of [...set]) s.wake();
  }
}

/** A first waiter sleeps locally this long before it arms a server-side bell: hand-offs inside a process (hot locks) never pay for one. */
export const BELL_GRACE_MS = 5;

/** An engine's server-side wait (`SqlEngine.bell`, types.ts). */
type Bell = (lockId: string, seq: bigint, ms: number, signal: AbortSignal) => Promise<boolean | undefined>;

/**
 * A first waiter's sleep where the engine can wake it across processes: {@link BELL_GRACE_MS}
 * on the local registry alone, then the local registry and the engine's bell together, the
 * first to wake wins (the other is abandoned). Without a bell, the local registry alone.
 * Resolves true when woken, false when `ms` passed.
 */
export async function waitWithBell(
  wakeups: Wakeups,
  bell: Bell | undefined,
  lockId: string,
  seq: bigint,
  ms: number,
  signal: AbortSignal,
): Promise<boolean> {
  if (!bell) return wakeups.wait(lockId, seq, ms, signal);
  const grace = Math.min(BELL_GRACE_MS, ms);
  if (await wakeups.wait(lockId, seq, grace, signal)) return true;
  const rest = ms - grace;
  if (rest <= 0) return false;
  const ctl = new AbortController();
  const stop = (): void => ctl.abort();
  signal.addEventListener('abort', stop, { once: true });
  try {
    const local = wakeups.wait(lockId, seq, rest, ctl.signal).catch(() => false);
    const remote = bell(lockId, seq, rest, ctl.signal).then(
      (r) => r ?? local,
      () => local,
    );
    const woken = await Promise.race([local, remote]);
    signal.throwIfAborted();
    return woken;
  } finally {
    signal.removeEventListener('abort', stop);
    ctl.abort();
  }
}

/** Registries shared by scope (database and tables), with the number of backends using each. */
const shared = new Map<string, { readonly wakeups: Wakeups; users: number }>();

/**
 * The registry of `scope`, shared by every backend of this process that names the same
 * database and tables; `release` when the backend closes. Only liveness depends on it: a
 * wake-up makes a waiter look again sooner, the database decides.
 */
export function sharedWakeups(scope: string): { readonly wakeups: Wakeups; release(): void } {
  let entry = shared.get(scope);
  if (!entry) {
    entry = { wakeups: new Wakeups(), users: 0 };
    shared.set(scope, entry);
  }
  entry.users += 1;
  const mine = entry;
  let released = false;
  return {
    wakeups: mine.wakeups,
    release: () => {
      if (released) return;
      released = true;
      mine.users -= 1;
      if (mine.users === 0 && shared.get(scope) === mine) shared.delete(scope);
    },
  };
}

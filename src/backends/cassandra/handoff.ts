/**
 * Hand-off without waiting for a poll, where the releaser and the waiter can learn of each
 * other: every fair-lock waiter of this process is listed here, per cluster, keyspace and
 * lockId, in queue order. A release wakes the first local waiter at once (it is usually the
 * next in line, already holding its main cell and its token: see fair.ts); a grant wakes
 * the one behind it so that it prepares during the new holder's critical section.
 *
 * Only liveness depends on this: a wake-up makes a waiter look again sooner, the database
 * decides. Waiters of other processes, and a lost wake-up, are covered by the polls of
 * `pollInterval`. See docs/backends/cassandra.md, "The fair algorithm", its paragraph on waiting.
 */
import { jitter, pollSleep } from '../kit.js';
import { entryOwner } from './tables.js';

/** Why a waiter was woken: its next attempt chooses its first statement by it. */
export type WakeReason = 'released' | 'granted' | 'left';

/** One waiting acquisition of this process. */
export class LocalWaiter {
  /** The queue entry: local waiters of one lock sort by it, as the queue does. */
  readonly entry: string;
  readonly #key: string;
  /** Set by a wake-up until the next attempt takes it. */
  #hint: WakeReason | undefined;
  #wake: ((reason: WakeReason) => void) | undefined;

  constructor(key: string, entry: string) {
    this.#key = key;
    this.entry = entry;
  }

  /** The registry key (scope and lockId). */
  get key(): string {
    return this.#key;
  }

  /** The reason of the last wake-up, once (the attempt that reads it consumes it). */
  takeHint(): WakeReason | undefined {
    const h = this.#hint;
    this.#hint = undefined;
    return h;
  }

  /** Wake it now, or make its next wait return at once. */
  wake(reason: WakeReason): void {
    this.#hint = reason;
    this.#wake?.(reason);
  }

  /**
   * Sleep up to `ms` (ref'd: a caller awaits it), ending early on a wake-up, and with
   * `signal.reason` when `signal` aborts. Returns at once when a wake-up came meanwhile.
   * Resolves true when a wake-up ended it, false when the time ran out.
   */
  async sleep(ms: number, signal: AbortSignal): Promise<boolean> {
    signal.throwIfAborted();
    if (this.#hint !== undefined) return true;
    const poll = pollSleep(ms, signal, { onSettled: () => (this.#wake = undefined) });
    this.#wake = poll.wake;
    return poll.woken;
  }
}

/** The process-wide list of waiters (and holders), per scope and lockId, in entry order. */
class LocalQueues {
  readonly #queues = new Map<string, LocalWaiter[]>();
  /** The owner holding each lock in this process: its release will wake our waiters. */
  readonly #holders = new Map<string, string>();

  /** Add a waiter (kept sorted by entry; new entries are almost always the largest). */
  add(waiter: LocalWaiter): void {
    let q = this.#queues.get(waiter.key);
    if (!q) {
      q = [];
      this.#queues.set(waiter.key, q);
    }
    let i = q.length;
    while (i > 0 && (q[i - 1]?.entry ?? '') > waiter.entry) i -= 1;
    q.splice(i, 0, waiter);
  }

  /** Remove a waiter (granted or gone); false when it was not listed. */
  remove(waiter: LocalWaiter): boolean {
    const q = this.#queues.get(waiter.key);
    const i = q ? q.indexOf(waiter) : -1;
    if (!q || i < 0) return false;
    q.splice(i, 1);
    if (q.length === 0) this.#queues.delete(waiter.key);
    return true;
  }

  /**
   * Remove every waiter of `owner` on `key` (an attempt whose ticket never reached the
   * core); true when one of them was first, so the next must be told.
   */
  removeOwner(key: string, owner: string): boolean {
    const q = this.#queues.get(key);
    if (!q) return false;
    const first = q[0];
    const kept = q.filter((w) => entryOwner(w.entry) !== owner);
    if (kept.length === 0) this.#queues.delete(key);
    else this.#queues.set(key, kept);
    return first !== undefined && kept[0] !== first;
  }

  /** Whether no local waiter of the same lock sorts before this one. */
  isFirst(waiter: LocalWaiter): boolean {
    return this.#queues.get(waiter.key)?.[0] === waiter;
  }

  /** Wake the first local waiter of `key`, if any. */
  wakeFirst(key: string, reason: WakeReason): void {
    this.#queues.get(key)?.[0]?.wake(reason);
  }

  /** `owner` of this process holds the lock of `key`. */
  hold(key: string, owner: string): void {
    this.#holders.set(key, owner);
  }

  /** `owner` let go of the lock of `key`. */
  unhold(key: string, owner: string): void {
    if (this.#holders.get(key) === owner) this.#holders.delete(key);
  }

  /** Whether `owner` holds the lock of `key` in this process (so its release wakes us). */
  holdsHere(key: string, owner: string | undefined): boolean {
    return owner !== undefined && this.#holders.get(key) === owner;
  }
}

/** The one registry of this process. */
export const localQueues = new LocalQueues();

/** The registry key of one lock in one scope. */
export function waiterKey(scope: string, lockId: string): string {
  return `${scope}\u0000${lockId}`;
}

/** A waiter that a local waiter or holder will wake polls only this often (a lost wake-up costs at most this). */
export const FOLLOWER_POLL_MS = 1_000;
/** The longest sleep of a waiter further back in the queue. */
export const IDLE_POLL_CAP_MS = 1_000;

/** What the poll interval depends on. */
export interface PollState {
  /** The base interval (the URL's `pollMs`). */
  readonly pollMs: number;
  /** Entries ahead of it at the last look (capped); 0 or 1: it is next, or first. */
  readonly ahead: number;
  /** A local waiter of the same lock is ahead of it, or a local holder: either wakes it. */
  readonly follower: boolean;
  /** How long the holder it waits behind has held, as far as it has seen (ms). */
  readonly heldForMs: number;
  /** The lock's recent time per grant, as seen from the fencing counter (ms; 0: unknown). */
  readonly perGrantMs: number;
}

const clamp = (x: number, lo: number, hi: number): number => Math.min(hi, Math.max(lo, x));

/**
 * How long a waiter sleeps before it looks again, jittered ×0.5–1.5 so that waiters do not
 * poll in step (see docs/backends/cassandra.md, "The fair algorithm", its paragraph on waiting):
 * - one that a local waiter or holder will wake: about once a second, and no reads;
 * - the next in line (or the first): every `pollMs`, slowing to 10 × `pollMs` as the
 *   holder's hold grows long (a tenth of the hold so far): a long hold pays few reads,
 *   a short one a short hand-off;
 * - further back: about half the time the grants ahead of it should take, from the rate
 *   at which the fencing counter moves, between `pollMs` and 1 s.
 */
export function pollInterval(s: PollState): number {
  let base: number;
  if (s.follower) base = Math.max(FOLLOWER_POLL_MS, s.pollMs);
  else if (s.ahead <= 1) base = clamp(s.heldForMs / 10, s.pollMs, 10 * s.pollMs);
  else if (s.perGrantMs <= 0) base = s.pollMs * Math.min(s.ahead, 8);
  else base = clamp(((s.ahead - 1) * s.perGrantMs) / 2, s.pollMs, IDLE_POLL_CAP_MS);
  return jitter(base, 0.5);
}

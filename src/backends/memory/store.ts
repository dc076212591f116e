/**
 * The lock table behind `memory://name`: holders and queued waiters per lock id, expiry
 * against the monotonic clock, and wake-ups that go only to the waiters a change lets in.
 * See docs/backends/memory.md.
 */
import { performance } from 'node:perf_hooks';
import {
  exclusiveKind as exclusive,
  kindsCompatible as compatible,
  permitsInUse,
  queueAllows,
  type KindAsk,
  type LockKind,
  type Weighed,
} from '../kit.js';

/** A waiter that stops re-attempting after being woken is dropped after this long. */
export const WAITER_GRACE_MS = 1_000;

/** One hold (re-entered holds of one owner share it, with a count). */
export interface Holder {
  readonly ownerId: string;
  readonly kind: LockKind;
  readonly token: bigint;
  /** Semaphore size this hold was taken under (1 for other kinds). */
  readonly permits: number;
  /** Permits this hold takes (1 but for a weighted semaphore hold). */
  readonly weight: number;
  count: number;
  /** After this the lease is over: extend fails. */
  expiresAt: number;
  /** Until this the holder still blocks others (expiresAt + lockDelay); release clears it. */
  blocksUntil: number;
  readonly lockDelayMs: number;
  /** The holder's encoded identity, stored verbatim (docs/observability.md). */
  readonly identity: string;
  /** When the hold began, epoch ms (what listings show). */
  readonly acquiredAt: number;
}

/** A queued acquisition. */
export interface Waiter {
  readonly id: number;
  readonly kind: LockKind;
  readonly fair: boolean;
  readonly permits: number;
  readonly weight: number;
  /** The acquisition's owner: `cancel()` of an attempt whose reply was lost finds it by this. */
  readonly ownerId: string;
  /** The waiter's encoded identity, stored verbatim. */
  readonly identity: string;
  /** When it joined the queue, epoch ms. */
  readonly since: number;
  /** While asleep in waitForChange: how to wake it. */
  wake: (() => void) | undefined;
  /** A change let it in while it was awake: its next wait returns at once. */
  signalled: boolean;
  /** Dropped after this unless asleep (a waiter whose client vanished). */
  expiresAt: number;
}

/** The state of one lock id; deleted as soon as it has neither holders nor waiters. */
export interface Entry {
  readonly lockId: string;
  holders: Holder[];
  readonly queue: Waiter[];
  /** The waiters not asleep (the only ones that can expire): kept apart so a purge is cheap. */
  readonly awake: Set<Waiter>;
  /** One timer per entry while anyone sleeps: the next holder or waiter expiry. */
  timer: NodeJS.Timeout | undefined;
  timerAt: number;
}

/**
 * Tokens come from one counter for the whole process: strictly increasing per lock id
 * without keeping any state per id (an idle id costs nothing).
 */
let lastToken = 0n;
export function nextToken(): bigint {
  lastToken += 1n;
  return lastToken;
}

/** What an acquisition asks, as far as compatibility goes, and who asks (for listings). */
export type Ask = KindAsk & { readonly ownerId: string; readonly identity: string };

/** The kit's rules (one id is one lock across kinds), under the names this backend uses. */
export { kindsCompatible as compatible, queueAllows } from '../kit.js';

/** The lock table shared by every memory backend opened with the same name. */
export class MemoryStore {
  readonly #entries = new Map<string, Entry>();
  nextWaiterId = 1;
  /** Backends open on this table; the table is forgotten when none is and it is empty. */
  users = 0;
  /** Sleeping waiters woken so far (tests check that a release wakes only whom it lets in). */
  wakeups = 0;

  get size(): number {
    return this.#entries.size;
  }

  /** The entry of `lockId` (created on demand), with expired holders and waiters dropped. */
  entry(lockId: string, now = performance.now()): Entry {
    const found = this.#entries.get(lockId);
    // Purging the last expired holder forgets the entry: a grant written into that detached
    // object would be invisible to every other client (two holders). Look it up again.
    if (found) this.#purge(found, now);
    let e = this.#entries.get(lockId);
    if (!e) {
      e = { lockId, holders: [], queue: [], awake: new Set(), timer: undefined, timerAt: Number.POSITIVE_INFINITY };
      this.#entries.set(lockId, e);
    }
    return e;
  }

  /** The entry of `lockId` if it exists (never creates one). */
  peek(lockId: string): Entry | undefined {
    const e = this.#entries.get(lockId);
    if (e) this.#purge(e, performance.now());
    return e;
  }

  #purge(e: Entry, now: number): void {
    const before = e.holders.length + e.queue.length;
    if (e.holders.some((h) => h.blocksUntil <= now)) e.holders = e.holders.filter((h) => h.blocksUntil > now);
    for (const w of e.awake) if (w.expiresAt <= now) this.#drop(e, w);
    if (e.holders.length + e.queue.length !== before) this.changed(e, now);
  }

  /** Queue a new waiter (awake: it is about to sleep in waitForChange). */
  addWaiter(e: Entry, ask: Ask & { readonly ownerId: string }, now: number, graceMs: number): Waiter {
    const w: Waiter = {
      id: this.nextWaiterId++,
      ownerId: ask.ownerId,
      kind: ask.kind,
      fair: ask.fair,
      permits: ask.permits,
      weight: ask.weight ?? 1,
      identity: ask.identity,
      since: Date.now(),
      wake: undefined,
      signalled: false,
      expiresAt: now + graceMs,
    };
    e.queue.push(w);
    e.awake.add(w);
    return w;
  }

  /** Put a waiter to sleep until `wake` is called by a change. */
  sleep(e: Entry, w: Waiter, wake: () => void): void {
    w.wake = wake;
    e.awake.delete(w);
    this.#arm(e, performance.now());
  }

  /** Take a waiter out of its sleep (woken, aborted): it must re-attempt within the grace. */
  rouse(e: Entry, w: Waiter, now = performance.now()): void {
    w.wake = undefined;
    w.expiresAt = now + WAITER_GRACE_MS;
    if (e.queue.includes(w)) e.awake.add(w);
  }

  /** Remove a waiter (cancelled or granted) and tell the others. */
  removeWaiter(e: Entry, w: Waiter): void {
    if (this.#drop(e, w)) this.changed(e);
  }

  #drop(e: Entry, w: Waiter): boolean {
    e.awake.delete(w);
    const i = w === e.queue[0] ? 0 : e.queue.indexOf(w);
    if (i < 0) return false;
    e.queue.splice(i, 1);
    w.wake?.();
    return true;
  }

  /**
   * Something changed: wake exactly the waiters that could be granted now, in queue order,
   * as if each took its grant; re-arm the entry's expiry timer; forget the entry when idle.
   */
  changed(e: Entry, now = performance.now()): void {
    if (!e.holders.some((h) => exclusive(h.kind))) this.#wakeGrantable(e);
    this.#arm(e, now);
    if (e.holders.length === 0 && e.queue.length === 0) this.#forget(e);
  }

  #wakeGrantable(e: Entry): void {
    const granted: Weighed[] = [...e.holders];
    const passed: Waiter[] = [];
    for (const w of e.queue) {
      if (compatible(granted, w) && queueAllows(w, passed, permitsInUse(granted))) {
        granted.push(w);
        if (w.wake) {
          this.wakeups += 1;
          w.wake();
        } else w.signalled = true;
        if (exclusive(w.kind)) return;
      } else {
        passed.push(w);
        // Nobody behind a blocked exclusive waiter gets in: not in fair order, not a reader.
        if (exclusive(w.kind) && (granted.length > 0 || w.fair)) return;
        // A full semaphore blocks every later permit, and every other kind beside it; a fair
        // waiter for several permits blocks everyone behind it until they are free together.
        const full = w.kind === 'semaphore' && granted.length > 0 && granted.every((h) => h.kind === 'semaphore');
        if (full && (w.fair || w.weight === 1)) return;
      }
    }
  }

  /** One ref'd timer per entry with sleepers, for the next expiry that could let one in. */
  #arm(e: Entry, now: number): void {
    let at = Number.POSITIVE_INFINITY;
    if (e.queue.length > e.awake.size) {
      for (const h of e.holders) at = Math.min(at, h.blocksUntil);
      for (const w of e.awake) at = Math.min(at, w.expiresAt);
    }
    if (at === e.timerAt) return;
    clearTimeout(e.timer);
    e.timer = undefined;
    e.timerAt = at;
    if (at === Number.POSITIVE_INFINITY) return;
    e.timer = setTimeout(
      () => {
        e.timer = undefined;
        e.timerAt = Number.POSITIVE_INFINITY;
        const live = this.#entries.get(e.lockId);
        if (live === e) this.#purge(e, performance.now());
        if (live === e) this.#arm(e, performance.now());
      },
      Math.max(1, Math.ceil(at - now)),
    );
  }

  #forget(e: Entry): void {
    clearTimeout(e.timer);
    e.timer = undefined;
    e.timerAt = Number.POSITIVE_INFINITY;
    if (this.#entries.get(e.lockId) === e) this.#entries.delete(e.lockId);
  }

  /**
   * Up to `limit` live entries whose id starts with `prefix` and sorts after `after`, in id
   * order: a keyset page (the order is stable, so a page never repeats or skips a lock
   * that existed throughout). Sorting the ids on every page is fine for an in-process table.
   */
  page(prefix: string, after: string | undefined, limit: number, now = performance.now()): { entries: Entry[]; more: boolean } {
    const ids: string[] = [];
    for (const id of this.#entries.keys()) if (id.startsWith(prefix) && (after === undefined || id > after)) ids.push(id);
    ids.sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
    const entries: Entry[] = [];
    let i = 0;
    for (; i < ids.length && entries.length < limit; i++) {
      const e = this.#entries.get(ids[i] ?? '');
      if (!e) continue;
      this.#purge(e, now);
      if (e.holders.length + e.queue.length > 0) entries.push(e);
    }
    return { entries, more: i < ids.length };
  }

  /** Drop idle entries whose holders expired (nobody asked about them since). */
  sweep(now = performance.now()): void {
    for (const e of [...this.#entries.values()]) this.#purge(e, now);
    for (const e of [...this.#entries.values()]) if (e.holders.length === 0 && e.queue.length === 0) this.#forget(e);
  }
}

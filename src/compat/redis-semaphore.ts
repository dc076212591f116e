/**
 * `locksmith-dlm/compat/redis-semaphore`: redis-semaphore's classes over locksmith's Redis
 * backend (one client) or Redlock backend (several). Change the import, keep the code; every
 * acquisition also carries fencing tokens. What differs on purpose: docs/migrating/redis-semaphore.md.
 */
import { randomUUID } from 'node:crypto';
import type { Lock as Hold } from '../lock.js';
import type { Locker } from '../locker.js';
import { lockerFor, lossRouter, type CompatClient } from './clients.js';
import { acquirePermits, acquireSlot, waitLeft, type Budget } from './permits.js';
import { BoundedMap } from '../util/bounded-map.js';

/** A user's ioredis client. */
export type RedisClient = CompatClient;

/** The lock was lost: a refresh failed or its lease ran out. */
export class LostLockError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'LostLockError';
  }
}

/** `acquire()` did not succeed within `acquireTimeout` / `acquireAttemptsLimit`. */
export class TimeoutError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'TimeoutError';
  }
}

/** Called (with `this` the lock) when a loss is detected. */
export type LockLostCallback = (this: Lock, err: LostLockError) => void;

/** Timing options, as redis-semaphore's. */
export interface TimeoutOptions {
  /** Lease length (ms). @default 10000 */
  lockTimeout?: number;
  /** Bound of `acquire()` / `tryAcquire()` (ms). @default 10000 */
  acquireTimeout?: number;
  /** Attempts before giving up: bounds the wait at `(limit - 1) × retryInterval`. @default Infinity */
  acquireAttemptsLimit?: number;
  /** ms between attempts where locksmith polls (Redlock semaphore slots). @default 10 */
  retryInterval?: number;
  /** Refresh period (ms), at most a third of `lockTimeout`; `0` disables refresh. @default lockTimeout × 0.8, capped */
  refreshInterval?: number;
}

/** Options of every lock class. */
export interface LockOptions extends TimeoutOptions {
  /** The holder's id (default a random UUID): locks with the same identifier are the same holder. */
  identifier?: string;
  /** With `identifier`: take over a hold that identifier already has (refresh, not acquire). */
  acquiredExternally?: true;
  /** Called on loss; the default throws the `LostLockError` (an uncaught exception, as in redis-semaphore). */
  onLockLost?: LockLostCallback;
}

/** redis-semaphore's defaults. */
export const defaultTimeoutOptions = Object.freeze({
  lockTimeout: 10_000,
  acquireTimeout: 10_000,
  acquireAttemptsLimit: Number.POSITIVE_INFINITY,
  retryInterval: 10,
});

const defaultOnLockLost: LockLostCallback = (err) => {
  throw err;
};

/** What a lock holds: one or more locksmith handles. */
interface Held {
  readonly holds: readonly Hold[];
}

/** Lease settings of each hold, with the owner only once the identifier is fixed (see `identifier`). */
type HoldSettings = Readonly<{ ttlMs: number; autoExtend: false; owner?: string }>;
/** The settings of one attempt. */
type Attempt = HoldSettings & { readonly waitMs: number; readonly signal?: AbortSignal };

/** The settings of a lock without a fixed identifier: its holds', and its first attempt's. */
interface Unowned {
  readonly settings: HoldSettings;
  readonly first: Attempt;
}

/**
 * The {@link Unowned} settings of each recent `lockTimeout`, shared by every lock object of
 * it: a `new Mutex` per use then makes no settings objects of its own. Frozen, so sharing
 * them is safe; a map, so that objects of different lockTimeouts alternating build nothing.
 */
const unownedByTtl = new BoundedMap<number, Unowned>(32);

function unowned(ttlMs: number): Unowned {
  let u = unownedByTtl.get(ttlMs);
  if (u === undefined) {
    const settings: HoldSettings = Object.freeze({ ttlMs, autoExtend: false });
    u = Object.freeze({ settings, first: Object.freeze({ ...settings, waitMs: 0 }) });
    unownedByTtl.set(ttlMs, u);
  }
  return u;
}

/** The common life cycle: acquire, refresh on a timer, detect loss, release. */
export abstract class Lock {
  protected abstract readonly _kind: string;
  protected readonly _key: string;
  protected readonly _locker: Locker;
  /**
   * The holder's id once fixed: given, or first read (see `identifier`). Until then each
   * hold gets locksmith's own owner id: an explicit owner costs an acquisition its
   * validation and the locker's re-entry bookkeeping (docs/benchmarks.md, "Compat shims").
   */
  #identifier: string | undefined;
  /** The owner id of the last hold taken while the identifier was not fixed. */
  #lastOwner: string | undefined;
  readonly #lockTimeout: number;
  readonly #acquireTimeout: number;
  readonly #attemptsLimit: number;
  protected readonly _retryInterval: number;
  readonly #refreshMs: number;
  readonly #onLockLost: LockLostCallback;
  #acquiredExternally: boolean;
  /** Made when first needed, and again once the identifier is fixed. */
  #settings: HoldSettings | undefined;
  /** The first, one-shot attempt without a caller's signal (the common case): one object per lock. */
  #firstAttempt: Attempt | undefined;
  #held: Held | undefined;
  /** Stops watching the current hold(s) for loss. */
  #unwatch: (() => void) | undefined;
  #timer: ReturnType<typeof setInterval> | undefined;
  #refreshing = false;

  constructor(clients: readonly CompatClient[], key: string, options: LockOptions = {}) {
    if (!key) throw new Error('"key" is required');
    if (typeof key !== 'string') throw new Error('"key" must be a string');
    const { identifier, acquiredExternally } = options;
    if (identifier !== undefined && (!identifier || typeof identifier !== 'string')) {
      throw new Error('identifier must be not empty random string');
    }
    if (acquiredExternally && !identifier) throw new Error('acquiredExternally=true meanless without custom identifier');
    this._key = key;
    this._locker = lockerFor(clients);
    // A given identifier is the holder's owner id, so that `acquiredExternally` can find the hold it names.
    this.#identifier = identifier;
    this.#acquiredExternally = acquiredExternally === true;
    this.#lockTimeout = options.lockTimeout ?? defaultTimeoutOptions.lockTimeout;
    this.#acquireTimeout = options.acquireTimeout ?? defaultTimeoutOptions.acquireTimeout;
    this.#attemptsLimit = options.acquireAttemptsLimit ?? defaultTimeoutOptions.acquireAttemptsLimit;
    this._retryInterval = options.retryInterval ?? defaultTimeoutOptions.retryInterval;
    const refresh = options.refreshInterval ?? Math.round(this.#lockTimeout * 0.8);
    // A refresh at 0.8 of the lease leaves one slow round trip between the holder and a loss.
    this.#refreshMs = refresh > 0 ? Math.max(1, Math.min(refresh, Math.floor(this.#lockTimeout / 3))) : 0;
    this.#onLockLost = options.onLockLost ?? defaultOnLockLost;
  }

  /**
   * This holder's id: the given one, else a random UUID when read before any acquisition, or
   * the owner id of the hold taken (while or after holding). Fixed from its first read: later
   * acquisitions take their holds under it, so another object given it (with
   * `acquiredExternally`) finds them (read while an acquisition is in flight, from the next one).
   */
  get identifier(): string {
    if (this.#identifier === undefined) {
      this.#identifier = this.#lastOwner ?? randomUUID();
      this.#settings = undefined;
      this.#firstAttempt = undefined;
    }
    return this.#identifier;
  }

  /** True while held (false after release or loss). */
  get isAcquired(): boolean {
    return this.#held !== undefined;
  }

  /** Fencing tokens of the current hold (one per hold taken: one, or one per permit where they are taken one by one), empty when not held. */
  get tokens(): readonly bigint[] {
    return this.#held?.holds.map((h) => h.token) ?? [];
  }

  /** The fencing token of the current hold (the first permit's), or undefined. */
  get token(): bigint | undefined {
    return this.#held?.holds[0]?.token;
  }

  /** Acquire, or reject with `TimeoutError` after `acquireTimeout`. */
  async acquire(abortSignal?: AbortSignal): Promise<void> {
    if (!(await this.tryAcquire(abortSignal))) throw new TimeoutError(`Acquire ${this._kind} ${this._key} timeout`);
  }

  /** Acquire within `acquireTimeout` (and `acquireAttemptsLimit`): true, or false when not. */
  async tryAcquire(abortSignal?: AbortSignal): Promise<boolean> {
    const held = this.#acquiredExternally ? await this.#adopt() : await this._take(performance.now(), abortSignal);
    if (held === null) return false;
    this.#acquiredExternally = false;
    this.#held = held;
    if (this.#identifier === undefined) this.#lastOwner = held.holds[0]?.ownerId;
    if (this.#refreshMs > 0) this.#startRefresh(held);
    this.#watch(held);
    return true;
  }

  /** Stop refreshing: the hold then expires after `lockTimeout` unless released. */
  stopRefresh(): void {
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = undefined;
  }

  /** Release (always safe: a lost or never-taken lock is a no-op). */
  async release(): Promise<void> {
    this.stopRefresh();
    const held = this.#held;
    this.#held = undefined;
    this.#acquiredExternally = false;
    this.#unwatch?.();
    this.#unwatch = undefined;
    if (held === undefined) return;
    const [only] = held.holds;
    if (held.holds.length === 1 && only) await only.release();
    else await Promise.all(held.holds.map((h) => h.release()));
  }

  /**
   * Take the lock within the budget of an acquisition that began at `start`
   * (`performance.now()`): the holds, or null.
   */
  protected abstract _take(start: number, signal: AbortSignal | undefined): Promise<Held | null>;

  /** The locksmith lock id of this lock (redis-semaphore's key naming, under locksmith's prefix). */
  protected abstract _lockId(): string;

  /** Lease settings of each hold: renewal is this class's timer, so that `stopRefresh()` can end it. */
  protected _settings(): HoldSettings {
    if (this.#settings) return this.#settings;
    const owner = this.#identifier;
    this.#settings =
      owner === undefined ? unowned(this.#lockTimeout).settings : Object.freeze({ ttlMs: this.#lockTimeout, autoExtend: false, owner });
    return this.#settings;
  }

  /** The settings of one attempt that waits at most `waitMs` (the same object for every first attempt). */
  protected _attempt(waitMs: number, signal: AbortSignal | undefined): Attempt {
    if (waitMs === 0 && signal === undefined) {
      if (this.#firstAttempt) return this.#firstAttempt;
      const settings = this._settings();
      this.#firstAttempt = this.#identifier === undefined ? unowned(this.#lockTimeout).first : Object.freeze({ ...settings, waitMs: 0 });
      return this.#firstAttempt;
    }
    return { ...this._settings(), waitMs, ...(signal ? { signal } : {}) };
  }

  /** The wait bound of an acquisition that began at `start` (made only when the first attempt did not succeed). */
  protected _budget(start: number, signal: AbortSignal | undefined): Budget {
    const byAttempts = Number.isFinite(this.#attemptsLimit) ? Math.max(0, this.#attemptsLimit - 1) * this._retryInterval : Infinity;
    const waitMs = Math.min(this.#acquireTimeout, byAttempts);
    return { waitMs, deadline: start + waitMs, ...(signal ? { signal } : {}) };
  }

  /** `acquiredExternally`: join the hold `identifier` already has on the server, or fail. */
  async #adopt(): Promise<Held | null> {
    const id = this._lockId();
    const state = await this._locker.inspect(id);
    if (!state.holders.some((h) => h.ownerId === this.#identifier)) return null;
    const hold = await this._locker.tryLock(id, this._settings());
    if (hold === null) return null;
    await hold.extend(this.#lockTimeout);
    return { holds: [hold] };
  }

  /**
   * Report a loss of any hold through the locker's one `lost` listener (clients.ts), not an
   * abort listener per hold: a hold's signal costs a controller per acquisition.
   */
  #watch(held: Held): void {
    const router = lossRouter(this._locker);
    const onLost = (error: unknown): void => this.#lost(held, error);
    const [only] = held.holds;
    if (held.holds.length === 1 && only) {
      this.#unwatch = router.watch(only, onLost);
      return;
    }
    const unwatches = held.holds.map((h) => router.watch(h, onLost));
    this.#unwatch = () => unwatches.forEach((u) => u());
  }

  #startRefresh(held: Held): void {
    this.#timer = setInterval(() => {
      if (this.#refreshing || this.#held !== held) return;
      this.#refreshing = true;
      // A refused refresh aborts the hold's signal (#lost); a failed one leaves the lease to run out.
      Promise.all(held.holds.map((h) => h.extend(this.#lockTimeout)))
        .catch(() => undefined)
        .finally(() => {
          this.#refreshing = false;
        });
    }, this.#refreshMs);
    this.#timer.unref();
  }

  #lost(held: Held, cause: unknown): void {
    // Released on purpose, or refresh stopped (the hold was meant to expire): not a loss to report.
    if (this.#held !== held || this.#timer === undefined) return;
    this.#held = undefined;
    this.stopRefresh();
    this.#unwatch?.();
    this.#unwatch = undefined;
    const error = new LostLockError(`Lost ${this._kind} for key ${this._key}`, { cause });
    this.#onLockLost.call(this, error);
  }
}

/** A mutex on one Redis (`mutex:<key>`). */
export class Mutex extends Lock {
  protected readonly _kind: string = 'mutex';
  constructor(client: RedisClient | RedisClient[], key: string, options?: LockOptions) {
    super(Array.isArray(client) ? client : [client], key, options);
  }
  protected _lockId(): string {
    return `mutex:${this._key}`;
  }
  /** One attempt, then (held elsewhere) the wait that is left: the first attempt makes no budget nor closure. */
  protected async _take(start: number, signal: AbortSignal | undefined): Promise<Held | null> {
    const id = this._lockId();
    const first = await this._locker.tryLock(id, this._attempt(0, signal));
    if (first !== null) return { holds: [first] };
    const waitMs = waitLeft(this._budget(start, signal));
    const hold = waitMs > 0 ? await this._locker.tryLock(id, this._attempt(waitMs, signal)) : null;
    return hold && { holds: [hold] };
  }
}

/** The Redlock mutex: a majority of independent Redis masters. */
export class RedlockMutex extends Mutex {
  protected override readonly _kind: string = 'redlock-mutex';
  constructor(clients: RedisClient[], key: string, options?: LockOptions) {
    if (!Array.isArray(clients) || clients.length === 0) throw new Error('"clients" array is required');
    super(clients, key, options);
  }
}

/** A counting semaphore of `maxCount` permits on one Redis (`semaphore:<key>`). */
export class Semaphore extends Lock {
  protected readonly _kind: string = 'semaphore';
  protected readonly _limit: number;
  constructor(client: RedisClient | RedisClient[], key: string, maxCount: number, options?: LockOptions) {
    super(Array.isArray(client) ? client : [client], key, options);
    if (!maxCount) throw new Error('"maxCount" is required');
    if (typeof maxCount !== 'number') throw new Error('"maxCount" must be a number');
    this._limit = maxCount;
  }
  protected _lockId(): string {
    return `semaphore:${this._key}`;
  }
  protected async _take(start: number, signal: AbortSignal | undefined): Promise<Held | null> {
    const holds = await acquirePermits(this._locker, this._lockId(), this._limit, 1, this._settings(), this._budget(start, signal));
    return holds && held(holds);
  }
}

/**
 * `permits` of `maxCount` at once, all-or-nothing. Multi-permit acquirers of one semaphore
 * take a short gate mutex in turn, so two of them never each hold part of what the other
 * needs (docs/migrating/redis-semaphore.md, "MultiSemaphore").
 */
export class MultiSemaphore extends Semaphore {
  protected override readonly _kind: string = 'multi-semaphore';
  protected readonly _permits: number;
  constructor(client: RedisClient, key: string, maxCount: number, permits: number, options?: LockOptions) {
    super(client, key, maxCount, options);
    if (!permits) throw new Error('"permits" is required');
    if (typeof permits !== 'number') throw new Error('"permits" must be a number');
    this._permits = permits;
  }
  protected override async _take(start: number, signal: AbortSignal | undefined): Promise<Held | null> {
    const budget = this._budget(start, signal);
    const holds = await acquirePermits(this._locker, this._lockId(), this._limit, this._permits, this._settings(), budget);
    return holds && held(holds);
  }
}

/**
 * The Redlock semaphore: locksmith's Redlock backend has mutexes only, so each permit is one
 * of `maxCount` slot mutexes (`semaphore:<key>:<i>`): at most `maxCount` holders, each with a
 * token of its slot.
 */
export class RedlockSemaphore extends Lock {
  protected readonly _kind: string = 'redlock-semaphore';
  protected readonly _limit: number;
  constructor(clients: RedisClient[], key: string, maxCount: number, options?: LockOptions) {
    super(clients, key, options);
    if (!maxCount) throw new Error('"maxCount" is required');
    if (typeof maxCount !== 'number') throw new Error('"maxCount" must be a number');
    this._limit = maxCount;
  }
  protected _lockId(): string {
    return `semaphore:${this._key}`;
  }
  protected async _take(start: number, signal: AbortSignal | undefined): Promise<Held | null> {
    const budget = this._budget(start, signal);
    const hold = await acquireSlot(this._locker, this._lockId(), this._limit, this._settings(), budget, this._retryInterval);
    return hold && held([hold]);
  }
}

function held(holds: readonly Hold[]): Held {
  return { holds };
}

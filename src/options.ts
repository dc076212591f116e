/**
 * Options and their validation. Every bad input is answered by an `InvalidArgumentError`
 * naming the argument, before anything reaches a backend.
 */
import { MAX_LOCK_ID_BYTES } from './backend.js';
import { InvalidArgumentError } from './errors.js';
import { lossGuardMs, validityDeadline } from './lease.js';

/** Options of a locker; every lock call may override the lease-related ones. */
export interface LockerOptions {
  /** Lease length in ms (the minimum depends on `driftFactor`: see {@link minTtlMs}). @default 10000 */
  readonly ttlMs: number;
  /** Renew the lease automatically at a third of the ttl. @default true */
  readonly autoExtend: boolean;
  /** Grant in arrival order (FIFO). @default false */
  readonly fair: boolean;
  /** After a holder vanishes without releasing, nobody gets the lock for this long (ms). @default 0 */
  readonly lockDelayMs: number;
  /** Clock drift allowance as a fraction of the ttl (plus 2 ms), as in Redlock; in [0, 0.5). @default 0.01 */
  readonly driftFactor: number;
  /**
   * Bound on connecting to the backend (ms). A waiting call gives up earlier if its own
   * `timeoutMs`, its signal or `close()` says so. @default 10000
   */
  readonly connectTimeoutMs: number;
  /**
   * The application's name, shown with every hold and queue entry of this locker
   * (`locksmith ls`: `name pid@host`). At most 128 bytes.
   * @default the nearest package.json's `name`, else the process title
   */
  readonly name?: string;
  /**
   * A small JSON object stored with every hold and queue entry of this locker (a job id, a
   * version); at most 512 bytes as JSON. Never logged.
   * @default undefined
   */
  readonly meta?: { readonly [key: string]: unknown };
}

/** Defaults of {@link LockerOptions}. */
export const DEFAULT_OPTIONS: LockerOptions = Object.freeze({
  ttlMs: 10_000,
  autoExtend: true,
  fair: false,
  lockDelayMs: 0,
  driftFactor: 0.01,
  connectTimeoutMs: 10_000,
});

/** Per-call options of `lock()`, `read()`, `write()`, `acquire()` and `withLock()`. */
export interface LockOptions {
  /**
   * Give up after this long with `LockTimeoutError`. `0` makes exactly one attempt (a free
   * lock is granted; a held one rejects at once; only `signal` or `close()` ends it sooner).
   * Any other bound covers the whole call: a first attempt that a server does not answer is
   * given up at max(timeoutMs, 250 ms) after the call (docs/architecture.md, "What the core
   * owns"). `waitMs` is an alias.
   * @default undefined (wait until aborted)
   */
  readonly timeoutMs?: number;
  /**
   * Alias of `timeoutMs` (the name `tryLock` uses). Give one or the other (both only when
   * equal). @default undefined (wait until aborted)
   */
  readonly waitMs?: number;
  /** Abort the wait; the call rejects with `signal.reason` unchanged. @default undefined */
  readonly signal?: AbortSignal;
  /** Lease length of this hold in ms. @default the locker's `ttlMs` */
  readonly ttlMs?: number;
  /** Renew the lease at a third of the ttl. @default the locker's `autoExtend` */
  readonly autoExtend?: boolean;
  /** Grant in arrival order. @default the locker's `fair` */
  readonly fair?: boolean;
  /** Block the lock this long after a holder vanishes without releasing. @default the locker's `lockDelayMs` */
  readonly lockDelayMs?: number;
  /**
   * Explicit owner id: a second acquisition with the same owner re-enters (counted)
   * instead of waiting, within this locker and, on backends with server-side reentrancy,
   * across clients. Whoever uses the same owner id IS the same holder.
   * @default a random id per acquisition
   */
  readonly owner?: string;
  /**
   * What a nested acquisition does when the enclosing `withLock` callback (in this async
   * context, on this locker) already holds the same lock:
   * - `true`: re-enter the hold (same token, counted). Re-entries of one hold run one at a
   *   time, so `Promise.all` siblings never overlap; use it only for calls the holder
   *   awaits (work forked and not awaited would overlap the rest of the callback);
   * - `false`: wait for the lock like any other caller (for forked work);
   * - unset: reject at once with `InvalidArgumentError` (argument `reentrant`) instead of
   *   deadlocking or silently overlapping. See docs/recipes/mutex.md, "Re-entry".
   * @default undefined
   */
  readonly reentrant?: boolean;
}

/** Per-call options of `tryLock()`, `tryRead()`, `tryWrite()`, `tryAcquire()`. */
export interface TryLockOptions extends LockOptions {
  /**
   * Wait at most this long, then resolve `null`. `timeoutMs` is an alias (give one or the
   * other, both only when equal).
   * @default 0 (one attempt)
   */
  readonly waitMs?: number;
  /** Alias of `waitMs` (the name `lock` uses). @default 0 (one attempt) */
  readonly timeoutMs?: number;
}

/** Per-call options of a semaphore's `acquire()`. */
export interface SemaphoreAcquireOptions extends LockOptions {
  /**
   * How many permits this hold takes at once, an integer in [1, the semaphore's `permits`]
   * (redis-semaphore's MultiSemaphore). A fair waiter for n permits blocks later waiters
   * until n are free together. Engines without `weightedPermits` refuse n > 1 with
   * `UnsupportedError`. @default 1
   */
  readonly permits?: number;
}

/** Per-call options of a semaphore's `tryAcquire()`; `permits` as in {@link SemaphoreAcquireOptions}. */
export interface SemaphoreTryAcquireOptions extends TryLockOptions {
  /** How many permits this hold takes at once (1..the semaphore's `permits`). @default 1 */
  readonly permits?: number;
}

/** Options of `withLock()`. */
export interface WithLockOptions extends LockOptions {
  /**
   * When the lock is lost while the callback runs, reject with `LockLostError` (its
   * `result` holds what the callback returned). `false` resolves with the result anyway.
   * @default true
   */
  readonly rejectOnLoss?: boolean;
}

const CALL_KEYS: ReadonlySet<string> = new Set([
  'timeoutMs',
  'waitMs',
  'signal',
  'ttlMs',
  'autoExtend',
  'fair',
  'lockDelayMs',
  'owner',
  'reentrant',
  'rejectOnLoss',
]);
const LOCKER_KEYS: ReadonlySet<string> = new Set([
  'ttlMs',
  'autoExtend',
  'fair',
  'lockDelayMs',
  'driftFactor',
  'connectTimeoutMs',
  'name',
  'meta',
]);

/** setTimeout's limit; longer durations would fire at once. */
const MAX_DURATION_MS = 2_147_483_647;
const MAX_OWNER_BYTES = 256;

/**
 * A NUL or a lone surrogate (UTF-16 that is not valid Unicode). PostgreSQL text cannot hold
 * a NUL, and Redis and PostgreSQL store a lone surrogate as U+FFFD, so two ids would be one
 * lock: such strings are refused on every backend (docs/guarantees.md, "Lock ids").
 */
// eslint-disable-next-line no-control-regex -- NUL is exactly what is refused
const UNSTORABLE = /[\u0000\p{Cs}]/u;

/** Refuse a string some engine cannot store exactly (a NUL, a lone surrogate). */
export function assertStorable(value: string, argument: string): void {
  const at = value.search(UNSTORABLE);
  if (at < 0) return;
  const unit = value.charCodeAt(at);
  const what = unit === 0 ? 'a NUL character' : `a lone surrogate (\\u${unit.toString(16)})`;
  throw new InvalidArgumentError(argument, `${argument} contains ${what} at index ${at}; ids must be valid Unicode without NUL`, {
    context: { index: at },
  });
}

/**
 * A lock id: a non-empty string of at most `MAX_LOCK_ID_BYTES` UTF-8 bytes, valid Unicode
 * (no lone surrogate) and without NUL, so every backend stores it exactly.
 */
export function validateLockId(lockId: unknown, argument = 'lockId'): string {
  if (typeof lockId !== 'string') {
    throw new InvalidArgumentError(argument, `${argument} must be a string, got ${describe(lockId)}`);
  }
  if (lockId.length === 0) throw new InvalidArgumentError(argument, `${argument} must not be empty`);
  assertStorable(lockId, argument);
  const bytes = Buffer.byteLength(lockId, 'utf8');
  if (bytes > MAX_LOCK_ID_BYTES) {
    throw new InvalidArgumentError(argument, `${argument} is ${bytes} bytes; the limit is ${MAX_LOCK_ID_BYTES} UTF-8 bytes`, {
      context: { bytes, limit: MAX_LOCK_ID_BYTES },
    });
  }
  return lockId;
}

/** A duration in ms: finite, > 0 (or ≥ 0 when `allowZero`), at most ~24.8 days. */
export function validateDuration(value: unknown, argument: string, allowZero = false): number {
  if (typeof value !== 'number' || !Number.isFinite(value)) {
    throw new InvalidArgumentError(argument, `${argument} must be a finite number of ms, got ${describe(value)}`);
  }
  if (allowZero ? value < 0 : value <= 0) {
    throw new InvalidArgumentError(argument, `${argument} must be ${allowZero ? '≥ 0' : '> 0'}, got ${value}`);
  }
  if (value > MAX_DURATION_MS) {
    throw new InvalidArgumentError(argument, `${argument} must be at most ${MAX_DURATION_MS} ms, got ${value}`);
  }
  return Math.ceil(value);
}

/** The most permits a semaphore may have: what every engine stores exactly (a 32-bit SQL INT column). */
export const MAX_PERMITS = 2_147_483_647;

/** Semaphore permits: an integer in [1, {@link MAX_PERMITS}]. */
export function validatePermits(value: unknown): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 1 || value > MAX_PERMITS) {
    throw new InvalidArgumentError('permits', `permits must be an integer in [1, ${MAX_PERMITS}], got ${describe(value)}`);
  }
  return value;
}

/**
 * Split a semaphore call's options into the permits it takes (an integer in [1, `size`],
 * default 1) and the lock options the core resolves as for any other call.
 */
export function splitWeight<O extends LockOptions>(
  options: (O & { readonly permits?: number }) | undefined,
  size: number,
): { weight: number; rest: O | undefined } {
  if (typeof options !== 'object' || options === null || !('permits' in options)) return { weight: 1, rest: options };
  const { permits, ...rest } = options;
  if (permits === undefined) return { weight: 1, rest: rest as O };
  if (typeof permits !== 'number' || !Number.isInteger(permits) || permits < 1 || permits > size) {
    throw new InvalidArgumentError(
      'permits',
      `a semaphore of ${size} permits takes an integer in [1, ${size}] at once, got ${describe(permits)}`,
    );
  }
  return { weight: permits, rest: rest as O };
}

/** An explicit owner id: a non-empty string of at most 256 UTF-8 bytes, storable as a lock id is. */
export function validateOwner(value: unknown): string {
  if (typeof value !== 'string' || value.length === 0) {
    throw new InvalidArgumentError('owner', `owner must be a non-empty string, got ${describe(value)}`);
  }
  assertStorable(value, 'owner');
  if (Buffer.byteLength(value, 'utf8') > MAX_OWNER_BYTES) {
    throw new InvalidArgumentError('owner', `owner must be at most ${MAX_OWNER_BYTES} UTF-8 bytes`);
  }
  return value;
}

function validateBoolean(value: unknown, argument: string): boolean {
  if (typeof value !== 'boolean') throw new InvalidArgumentError(argument, `${argument} must be a boolean, got ${describe(value)}`);
  return value;
}

/** An optional AbortSignal. */
export function validateSignal(value: unknown): AbortSignal | undefined {
  if (value === undefined) return undefined;
  if (!(value instanceof AbortSignal)) throw new InvalidArgumentError('signal', 'signal must be an AbortSignal');
  return value;
}

/**
 * The shortest ttl whose validity stays positive after the drift allowance and the loss
 * guard (see lease.ts): below it a grant would be lost before it was usable.
 */
export function minTtlMs(driftFactor: number): number {
  let ttl = minTtlCache.get(driftFactor);
  if (ttl !== undefined) return ttl;
  ttl = 1;
  while (validityDeadline(0, ttl, driftFactor) - lossGuardMs(ttl) < 1) ttl += 1;
  minTtlCache.set(driftFactor, ttl);
  return ttl;
}
const minTtlCache = new Map<number, number>();

function validateTtl(value: unknown, driftFactor: number): number {
  const ttl = validateDuration(value, 'ttlMs');
  const min = minTtlMs(driftFactor);
  if (ttl < min) {
    throw new InvalidArgumentError(
      'ttlMs',
      `ttlMs ${ttl} leaves no valid lease after the drift allowance (ttl × ${driftFactor} + 2 ms) and the loss guard; the minimum is ${min} ms`,
      { context: { minimum: min } },
    );
  }
  return ttl;
}

/** Reject keys a JavaScript caller may have mistyped (`timeout`, `ttl`…). */
function rejectUnknownKeys(o: object, known: ReadonlySet<string>, what: string): void {
  for (const key of Object.keys(o)) {
    if (!known.has(key)) {
      throw new InvalidArgumentError(key, `unknown ${what} option '${key}' (known: ${[...known].join(', ')})`);
    }
  }
}

/** Merge and validate locker options over the defaults. */
export function resolveLockerOptions(input: Partial<LockerOptions> | undefined): LockerOptions {
  if (input !== undefined && (typeof input !== 'object' || input === null)) {
    throw new InvalidArgumentError('options', 'options must be an object');
  }
  rejectUnknownKeys(input ?? {}, LOCKER_KEYS, 'locker');
  const o = { ...DEFAULT_OPTIONS, ...stripUndefined(input ?? {}) };
  const driftFactor = o.driftFactor;
  if (typeof driftFactor !== 'number' || !Number.isFinite(driftFactor) || driftFactor < 0 || driftFactor >= 0.5) {
    throw new InvalidArgumentError('driftFactor', `driftFactor must be a number in [0, 0.5), got ${describe(driftFactor)}`);
  }
  return Object.freeze({
    ttlMs: validateTtl(o.ttlMs, driftFactor),
    autoExtend: validateBoolean(o.autoExtend, 'autoExtend'),
    fair: validateBoolean(o.fair, 'fair'),
    lockDelayMs: validateDuration(o.lockDelayMs, 'lockDelayMs', true),
    driftFactor,
    connectTimeoutMs: validateDuration(o.connectTimeoutMs, 'connectTimeoutMs'),
    // Validated with the identity they build (observe/identity.ts), when the locker is made.
    ...(o.name === undefined ? {} : { name: o.name }),
    ...(o.meta === undefined ? {} : { meta: o.meta }),
  });
}

/** The settings of one call: the locker's lease defaults, overridden by the call's. */
export interface CallSettings {
  readonly ttlMs: number;
  readonly autoExtend: boolean;
  readonly fair: boolean;
  readonly lockDelayMs: number;
  readonly owner: string | undefined;
  readonly signal: AbortSignal | undefined;
  /** The wait bound (`timeoutMs` or its alias `waitMs`), undefined when none was given. */
  readonly waitBoundMs: number | undefined;
  readonly reentrant: boolean | undefined;
  readonly rejectOnLoss: boolean;
}

/** Validate one call's options (every key, every value) against the locker's defaults. */
export function resolveCallSettings(base: LockerOptions, call: WithLockOptions | undefined): CallSettings {
  if (call === undefined) return defaultSettings(base);
  if (typeof call !== 'object' || call === null) {
    throw new InvalidArgumentError('options', 'options must be an object');
  }
  const c = call;
  rejectUnknownKeys(c, CALL_KEYS, 'lock');
  const timeout = c.timeoutMs === undefined ? undefined : validateDuration(c.timeoutMs, 'timeoutMs', true);
  const wait = c.waitMs === undefined ? undefined : validateDuration(c.waitMs, 'waitMs', true);
  if (timeout !== undefined && wait !== undefined && timeout !== wait) {
    throw new InvalidArgumentError('waitMs', `waitMs is an alias of timeoutMs; give one of them (got ${wait} and ${timeout})`);
  }
  return {
    ttlMs: c.ttlMs === undefined ? base.ttlMs : validateTtl(c.ttlMs, base.driftFactor),
    autoExtend: c.autoExtend === undefined ? base.autoExtend : validateBoolean(c.autoExtend, 'autoExtend'),
    fair: c.fair === undefined ? base.fair : validateBoolean(c.fair, 'fair'),
    lockDelayMs: c.lockDelayMs === undefined ? base.lockDelayMs : validateDuration(c.lockDelayMs, 'lockDelayMs', true),
    owner: c.owner === undefined ? undefined : validateOwner(c.owner),
    signal: validateSignal(c.signal),
    waitBoundMs: timeout ?? wait,
    reentrant: c.reentrant === undefined ? undefined : validateBoolean(c.reentrant, 'reentrant'),
    rejectOnLoss: c.rejectOnLoss === undefined ? true : validateBoolean(c.rejectOnLoss, 'rejectOnLoss'),
  };
}

/** The settings of a call without options, per locker: its options are frozen, so one shared (frozen) object serves every such call. */
const defaults = new WeakMap<LockerOptions, CallSettings>();

function defaultSettings(base: LockerOptions): CallSettings {
  let d = defaults.get(base);
  if (!d) {
    d = Object.freeze(resolveCallSettings(base, {}));
    defaults.set(base, d);
  }
  return d;
}

function stripUndefined<T extends object>(o: T): Partial<T> {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Partial<T>;
}

function describe(v: unknown): string {
  if (v === null) return 'null';
  if (typeof v === 'string') return `'${v.length > 40 ? `${v.slice(0, 40)}…` : v}'`;
  if (typeof v === 'bigint') return `${v}n`;
  if (typeof v === 'object') return Array.isArray(v) ? 'an array' : 'an object';
  return `${typeof v} ${String(v)}`;
}

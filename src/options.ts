/**
 * Options and their validation. Every bad input is answered by an `InvalidArgumentError`
 * naming the argument, before anything reaches a backend.
 */
import { MAX_LOCK_ID_BYTES } from './backend.js';
import { InvalidArgumentError } from './errors.js';

/** Options of a locker; every lock call may override the lease-related ones. */
export interface LockerOptions {
  /** Lease length in ms. Default 10 000. */
  readonly ttlMs: number;
  /** Renew the lease automatically at a third of the ttl. Default true. */
  readonly autoExtend: boolean;
  /** Grant in arrival order (FIFO). Default false. */
  readonly fair: boolean;
  /** After a holder vanishes without releasing, nobody gets the lock for this long. Default 0. */
  readonly lockDelayMs: number;
  /** Clock drift allowance as a fraction of the ttl (plus 2 ms), as in Redlock. Default 0.01. */
  readonly driftFactor: number;
  /** Bound on the first connection to the backend. Default 10 000. */
  readonly connectTimeoutMs: number;
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

/** Per-call options of `lock()`, `read()`, `write()`, `acquire()`. */
export interface LockOptions {
  /** Give up after this long with `LockTimeoutError`. Default: wait until aborted. */
  readonly timeoutMs?: number;
  /** Abort the wait; the call rejects with `signal.reason` unchanged. */
  readonly signal?: AbortSignal;
  readonly ttlMs?: number;
  readonly autoExtend?: boolean;
  readonly fair?: boolean;
  readonly lockDelayMs?: number;
  /**
   * Explicit owner id: a second acquisition with the same owner re-enters (counted)
   * instead of waiting, within this locker and, on backends with server-side reentrancy,
   * across clients.
   */
  readonly owner?: string;
}

/** Per-call options of `tryLock()`, `tryRead()`, `tryWrite()`, `tryAcquire()`. */
export interface TryLockOptions extends Omit<LockOptions, 'timeoutMs'> {
  /** Wait at most this long (then resolve `null`). Default 0: one attempt. */
  readonly waitMs?: number;
}

/** setTimeout's limit; longer durations would fire at once. */
const MAX_DURATION_MS = 2_147_483_647;
const MAX_OWNER_BYTES = 256;

export function validateLockId(lockId: unknown, argument = 'lockId'): string {
  if (typeof lockId !== 'string') {
    throw new InvalidArgumentError(argument, `${argument} must be a string, got ${describe(lockId)}`);
  }
  if (lockId.length === 0) throw new InvalidArgumentError(argument, `${argument} must not be empty`);
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

export function validatePermits(value: unknown): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 1) {
    throw new InvalidArgumentError('permits', `permits must be an integer ≥ 1, got ${describe(value)}`);
  }
  return value;
}

export function validateOwner(value: unknown): string {
  if (typeof value !== 'string' || value.length === 0) {
    throw new InvalidArgumentError('owner', `owner must be a non-empty string, got ${describe(value)}`);
  }
  if (Buffer.byteLength(value, 'utf8') > MAX_OWNER_BYTES) {
    throw new InvalidArgumentError('owner', `owner must be at most ${MAX_OWNER_BYTES} UTF-8 bytes`);
  }
  return value;
}

function validateBoolean(value: unknown, argument: string): boolean {
  if (typeof value !== 'boolean') throw new InvalidArgumentError(argument, `${argument} must be a boolean, got ${describe(value)}`);
  return value;
}

export function validateSignal(value: unknown): AbortSignal | undefined {
  if (value === undefined) return undefined;
  if (!(value instanceof AbortSignal)) throw new InvalidArgumentError('signal', 'signal must be an AbortSignal');
  return value;
}

/** Merge and validate locker options over the defaults. */
export function resolveLockerOptions(input: Partial<LockerOptions> | undefined): LockerOptions {
  if (input !== undefined && (typeof input !== 'object' || input === null)) {
    throw new InvalidArgumentError('options', 'options must be an object');
  }
  const o = { ...DEFAULT_OPTIONS, ...stripUndefined(input ?? {}) };
  const driftFactor = o.driftFactor;
  if (typeof driftFactor !== 'number' || !Number.isFinite(driftFactor) || driftFactor < 0 || driftFactor >= 0.5) {
    throw new InvalidArgumentError('driftFactor', `driftFactor must be a number in [0, 0.5), got ${describe(driftFactor)}`);
  }
  return Object.freeze({
    ttlMs: validateDuration(o.ttlMs, 'ttlMs'),
    autoExtend: validateBoolean(o.autoExtend, 'autoExtend'),
    fair: validateBoolean(o.fair, 'fair'),
    lockDelayMs: validateDuration(o.lockDelayMs, 'lockDelayMs', true),
    driftFactor,
    connectTimeoutMs: validateDuration(o.connectTimeoutMs, 'connectTimeoutMs'),
  });
}

/** The lease settings of one call: the locker's, overridden by the call's. */
export interface CallSettings {
  readonly ttlMs: number;
  readonly autoExtend: boolean;
  readonly fair: boolean;
  readonly lockDelayMs: number;
  readonly owner: string | undefined;
  readonly signal: AbortSignal | undefined;
}

export function resolveCallSettings(base: LockerOptions, call: LockOptions | TryLockOptions | undefined): CallSettings {
  if (call !== undefined && (typeof call !== 'object' || call === null)) {
    throw new InvalidArgumentError('options', 'options must be an object');
  }
  const c = call ?? {};
  return {
    ttlMs: c.ttlMs === undefined ? base.ttlMs : validateDuration(c.ttlMs, 'ttlMs'),
    autoExtend: c.autoExtend === undefined ? base.autoExtend : validateBoolean(c.autoExtend, 'autoExtend'),
    fair: c.fair === undefined ? base.fair : validateBoolean(c.fair, 'fair'),
    lockDelayMs: c.lockDelayMs === undefined ? base.lockDelayMs : validateDuration(c.lockDelayMs, 'lockDelayMs', true),
    owner: c.owner === undefined ? undefined : validateOwner(c.owner),
    signal: validateSignal(c.signal),
  };
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

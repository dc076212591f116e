/**
 * Every error locksmith throws is a {@link LocksmithError} with a stable `code`, a `name`,
 * an optional `cause` and a `context` object with the data that explains it (lock id,
 * backend, per-node results). Match on `code` (or `instanceof`), never on the message.
 */

/** The stable error codes. New codes may be added; existing ones never change meaning. */
export type ErrorCode =
  | 'INVALID_ARGUMENT'
  | 'LOCK_TIMEOUT'
  | 'LOCK_LOST'
  | 'LOCK_NOT_HELD'
  | 'BACKEND_UNAVAILABLE'
  | 'QUORUM_FAILED'
  | 'LOCKER_CLOSED'
  | 'STALE_TOKEN'
  | 'UNSUPPORTED'
  | 'DRIVER_MISSING';

/** Base class of every locksmith error. */
export class LocksmithError extends Error {
  /** Stable machine-readable code. */
  readonly code: ErrorCode;
  /** Data that explains the error (lock id, backend, node results, …). */
  readonly context: Readonly<Record<string, unknown>>;

  constructor(code: ErrorCode, message: string, options: { cause?: unknown; context?: Record<string, unknown> } = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.code = code;
    this.context = Object.freeze({ ...(options.context ?? {}) });
    this.name = new.target.name;
  }
}

/** Bad input: empty or oversized lockId, ttl ≤ 0, permits < 1, malformed URL, unknown scheme, … */
export class InvalidArgumentError extends LocksmithError {
  /** Name of the offending argument or option. */
  readonly argument: string;
  constructor(argument: string, message: string, options: { cause?: unknown; context?: Record<string, unknown> } = {}) {
    super('INVALID_ARGUMENT', message, { ...options, context: { argument, ...(options.context ?? {}) } });
    this.argument = argument;
  }
}

/**
 * A semaphore was opened with another `permits` than its current holders were: the two
 * sizes cannot both hold, so the attempt is refused instead of counting it against either
 * (docs/recipes/semaphore.md). An {@link InvalidArgumentError} (code `INVALID_ARGUMENT`,
 * argument `permits`); `permits` is what was asked, `held` what the holders use.
 */
export class PermitsMismatchError extends InvalidArgumentError {
  /** The semaphore size this attempt asked for. */
  readonly permits: number;
  /** The semaphore size of the current holders. */
  readonly held: number;
  constructor(lockId: string, permits: number, held: number) {
    super('permits', `semaphore '${lockId}' is held with permits ${held}; it cannot be opened with permits ${permits}`, {
      context: { lockId, permits, held },
    });
    this.permits = permits;
    this.held = held;
  }
}

/** `lock()` (or `acquire()`, `read()`, `write()`) did not obtain the lock within `timeoutMs`. */
export class LockTimeoutError extends LocksmithError {
  constructor(lockId: string, timeoutMs: number, options: { cause?: unknown } = {}) {
    super('LOCK_TIMEOUT', `timed out after ${timeoutMs} ms waiting for lock '${lockId}'`, {
      ...options,
      context: { lockId, timeoutMs },
    });
  }
}

/** Why a lock was lost. */
export type LossReason =
  /** The backend said another owner (or nobody) holds it now. */
  | 'not-held'
  /** Renewals did not succeed before validity ran out (backend unreachable, paused process…). */
  | 'expired'
  /** The backend's session (ZooKeeper) or connection that carried the lease ended. */
  | 'session'
  /** The locker was closed while the lock was held. */
  | 'closed';

/**
 * The lock is no longer guaranteed to be held. It is the `reason` of `lock.signal`, the
 * payload of the `lost` event, and what `extend()` rejects with after a loss.
 */
export class LockLostError extends LocksmithError {
  readonly reason: LossReason;
  /**
   * From `withLock`: what the callback returned although the lock was lost while it ran
   * (undefined otherwise). The work happened; whether it happened alone is not known.
   */
  readonly result: unknown;
  constructor(lockId: string, reason: LossReason, options: { cause?: unknown; context?: Record<string, unknown>; result?: unknown } = {}) {
    super('LOCK_LOST', `lock '${lockId}' was lost (${reason})`, {
      ...(options.cause === undefined ? {} : { cause: options.cause }),
      context: { lockId, reason, ...(options.context ?? {}) },
    });
    this.reason = reason;
    this.result = options.result;
  }

  /** The same loss, carrying the result of the work that ran under the lock. */
  withResult(result: unknown): LockLostError {
    const lockId = typeof this.context.lockId === 'string' ? this.context.lockId : '';
    const { lockId: _id, reason: _reason, ...rest } = this.context;
    return new LockLostError(lockId, this.reason, { cause: this.cause, context: rest, result });
  }
}

/** An operation that needs the lock was called on a handle that was already released. */
export class LockNotHeldError extends LocksmithError {
  constructor(lockId: string, message = `lock '${lockId}' is not held by this handle`, options: { cause?: unknown } = {}) {
    super('LOCK_NOT_HELD', message, { ...options, context: { lockId } });
  }
}

/** The backend could not be reached or answered with an error that is not about the lock. */
export class BackendUnavailableError extends LocksmithError {
  constructor(backend: string, message: string, options: { cause?: unknown; context?: Record<string, unknown> } = {}) {
    super('BACKEND_UNAVAILABLE', message, { ...options, context: { backend, ...(options.context ?? {}) } });
  }
}

/** Result of one node in a quorum operation (Redlock, quorum reads). */
export interface NodeResult {
  readonly node: string;
  readonly ok: boolean;
  /** What the node did: `granted` (ok), `refused` (answered no), `error` or `timeout` (no usable answer). */
  readonly outcome?: 'granted' | 'refused' | 'error' | 'timeout';
  readonly error?: unknown;
}

/** A quorum operation did not reach a majority; `nodes` holds every node's result. */
export class QuorumError extends LocksmithError {
  readonly nodes: readonly NodeResult[];
  constructor(message: string, nodes: readonly NodeResult[], options: { cause?: unknown; context?: Record<string, unknown> } = {}) {
    super('QUORUM_FAILED', message, { ...options, context: { nodes, ...(options.context ?? {}) } });
    this.nodes = nodes;
  }
}

/** The locker was closed: pending waits reject with this, new calls too. */
export class LockerClosedError extends LocksmithError {
  constructor(message = 'the locker is closed') {
    super('LOCKER_CLOSED', message);
  }
}

/** {@link FencedResource} rejected an operation whose token is older than the newest it has seen. */
export class StaleTokenError extends LocksmithError {
  readonly token: bigint;
  readonly newest: bigint;
  constructor(token: bigint, newest: bigint, operation: string) {
    super('STALE_TOKEN', `${operation} with fencing token ${token} rejected: token ${newest} was already seen`, {
      context: { token, newest, operation },
    });
    this.token = token;
    this.newest = newest;
  }
}

/** The backend cannot do what was asked (e.g. fair mode on an engine without a queue). */
export class UnsupportedError extends LocksmithError {
  constructor(backend: string, feature: string) {
    super('UNSUPPORTED', `the ${backend} backend does not support ${feature}`, { context: { backend, feature } });
  }
}

/**
 * The backend's driver library (an optional peer dependency) is not installed. The message
 * says what to install, e.g. `npm i ioredis`.
 */
export class DriverMissingError extends LocksmithError {
  /** The npm package to install. */
  readonly driver: string;
  /** `feature` names what needs it, e.g. `the redis backend`. */
  constructor(feature: string, driver: string, options: { cause?: unknown } = {}) {
    super('DRIVER_MISSING', `${feature} needs the '${driver}' package: npm i ${driver}`, {
      ...options,
      context: { feature, driver },
    });
    this.driver = driver;
  }
}

/** True when `err` is a locksmith error with the given code. */
export function isLocksmithError(err: unknown, code?: ErrorCode): err is LocksmithError {
  return err instanceof LocksmithError && (code === undefined || err.code === code);
}

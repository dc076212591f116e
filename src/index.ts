/**
 * locksmith — distributed locks with one API over many coordination stores, fencing tokens
 * on every backend, fair queues, and leases that never fail silently.
 *
 * ```ts
 * import { createLocker } from 'locksmith-dlm';
 * const locker = createLocker('memory://', { ttlMs: 10_000 });
 * await using lock = await locker.lock('account:42', { timeoutMs: 5_000 });
 * ```
 */
export { createLocker, Locker, type ReadWriteLock, type Semaphore } from './locker.js';
export { Election, type ElectionOptions, type LeaderInfo, type Leadership } from './election.js';
export { Lock } from './lock.js';
export { formatIdentity, MAX_META_BYTES, type Identity, type JsonValue } from './observe/identity.js';
export { instrumentPrometheus, type PrometheusOptions } from './metrics.js';
export { instrumentTracing, type TracerLike, type SpanLike } from './tracing.js';
export { FencedResource, type FencedResourceOptions } from './fencing.js';
export { DEFAULT_OPTIONS, minTtlMs, type LockerOptions, type LockOptions, type TryLockOptions, type WithLockOptions } from './options.js';
export type { LockerEvents, LockerEventName, LockEventBase } from './events.js';
export {
  LocksmithError,
  InvalidArgumentError,
  LockTimeoutError,
  LockLostError,
  LockNotHeldError,
  BackendUnavailableError,
  QuorumError,
  LockerClosedError,
  StaleTokenError,
  UnsupportedError,
  DriverMissingError,
  isLocksmithError,
  type ErrorCode,
  type LossReason,
  type NodeResult,
} from './errors.js';
// What `inspect()` answers and what a `Lock` is. The seam a backend implements (`Backend`,
// `AcquireRequest`, `Grant`, …) is for backend authors: `locksmith-dlm/backend`.
export { MAX_LOCK_ID_BYTES, type LockKind, type LockState, type HolderState } from './backend.js';
export { supportedSchemes } from './connect.js';

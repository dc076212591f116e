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
export {
  MAX_LIST_LIMIT,
  type ListOptions,
  type ListResult,
  type LockInfo,
  type LockFamily,
  type HolderInfo,
  type WaiterInfo,
} from './observe/list.js';
export { type WatchEvent, type WatchOptions } from './observe/watch.js';
export { type ForceReleaseOptions } from './observe/break.js';
export type { MultiLock } from './lock-all.js';
export type { RunOnceOptions, RunOnceResult } from './run-once.js';
export { instrumentPrometheus, type PrometheusOptions } from './metrics.js';
export { instrumentTracing, instrumentMeter, type TracerLike, type SpanLike, type MeterLike } from './tracing.js';
export { FencedResource, type FencedResourceOptions } from './fencing.js';
export { DEFAULT_OPTIONS, minTtlMs, type LockerOptions, type LockOptions, type TryLockOptions, type WithLockOptions } from './options.js';
export type { SemaphoreAcquireOptions, SemaphoreTryAcquireOptions } from './options.js';
export type { LockerEvents, LockerEventName, LockEventBase, BackendOperation } from './events.js';
export {
  LocksmithError,
  InvalidArgumentError,
  PermitsMismatchError,
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
// What `inspect()` and `watch()` answer and what a `Lock` is. The seam a backend implements (`Backend`,
// `AcquireRequest`, `Grant`, `list`, …) is for backend authors: `locksmith-dlm/backend`.
export {
  MAX_LOCK_ID_BYTES,
  type LockKind,
  type LockState,
  type HolderState,
  type WaiterState,
  type WatchChange,
  type WatchChangeType,
} from './backend.js';
export { supportedSchemes } from './connect.js';

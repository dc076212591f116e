/**
 * The backend kit (`locksmith-dlm/backend`): everything a backend needs besides its driver,
 * and the only module of locksmith a backend imports. The helpers every engine would
 * otherwise re-write live in src/util/ (one file per concern, shared with the core) and are
 * re-exported here: an abortable sleep, one deadline race, a jittered poll, error wrapping
 * that keeps the real cause, host lists, URL parameters that reject what they do not know,
 * and credential redaction. See docs/architecture.md, "Writing a backend".
 */
import type { Capabilities, LockKind } from '../backend.js';
import { PermitsMismatchError } from '../errors.js';

export type {
  Abandonable,
  AcquireRequest,
  AcquireResult,
  AsyncLossReason,
  Backend,
  BackendFactory,
  Capabilities,
  ConnectOptions,
  Contended,
  Extension,
  Grant,
  HolderState,
  LockKind,
  LockState,
  ListPage,
  ListRequest,
  WaiterState,
  WatchChange,
  WatchChangeType,
  WatchRequest,
} from '../backend.js';
export { isAbandonable, MAX_LOCK_ID_BYTES } from '../backend.js';
export {
  BackendUnavailableError,
  InvalidArgumentError,
  LockLostError,
  PermitsMismatchError,
  QuorumError,
  type NodeResult,
} from '../errors.js';
/** How long before its deadline the core aborts a holder's signal: a backend that signals loss itself keeps the same margin. */
export { lossGuardMs } from '../util/validity.js';
export { MAX_TIMER_MS, raceAbort, sleep, withDeadline, type DeadlineOptions } from '../util/time.js';
export { jitter, pollSleep, type PollSleep, type PollSleepOptions } from '../util/poll.js';
export { causeCode, describeCause, unavailable } from '../util/cause.js';
export { BoundedMap } from '../util/bounded-map.js';
export { encodeHostList } from '../util/host-list.js';
export { hostList, UrlParams, type HostPort, type NumberBounds } from '../util/url-params.js';
export { redact, redactText, secretsOf, urlUserInfo } from '../util/redact.js';
export { HoldTable, type HoldTableOptions, type TrackedHold } from './hold-table.js';
export { openConnected, type Connectable } from './open.js';
export type { EngineManifest } from '../util/engine-manifest.js';
/** Debug logging on `locksmith:backend:<name>`: guard every call with `log.enabled` (docs/observability.md, "Logging"). */
export { backendLog, ms, type Log } from '../observe/log.js';
export { failureCode, logRoundTrips, logWake, wakeClock, type WakeCause } from './round-trip.js';

/** Every capability of the seam: what the memory reference backend and Redis have. */
export const EVERY_CAPABILITY: Capabilities = Object.freeze({
  fair: true,
  shared: true,
  permits: true,
  notify: true,
  lockDelay: true,
  reentrant: true,
  weightedPermits: true,
});

// ---------------------------------------------------------------- one lock across kinds

/** What an acquisition asks, as far as sharing goes. */
export interface KindAsk {
  readonly kind: LockKind;
  readonly permits: number;
  /** Permits the hold takes (AcquireRequest.weight); absent counts as 1. */
  readonly weight?: number;
  readonly fair: boolean;
}

/** A hold or a waiter as far as sharing goes: its kind and (semaphores) the permits it takes. */
export interface Weighed {
  readonly kind: LockKind;
  /** Permits taken; absent counts as 1. */
  readonly weight?: number;
}

/** The permits `holds` take together (each counts its weight, 1 when absent). */
export function permitsInUse(holds: readonly Weighed[]): number {
  let sum = 0;
  for (const h of holds) sum += h.weight ?? 1;
  return sum;
}

/**
 * Refuse a semaphore attempt whose size differs from its live holders' (`held`, undefined
 * when there are none or they are not semaphore holds): one id cannot be counted against
 * two sizes (docs/recipes/semaphore.md).
 */
export function checkPermits(lockId: string, ask: Pick<KindAsk, 'kind' | 'permits'>, held: number | undefined): void {
  if (ask.kind === 'semaphore' && held !== undefined && held !== ask.permits) throw new PermitsMismatchError(lockId, ask.permits, held);
}

/** True for the kinds that hold alone (mutex, write). */
export const exclusiveKind = (k: LockKind): boolean => k === 'mutex' || k === 'write';

/**
 * Can `ask` hold beside `holders`? One id is one lock across kinds: a mutex or a writer
 * alone, readers together, semaphore holders up to the permits (docs/architecture.md).
 */
export function kindsCompatible(holders: readonly Weighed[], ask: Pick<KindAsk, 'kind' | 'permits' | 'weight'>): boolean {
  switch (ask.kind) {
    case 'mutex':
    case 'write':
      return holders.length === 0;
    case 'read':
      return holders.every((h) => h.kind === 'read');
    case 'semaphore':
      return holders.every((h) => h.kind === 'semaphore') && permitsInUse(holders) + (ask.weight ?? 1) <= ask.permits;
  }
}

/**
 * May `ask` pass the waiters `ahead` of it, with `inUse` permits held (a semaphore: the sum
 * of the holders' weights)? Readers never pass a waiting writer, fair or not (a stream of
 * readers must not starve it); fair asks pass nobody, but a fair semaphore ask is let in
 * when the free permits cover every waiter ahead and it together, so that a waiter for
 * several permits is not starved by later single ones.
 */
export function queueAllows(ask: KindAsk, ahead: readonly Weighed[], inUse: number): boolean {
  if (ask.kind === 'read') return !ahead.some((w) => exclusiveKind(w.kind));
  if (!ask.fair) return true;
  if (ask.kind === 'semaphore') return permitsInUse(ahead) + (ask.weight ?? 1) <= ask.permits - inUse;
  return ahead.length === 0;
}

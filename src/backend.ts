/**
 * THE SEAM between the engine-agnostic core and one coordination store.
 *
 * The core owns the wait loop, timeouts, AbortSignals, leases and renewal, validity
 * arithmetic, in-process reentrancy, events and metrics. A backend owns only what its
 * engine does differently: how one attempt is made, how a waiter is woken, how a lease is
 * extended and released, and what a fencing token is.
 *
 * Contract, in the order the core uses it:
 * 1. `tryAcquire(req)` makes ONE attempt. It returns a {@link Grant} or a {@link Contended}.
 *    In fair mode (or for engines that always queue, like ZooKeeper) a contended attempt
 *    with `req.wait === true` may leave a queue entry behind and return it as `ticket`;
 *    the core passes that ticket back in the next attempt of the same acquisition and
 *    calls `cancel()` with it if the acquisition is abandoned (timeout, abort, close).
 *    With `req.wait === false` (a soft tryLock) the backend leaves nothing behind.
 * 2. `waitForChange(lockId, ticket, signal)` resolves when another attempt is worth making:
 *    a notification (pub/sub, watch, NOTIFY) or, at the latest, a bounded fallback poll.
 *    It never busy-loops; it resolves or rejects promptly when `signal` aborts. Its timers
 *    stay ref'd (a caller awaiting a lock keeps the process alive) and are cleared when it
 *    settles; only background timers (keep-alives, renewals) are `unref()`'d.
 * 3. `extend(grant, ttlMs)` renews the lease. It rejects with `LockLostError` when the
 *    backend says the lock is not held by this grant any more; with another error
 *    (typically `BackendUnavailableError`) when it could not tell.
 * 4. `release(grant)` is idempotent and resolves `false` when the grant was no longer held
 *    (never an error for an expired lease); it never disturbs a later holder.
 *
 * Time: the core reads its monotonic clock just before calling `tryAcquire` / `extend` and
 * computes validity as `sentAt + grant.ttlMs − drift`. A backend that loses time inside one
 * attempt (Redlock: the elapsed time over N nodes) returns the shorter `ttlMs` it can vouch
 * for, measured from the moment the core sent the request.
 */

/** What kind of hold a request asks for. */
export type LockKind = 'mutex' | 'read' | 'write' | 'semaphore';

/** What an engine can do. The core refuses options a backend cannot honour. */
export interface Capabilities {
  /** Grants in arrival order when `req.fair` is true. */
  readonly fair: boolean;
  /** Read-write locks (`read` / `write` kinds). */
  readonly shared: boolean;
  /** Semaphores (`semaphore` kind with `permits`). */
  readonly permits: boolean;
  /** `waitForChange` is woken by the engine (not only by polling). */
  readonly notify: boolean;
  /** Honours `req.lockDelayMs` (a vanished holder's lock stays blocked that much longer). */
  readonly lockDelay: boolean;
  /** The same `ownerId` acquiring again (from any client) re-enters with a count. */
  readonly reentrant: boolean;
}

/** One acquisition attempt. */
export interface AcquireRequest {
  /** Validated by the core: non-empty string of at most `MAX_LOCK_ID_BYTES` UTF-8 bytes. */
  readonly lockId: string;
  readonly kind: LockKind;
  /** Semaphore size (max concurrent holders). 1 for `mutex`, `read`, `write`. */
  readonly permits: number;
  /** Unique id of the holder (random per acquisition unless the user passed `owner`). */
  readonly ownerId: string;
  /** Requested lease length in ms. */
  readonly ttlMs: number;
  /** Grants in arrival order (only sent when `capabilities.fair`). */
  readonly fair: boolean;
  /** After a holder vanishes without releasing, keep the lock blocked this long (0 = off). */
  readonly lockDelayMs: number;
  /** false for a one-shot tryLock: leave no queue entry behind. */
  readonly wait: boolean;
  /** The queue position returned by the previous attempt of this acquisition, if any. */
  readonly ticket?: unknown;
  /**
   * Called by backends that learn of a loss asynchronously (ZooKeeper session expiry, a
   * deleted node, a dropped connection that carried the lease). Safe to call more than once.
   */
  readonly onLost: (reason: 'not-held' | 'session', cause?: unknown) => void;
}

/** A successful attempt. */
export interface Grant {
  readonly lockId: string;
  readonly kind: LockKind;
  readonly ownerId: string;
  /** Fencing token: strictly increasing per lockId over all grants (re-entry keeps the token). */
  readonly token: bigint;
  /** Lease length the backend vouches for, measured from when the core sent the request. */
  readonly ttlMs: number;
  /** True when this grant re-entered a hold of the same `ownerId` (server-side count). */
  readonly reentered: boolean;
  /** Backend-private data the backend needs to extend/release (node path, random value…). */
  readonly data?: unknown;
}

/** An attempt that did not get the lock. */
export interface Contended {
  /** Queue position to pass back into the next attempt (and to `cancel`). */
  readonly ticket?: unknown;
}

/** Result of {@link Backend.tryAcquire}. */
export type AcquireResult =
  | { readonly granted: true; readonly grant: Grant }
  | { readonly granted: false; readonly contended: Contended };

/** Result of a successful {@link Backend.extend}. */
export interface Extension {
  /** Lease length vouched for, measured from when the core sent the extend request. */
  readonly ttlMs: number;
}

/** One holder as the backend sees it. */
export interface HolderState {
  readonly ownerId: string;
  readonly kind: LockKind;
  readonly token: bigint;
  /** Remaining lease in ms as the backend sees it, when it knows. */
  readonly expiresInMs?: number;
  /** Re-entry count (1 when not re-entered), when the backend keeps one. */
  readonly count?: number;
}

/** What `locksmith status` shows. */
export interface LockState {
  readonly lockId: string;
  readonly holders: readonly HolderState[];
  /** Number of queued waiters, when the engine keeps a queue (else 0). */
  readonly waiters: number;
  /** The last fencing token issued for this lockId, when known. */
  readonly lastToken?: bigint;
}

/** The interface every engine implements. See the module comment for the contract. */
export interface Backend {
  /** Short engine name used in errors and docs, e.g. `redis`. */
  readonly name: string;
  readonly capabilities: Capabilities;
  tryAcquire(req: AcquireRequest): Promise<AcquireResult>;
  waitForChange(lockId: string, ticket: unknown, signal: AbortSignal): Promise<void>;
  /** Abandon a queue position left by a contended attempt. Idempotent, never throws for a missing entry. */
  cancel(req: AcquireRequest, ticket: unknown): Promise<void>;
  extend(grant: Grant, ttlMs: number): Promise<Extension>;
  release(grant: Grant): Promise<boolean>;
  inspect(lockId: string): Promise<LockState>;
  /** Close connections. Leases not released expire on the server by their ttl. */
  close(): Promise<void>;
  /**
   * Optional, for crash simulation (`abandon()` in `locksmith/testing`): drop connections
   * WITHOUT the clean-up a graceful close does (a ZooKeeper close deletes ephemeral nodes at
   * once; a crash leaves them until the session expires). Defaults to `close()`.
   */
  abandon?(): Promise<void>;
}

/** Upper bound on a lockId's UTF-8 length; every backend accepts at least this much. */
export const MAX_LOCK_ID_BYTES = 1024;

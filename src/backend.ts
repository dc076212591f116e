/**
 * THE SEAM between the engine-agnostic core and one coordination store.
 *
 * The core owns the wait loop, timeouts, AbortSignals, leases and renewal, validity
 * arithmetic, in-process reentrancy, events and metrics. A backend owns only what its
 * engine does differently: how one attempt is made, how a waiter is woken, how a lease is
 * extended and released, and what a fencing token is. See docs/architecture.md.
 *
 * Contract, in the order the core uses it:
 * 1. `tryAcquire(req)` makes ONE attempt. It returns a {@link Grant} or a {@link Contended}.
 *    In fair mode (or for engines that always queue, like ZooKeeper) a contended attempt
 *    with `req.wait === true` may leave a queue entry behind and return it as `ticket`;
 *    the core passes that ticket back in the next attempt of the same acquisition and
 *    calls `cancel()` with it if the acquisition is abandoned (timeout, abort, close).
 *    With `req.wait === false` (a soft tryLock) the backend leaves nothing behind.
 *    An attempt that blocks (an SQL lock wait, a Redlock fan-out, an LWT retry) stops when
 *    `req.signal` aborts; the core then cancels the ticket and, best effort, releases by
 *    owner (`cancel` with no ticket), because the attempt may have landed on the server.
 *    The core does not wait for the attempt to stop: it answers its caller when the signal
 *    aborts (or a bounded call's first attempt outlasts its bound, docs/architecture.md),
 *    and gives back what the attempt returns afterwards (`release` of a grant, `cancel` of
 *    a ticket, or of a fresh owner's leftovers when it fails other than by the abort).
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
 * A grant may arrive with a `confirmation` still in flight (see {@link Grant.confirmation}):
 * the core holds at once on what the grant vouches for and extends the lease when the
 * confirmation lands, as it would after a renewal.
 *
 * Time: the core reads its monotonic clock just before calling `tryAcquire` / `extend` and
 * computes validity as `sentAt + grant.ttlMs − drift`. A backend that loses time inside one
 * attempt (Redlock: the elapsed time over N nodes) returns the shorter `ttlMs` it can vouch
 * for, measured from the moment the core sent the request. A re-entry (`reentered: true`)
 * vouches for its `ttlMs` too: the backend extends the shared hold to cover it.
 *
 * Types: `Backend<Ticket, Data>` lets each engine type its own queue tickets and grant data.
 * The core never looks inside either; it only hands back what the same backend gave it.
 */

/** What kind of hold a request asks for. */
export type LockKind = 'mutex' | 'read' | 'write' | 'semaphore';

/**
 * What an engine can do. The core refuses options a backend cannot honour, and the
 * conformance suite reads these flags to choose its cases.
 */
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
  /**
   * A semaphore hold may take several permits at once ({@link AcquireRequest.weight} > 1),
   * counted as the sum of the holders' weights. Absent or false: the core answers
   * `UnsupportedError` for a weight above 1, before anything is sent.
   */
  readonly weightedPermits?: boolean;
}

/** Why a backend reports a loss it learned of asynchronously. */
export type AsyncLossReason = 'not-held' | 'session';

/** One acquisition attempt. */
export interface AcquireRequest<Ticket = unknown> {
  /** Validated by the core: non-empty string of at most `MAX_LOCK_ID_BYTES` UTF-8 bytes. */
  readonly lockId: string;
  readonly kind: LockKind;
  /** Semaphore size (max permits in use at once). 1 for `mutex`, `read`, `write`. */
  readonly permits: number;
  /**
   * How many of the `permits` this hold takes: an integer in [1, permits], validated by the
   * core; 1 for `mutex`, `read`, `write` and by default (the core always sets it; absent
   * counts as 1). A semaphore counts the permits in use as the sum of its holders' weights. A
   * semaphore whose current holders were opened with another `permits` refuses the attempt
   * with `PermitsMismatchError`.
   */
  readonly weight?: number;
  /** Unique id of the holder (random per acquisition unless the user passed `owner`). */
  readonly ownerId: string;
  /**
   * True when `ownerId` was generated for this acquisition: no other hold can carry it, so
   * `cancel` may remove anything of that owner. False for a user's explicit `owner`, whose
   * other holds (re-entered from elsewhere) must be left alone.
   */
  readonly freshOwner: boolean;
  /** Requested lease length in ms. */
  readonly ttlMs: number;
  /** Grants in arrival order (only sent when `capabilities.fair`). */
  readonly fair: boolean;
  /** After a holder vanishes without releasing, keep the lock blocked this long (0 = off). */
  readonly lockDelayMs: number;
  /** false for a one-shot tryLock: leave no queue entry behind. */
  readonly wait: boolean;
  /** The queue position returned by the previous attempt of this acquisition, if any. */
  readonly ticket: Ticket | undefined;
  /**
   * Aborted when the caller gives up (timeout, abort, close). An attempt that can block
   * stops promptly and rejects with `signal.reason`.
   */
  readonly signal: AbortSignal;
  /**
   * Called by backends that learn of a loss asynchronously (ZooKeeper session expiry, a
   * deleted node, a dropped connection that carried the lease). Safe to call more than once.
   */
  readonly onLost: (reason: AsyncLossReason, cause?: unknown) => void;
  /**
   * Who asks: the locker's {@link Identity} encoded once per locker as compact JSON of at
   * most {@link MAX_IDENTITY_BYTES} UTF-8 bytes. A backend stores it verbatim beside the hold
   * and the queue entry it writes anyway (no extra round trip) and hands it back, unparsed,
   * in {@link HolderState.identity} / {@link WaiterState.identity}. docs/observability.md.
   */
  readonly identity: string;
}

/** A successful attempt. */
export interface Grant<Data = unknown> {
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
  readonly data: Data;
  /**
   * Set when the backend granted on a notification before the server confirmed the full
   * lease (a fair hand-off whose wake-up message carried the grant: the waiter holds on
   * receipt, docs/backends/redis.md). `ttlMs` then covers only what the hand-off itself
   * vouches for. The promise resolves with the full lease, measured from when the core sent
   * the request, once the server confirmed it; it rejects with `LockLostError` when the
   * hand-off was gone, with another error when the backend could not tell. The core treats
   * it as a renewal already in flight. A backend attaches its own rejection handler.
   */
  readonly confirmation?: Promise<Extension>;
}

/** An attempt that did not get the lock. */
export interface Contended<Ticket = unknown> {
  /** Queue position to pass back into the next attempt (and to `cancel`). */
  readonly ticket: Ticket | undefined;
}

/** Result of {@link Backend.tryAcquire}. */
export type AcquireResult<Ticket = unknown, Data = unknown> =
  { readonly granted: true; readonly grant: Grant<Data> } | { readonly granted: false; readonly contended: Contended<Ticket> };

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
  /** Semaphore holds: the permits this hold takes ({@link AcquireRequest.weight}), when not 1. */
  readonly weight?: number;
  /** The holder's identity as stored ({@link AcquireRequest.identity}), when the backend has it. */
  readonly identity?: string;
  /** When the hold began, in ms since the epoch on the engine's clock, when known. */
  readonly acquiredAt?: number;
  /** When the lease ends, in ms since the epoch on the engine's clock, when known. */
  readonly leaseEndsAt?: number;
}

/** One queued waiter as the backend sees it (engines that keep a queue). */
export interface WaiterState {
  readonly ownerId: string;
  readonly kind: LockKind;
  /** True when it waits in the fair (FIFO) queue. */
  readonly fair: boolean;
  /** The waiter's identity as stored ({@link AcquireRequest.identity}), when the backend has it. */
  readonly identity?: string;
  /** When it joined the queue, in ms since the epoch on the engine's clock, when known. */
  readonly since?: number;
}

/** What `locksmith status` shows. */
export interface LockState {
  readonly lockId: string;
  readonly holders: readonly HolderState[];
  /** Number of queued waiters, when the engine keeps a queue (else 0). */
  readonly waiters: number;
  /** The last fencing token issued for this lockId, when known. */
  readonly lastToken?: bigint;
  /** The queued waiters in queue order, when the engine keeps a queue it can read. */
  readonly queue?: readonly WaiterState[];
}

/** One page request of {@link Backend.list}. */
export interface ListRequest {
  /** Only lock ids that start with this (validated by the core; may be empty). */
  readonly prefix: string;
  /** At most this many locks in the page (1..1000, validated by the core). */
  readonly limit: number;
  /** The backend's own cursor from the previous page, or undefined for the first page. */
  readonly cursor: string | undefined;
  readonly signal: AbortSignal;
}

/** One page of {@link Backend.list}. */
export interface ListPage {
  /** Locks that have a holder or a waiter, in the backend's order (stable across pages). */
  readonly locks: readonly LockState[];
  /** Where the next page starts; undefined when this was the last page. */
  readonly cursor: string | undefined;
}

/** What {@link Backend.watch} is asked for. */
export interface WatchRequest {
  /** Only lock ids that start with this (validated by the core; may be empty). */
  readonly prefix: string;
  /** Aborted when the watcher stops: the iterator ends and every subscription is dropped. */
  readonly signal: AbortSignal;
}

/** What happened to a lock, as `locker.watch()` reports it. docs/observability.md, "Watching". */
export type WatchChangeType = 'acquired' | 'released' | 'lost' | 'expired' | 'waiting' | 'abandoned';

/** One change {@link Backend.watch} reports (identity still encoded; the core decodes it). */
export interface WatchChange {
  readonly type: WatchChangeType;
  readonly lockId: string;
  readonly kind: LockKind;
  readonly ownerId: string;
  /** The holder's or waiter's identity as stored ({@link AcquireRequest.identity}), when known. */
  readonly identity?: string;
  /** The hold's fencing token (hold changes only). */
  readonly token?: bigint;
  /** When it happened (or was seen), ms since the epoch. */
  readonly at: number;
}

/**
 * The interface every engine implements. See the module comment for the contract and
 * docs/architecture.md for the checklist of writing one.
 */
export interface Backend<Ticket = unknown, Data = unknown> {
  /** Short engine name used in errors and docs, e.g. `redis`. */
  readonly name: string;
  readonly capabilities: Capabilities;
  tryAcquire(req: AcquireRequest<Ticket>): Promise<AcquireResult<Ticket, Data>>;
  waitForChange(lockId: string, ticket: Ticket | undefined, signal: AbortSignal): Promise<void>;
  /**
   * Abandon an acquisition: remove the queue position `ticket` (when given) and, when
   * `req.freshOwner`, best effort any hold or queue entry of `req.ownerId` that an attempt
   * whose reply was lost may have left on the server. Idempotent, never throws for a
   * missing entry.
   */
  cancel(req: AcquireRequest<Ticket>, ticket: Ticket | undefined): Promise<void>;
  extend(grant: Grant<Data>, ttlMs: number): Promise<Extension>;
  release(grant: Grant<Data>): Promise<boolean>;
  inspect(lockId: string): Promise<LockState>;
  /**
   * One bounded page of the locks that exist (never one unbounded read: SCAN, keyset
   * paging, ranges with a limit). Optional while engines gain it; the core answers
   * `UnsupportedError` without it. A cursor the backend cannot read rejects with
   * `InvalidArgumentError` (argument `cursor`). docs/observability.md.
   */
  list?(req: ListRequest): Promise<ListPage>;
  /**
   * Break the lock on purpose: end every hold of `lockId` as if its lease had run out and
   * bump its fencing counter, so that a broken holder's token is refused by any fenced
   * resource. Resolves how many holds were ended. Optional while engines gain it.
   */
  forceRelease?(lockId: string): Promise<number>;
  /**
   * Changes of the locks under `req.prefix` as the engine notifies them (keyspace or own
   * pub/sub, LISTEN/NOTIFY, watches), until `req.signal` aborts. Optional: without it the
   * core polls {@link Backend.list} and diffs the pages (docs/observability.md, "Watching").
   */
  watch?(req: WatchRequest): AsyncIterable<WatchChange>;
  /**
   * The lock ids under `req.prefix` whose holds or queue changed, as the engine notifies them
   * (own pub/sub, LISTEN/NOTIFY, watches). Yields `null` once as soon as the subscription is
   * in place (every later change is reported), and again after a lost subscription was
   * re-established; then lock ids as they change, possibly repeated or coalesced, in any
   * order. Ends when `req.signal` aborts. The core lists once, then inspects each notified
   * lock and diffs it, re-inspects holds when their lease ends, and re-lists on `null` and
   * every 30 s (docs/observability.md, "Watching"). Simpler to write than {@link Backend.watch}.
   */
  changes?(req: WatchRequest): AsyncIterable<string | null>;
  /** Close connections. Leases not released expire on the server by their ttl. */
  close(): Promise<void>;
}

/**
 * Testing only (`abandon()` in `locksmith-dlm/testing`): a backend that can drop its
 * connections WITHOUT the clean-up a graceful close does (a ZooKeeper close deletes
 * ephemeral nodes at once; a crash leaves them until the session expires) implements this.
 * Not part of the production contract; backends without it are simply closed.
 */
export interface Abandonable {
  abandon(): Promise<void>;
}

/** True when `backend` implements the testing-only {@link Abandonable} hook. */
export function isAbandonable(backend: object): backend is Abandonable {
  return typeof (backend as Partial<Abandonable>).abandon === 'function';
}

/** Options passed from `createLocker` to a backend factory. */
export interface ConnectOptions {
  /** Upper bound for the backend's first connection before `BackendUnavailableError`. */
  readonly connectTimeoutMs?: number;
  /**
   * Aborted when nobody waits for the connection any more (the locker was closed). A
   * factory stops connecting and releases what it opened; the core has already given up.
   */
  readonly signal?: AbortSignal;
}

/** What each `src/backends/<engine>/index.ts` exports as `createBackend`. */
export type BackendFactory = (url: URL, options: ConnectOptions) => Backend | Promise<Backend>;

/** Upper bound on {@link AcquireRequest.identity}'s UTF-8 length (a holder's host, pid, name and meta). */
export const MAX_IDENTITY_BYTES = 1024;

/** Upper bound on a lockId's UTF-8 length; every backend accepts at least this much. */
export const MAX_LOCK_ID_BYTES = 1024;

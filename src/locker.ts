/**
 * The Locker: lock / tryLock / withLock / readWriteLock / semaphore / election over any
 * backend. The wait loop is in acquire.ts, re-entry in holds.ts, the lease in lease.ts.
 */
import { randomBytes } from 'node:crypto';
import { setMaxListeners } from 'node:events';
import { isAbandonable, type Backend, type Grant, type LockKind, type LockState } from './backend.js';
import { connect, parseBackendUrl } from './connect.js';
import { InvalidArgumentError, LockerClosedError, LockLostError, UnsupportedError } from './errors.js';
import { TypedEmitter } from './events.js';
import { Holds } from './holds.js';
import { Lease, now } from './lease.js';
import { Lock } from './lock.js';
import { acquire, tryMode, waitMode, type AcquireHost, type AcquireMode } from './acquire.js';
import { Election, type ElectionOptions } from './election.js';
import {
  resolveCallSettings,
  resolveLockerOptions,
  validateLockId,
  validatePermits,
  type CallSettings,
  type LockerOptions,
  type LockOptions,
  type TryLockOptions,
  type WithLockOptions,
} from './options.js';
import { unavailable, withDeadline } from './backends/kit.js';
import { lockAll, tryLockAll, type MultiLock } from './lock-all.js';

/** @internal The hook `abandon()` in `testing.ts` uses to simulate a crash. */
export const kAbandon = Symbol('locksmith.abandon');

let lockerSeq = 0;

/**
 * A holder id unique across processes and acquisitions: 16 random bytes drawn once per
 * process, then a counter (the compare-and-delete of every backend needs uniqueness, not
 * fresh randomness per acquisition, and `randomBytes` on every lock was measurable).
 */
export function randomOwnerId(): string {
  ownerSeq += 1;
  return `${ownerPrefix}${ownerSeq.toString(36)}`;
}
const ownerPrefix = `${randomBytes(16).toString('base64url')}.`;
let ownerSeq = 0;

/** The read and write sides of one read-write lock. */
export interface ReadWriteLock {
  readonly lockId: string;
  /** Shared hold: many readers together, never with a writer. Waits like `lock()`. */
  read(options?: LockOptions): Promise<Lock>;
  /** Exclusive hold: alone. A waiting writer is not starved by a stream of readers. */
  write(options?: LockOptions): Promise<Lock>;
  /** One attempt (or wait up to `waitMs`) for a shared hold; `null` when a writer holds or waits. */
  tryRead(options?: TryLockOptions): Promise<Lock | null>;
  /** One attempt (or wait up to `waitMs`) for the exclusive hold; `null` when held. */
  tryWrite(options?: TryLockOptions): Promise<Lock | null>;
}

/** A counting semaphore: at most `permits` holders at once. */
export interface Semaphore {
  readonly lockId: string;
  readonly permits: number;
  /** Wait for a permit (like `lock()`). */
  acquire(options?: LockOptions): Promise<Lock>;
  /** One attempt (or wait up to `waitMs`) for a permit; `null` when all are taken. */
  tryAcquire(options?: TryLockOptions): Promise<Lock | null>;
}

/**
 * Distributed locks over one backend. Create it with {@link createLocker}; one locker
 * models one client (one process). Events: see {@link LockerEvents}.
 */
export class Locker extends TypedEmitter {
  /** The resolved options (defaults filled in). */
  readonly options: LockerOptions;
  readonly #source: URL | Backend;
  #backend: Promise<Backend> | undefined;
  /** The backend once connected (the hot path skips the promise). */
  #ready: Backend | undefined;
  #closed = false;
  #closing: Promise<void> | undefined;
  /** Aborted on close: a backend factory still connecting stops. */
  readonly #closeController = new AbortController();
  /** Every waiting call's controller: close() aborts each (no listener per call on one signal). */
  readonly #waits = new Set<AbortController>();
  readonly #pending = new Set<Promise<unknown>>();
  readonly #leases = new Set<Lease>();
  readonly #holds = new Holds(++lockerSeq);
  readonly #host: AcquireHost;

  /** @internal Use {@link createLocker}. */
  constructor(source: URL | Backend, options: LockerOptions) {
    super();
    this.#source = source;
    this.options = options;
    this.#host = this.#makeHost();
    // Every uncontended attempt in flight borrows this signal (acquire.ts): many at once is normal.
    setMaxListeners(0, this.#closeController.signal);
  }

  /** Wait until the lock is held (mutex). Rejects `LockTimeoutError` after `timeoutMs`. */
  lock(lockId: string, options?: LockOptions): Promise<Lock> {
    return this.#acquire(lockId, 'mutex', 1, options, waitMode) as Promise<Lock>;
  }

  /** One attempt (or wait up to `waitMs`): the lock, or `null` when another holds it. */
  tryLock(lockId: string, options?: TryLockOptions): Promise<Lock | null> {
    return this.#acquire(lockId, 'mutex', 1, options, tryMode);
  }

  /**
   * Run `fn` holding the lock; release afterwards. If `fn` throws, its error is what
   * `withLock` rejects with (a failed release is attached as `releaseError`). If the lock
   * was lost while `fn` ran, rejects with `LockLostError` whose `result` is what `fn`
   * returned (unless `rejectOnLoss: false`). Nested calls: see `LockOptions.reentrant`.
   */
  async withLock<T>(lockId: string, fn: (lock: Lock) => Promise<T> | T, options?: WithLockOptions): Promise<T> {
    if (typeof fn !== 'function') throw new InvalidArgumentError('fn', 'withLock needs a function');
    const rejectOnLoss = resolveCallSettings(this.options, options).rejectOnLoss;
    const lock = await this.lock(lockId, options);
    let outcome: { ok: true; value: T } | { ok: false; error: unknown };
    try {
      outcome = { ok: true, value: await this.#holds.run(lock.lease, () => fn(lock)) };
    } catch (error) {
      outcome = { ok: false, error };
    }
    const lost: unknown = lock.signal.aborted ? lock.signal.reason : undefined;
    try {
      await lock.release();
    } catch (releaseError) {
      if (outcome.ok) throw releaseError;
      attachReleaseError(outcome.error, releaseError);
    }
    if (!outcome.ok) throw outcome.error;
    if (rejectOnLoss && lost instanceof LockLostError) throw lost.withResult(outcome.value);
    return outcome.value;
  }

  /**
   * Hold every id of `lockIds` at once (all-or-nothing), taken sorted and de-duplicated so
   * that callers with overlapping sets never deadlock; see docs/recipes/mutex.md.
   */
  lockAll(lockIds: readonly string[], options?: LockOptions): Promise<MultiLock> {
    return lockAll(this, lockIds, options);
  }

  /** One attempt (or wait up to `waitMs`) at every id: the set, or `null` when any is held. */
  tryLockAll(lockIds: readonly string[], options?: TryLockOptions): Promise<MultiLock | null> {
    return tryLockAll(this, lockIds, options);
  }

  /** A read-write lock named `lockId`. */
  readWriteLock(lockId: string): ReadWriteLock {
    const id = validateLockId(lockId);
    return {
      lockId: id,
      read: (o) => this.#acquire(id, 'read', 1, o, waitMode) as Promise<Lock>,
      write: (o) => this.#acquire(id, 'write', 1, o, waitMode) as Promise<Lock>,
      tryRead: (o) => this.#acquire(id, 'read', 1, o, tryMode),
      tryWrite: (o) => this.#acquire(id, 'write', 1, o, tryMode),
    };
  }

  /** A semaphore named `lockId` with `permits` concurrent holders. */
  semaphore(lockId: string, options: { permits: number }): Semaphore {
    const id = validateLockId(lockId);
    if (typeof options !== 'object' || options === null) throw new InvalidArgumentError('permits', 'semaphore needs { permits }');
    const n = validatePermits(options.permits);
    return {
      lockId: id,
      permits: n,
      acquire: (o) => this.#acquire(id, 'semaphore', n, o, waitMode) as Promise<Lock>,
      tryAcquire: (o) => this.#acquire(id, 'semaphore', n, o, tryMode),
    };
  }

  /** A leader election named `name` (a lock with a leadership view); see docs/recipes/election.md. */
  election(name: string, options?: ElectionOptions): Election {
    return new Election(this, validateLockId(name, 'name'), options);
  }

  /** What the backend knows of `lockId`: holders, tokens, expiry, waiters. */
  async inspect(lockId: string): Promise<LockState> {
    const id = validateLockId(lockId);
    this.#assertOpen();
    const backend = await this.#getBackend();
    try {
      return await backend.inspect(id);
    } catch (err) {
      throw unavailable(backend.name, `inspect of '${id}'`, err);
    }
  }

  /** The backend's name and capabilities (connects if needed). */
  async backend(): Promise<Backend> {
    this.#assertOpen();
    return this.#getBackend();
  }

  /** True after `close()` was called. */
  get closed(): boolean {
    return this.#closed;
  }

  /**
   * Reject every waiting call with `LockerClosedError`, release every held lock (their
   * signals abort with reason `closed`), stop every timer, close the backend. Idempotent.
   */
  close(): Promise<void> {
    if (this.#closing) return this.#closing;
    this.#stopEverything();
    this.#closing = (async () => {
      await Promise.allSettled([...this.#pending]);
      const leases = [...this.#leases];
      for (const lease of leases) lease.lose('closed');
      await Promise.allSettled(leases.map((l) => l.release()));
      const backend = await this.#connectedBackend();
      await backend?.close().catch(() => undefined);
    })();
    return this.#closing;
  }

  /** `await using locker = createLocker(...)` closes it. */
  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }

  /** @internal Simulate a crash: no more renewals, no releases, connections dropped. */
  async [kAbandon](): Promise<void> {
    this.#stopEverything();
    await Promise.allSettled([...this.#pending]);
    for (const lease of this.#leases) lease.abandon();
    this.#leases.clear();
    this.#holds.clear();
    const backend = await this.#connectedBackend();
    if (!backend) return;
    await (isAbandonable(backend) ? backend.abandon() : backend.close()).catch(() => undefined);
  }

  #stopEverything(): void {
    this.#closed = true;
    const closed = new LockerClosedError();
    this.#closeController.abort(closed);
    for (const c of [...this.#waits]) c.abort(closed);
  }

  async #connectedBackend(): Promise<Backend | undefined> {
    return this.#backend ? this.#backend.catch(() => undefined) : undefined;
  }

  #assertOpen(): void {
    if (this.#closed) throw new LockerClosedError();
  }

  /** The backend; the first call connects (bounded by `connectTimeoutMs` and close()). */
  #getBackend(): Promise<Backend> {
    if (!this.#backend) {
      const source = this.#source;
      const p =
        source instanceof URL
          ? connect(source, { connectTimeoutMs: this.options.connectTimeoutMs, signal: this.#closeController.signal })
          : Promise.resolve(source);
      this.#backend = p;
      p.then(
        (b) => {
          if (this.#backend === p) this.#ready = b;
        },
        () => {
          // A failed connection is retried by the next call instead of being cached forever.
          if (this.#backend === p) this.#backend = undefined;
        },
      );
    }
    return this.#backend;
  }

  #acquire(
    lockId: string,
    kind: LockKind,
    permits: number,
    options: LockOptions | TryLockOptions | undefined,
    mode: (s: CallSettings) => AcquireMode,
  ): Promise<Lock | null> {
    const p = (async () => {
      this.#assertOpen();
      const id = validateLockId(lockId);
      const settings = resolveCallSettings(this.options, options);
      settings.signal?.throwIfAborted();
      const ownerId = settings.owner ?? randomOwnerId();
      return acquire(this.#host, { lockId: id, kind, permits, settings, mode: mode(settings), ownerId });
    })();
    this.#pending.add(p);
    const forget = (): void => {
      this.#pending.delete(p);
    };
    p.then(forget, forget);
    return p;
  }

  #makeHost(): AcquireHost {
    return {
      holds: this.#holds,
      closeSignal: this.#closeController.signal,
      backend: (signal) => this.#ready ?? withDeadline(this.#getBackend(), { signal }),
      checkCapabilities: checkCapabilities,
      track: (c) => {
        this.#waits.add(c);
        if (this.#closed) c.abort(new LockerClosedError());
        return () => this.#waits.delete(c);
      },
      lease: (backend, grant, sentAt, s) => this.#newLease(backend, grant, sentAt, s),
      adopt: (lease, owner) => {
        this.#leases.add(lease);
        this.#holds.rememberOwner(lease, owner);
      },
      handle: (lease, reentered, done) =>
        new Lock(lease, reentered, async (l) => {
          try {
            await this.#releaseHandle(l);
          } finally {
            done?.();
          }
        }),
      waiting: (lockId, ownerId, kind) => this.emit('waiting', { lockId, ownerId, kind }),
      acquired: (lease, waitedMs, reentered) => {
        const g = lease.grant;
        this.emit('acquired', { lockId: g.lockId, ownerId: g.ownerId, kind: g.kind, token: g.token, waitedMs, reentered });
      },
    };
  }

  #newLease(backend: Backend, grant: Grant, sentAt: number, s: CallSettings): Lease {
    const settings = { ttlMs: s.ttlMs, autoExtend: s.autoExtend, driftFactor: this.options.driftFactor };
    return new Lease(backend, grant, sentAt, settings, {
      onExtended: (lease) => {
        const g = lease.grant;
        this.emit('extended', { lockId: g.lockId, ownerId: g.ownerId, kind: g.kind, token: g.token, validUntil: lease.validUntil });
      },
      onLost: (lease, error) => {
        const g = lease.grant;
        this.emit('lost', { lockId: g.lockId, ownerId: g.ownerId, kind: g.kind, token: g.token, error });
      },
      onEnded: (lease) => {
        this.#leases.delete(lease);
        this.#holds.forget(lease);
      },
    });
  }

  async #releaseHandle(lock: Lock): Promise<void> {
    const lease = lock.lease;
    const wasHeld = lease.state === 'held';
    await lease.unref();
    // Still referenced by an outer handle, or lost before: no release event.
    if (!wasHeld || (lease.state as string) !== 'released') return;
    const released = await lease.release();
    const g = lease.grant;
    this.emit('released', {
      lockId: g.lockId,
      ownerId: g.ownerId,
      kind: g.kind,
      token: g.token,
      heldMs: now() - lease.acquiredAt,
      released,
    });
  }
}

function checkCapabilities(backend: Backend, kind: LockKind, s: CallSettings): void {
  const c = backend.capabilities;
  if ((kind === 'read' || kind === 'write') && !c.shared) throw new UnsupportedError(backend.name, 'read-write locks');
  if (kind === 'semaphore' && !c.permits) throw new UnsupportedError(backend.name, 'semaphores');
  if (s.fair && !c.fair) throw new UnsupportedError(backend.name, 'fair mode');
  if (s.lockDelayMs > 0 && !c.lockDelay) throw new UnsupportedError(backend.name, 'lockDelayMs');
}

/** Keep the callback's error; hang the release failure on it where it can carry one. */
function attachReleaseError(error: unknown, releaseError: unknown): void {
  if (typeof error === 'object' && error !== null && Object.isExtensible(error)) {
    Object.defineProperty(error, 'releaseError', { value: releaseError, enumerable: false, configurable: true, writable: true });
  }
}

/**
 * Create a locker.
 *
 * @param urlOrBackend a backend URL (`memory://`, `redis://host:port`, `zookeeper://h1,h2/chroot`,
 *   `cassandra://h1,h2/keyspace`, …) or a {@link Backend} instance (the locker takes ownership
 *   and closes it). Defaults to `$LOCKSMITH_BACKEND`, else `memory://` (in-process only).
 * @param options lease defaults, see {@link LockerOptions}.
 * @throws InvalidArgumentError for a malformed URL, an unknown scheme or bad options.
 */
export function createLocker(urlOrBackend?: string | Backend, options?: Partial<LockerOptions>): Locker {
  const resolved = resolveLockerOptions(options);
  if (urlOrBackend === undefined) urlOrBackend = process.env.LOCKSMITH_BACKEND || 'memory://';
  if (typeof urlOrBackend === 'string') return new Locker(parseBackendUrl(urlOrBackend), resolved);
  if (typeof urlOrBackend === 'object' && urlOrBackend !== null && typeof urlOrBackend.tryAcquire === 'function') {
    return new Locker(urlOrBackend, resolved);
  }
  throw new InvalidArgumentError('urlOrBackend', 'createLocker needs a backend URL string or a Backend');
}

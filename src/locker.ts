/**
 * The Locker: lock / tryLock / withLock / readWriteLock / semaphore over any backend, and
 * the one wait loop every backend shares (Curator's LockInternals, written once).
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import { randomBytes } from 'node:crypto';
import type { AcquireRequest, Backend, LockKind, LockState } from './backend.js';
import { connect, parseBackendUrl } from './connect.js';
import {
  BackendUnavailableError,
  InvalidArgumentError,
  LockerClosedError,
  LocksmithError,
  LockTimeoutError,
  UnsupportedError,
  type LossReason,
} from './errors.js';
import { TypedEmitter } from './events.js';
import { Lease, now } from './lease.js';
import { Lock } from './lock.js';
import {
  resolveCallSettings,
  resolveLockerOptions,
  validateDuration,
  validateLockId,
  validatePermits,
  type CallSettings,
  type LockerOptions,
  type LockOptions,
  type TryLockOptions,
} from './options.js';

/** Leases held by the current async call chain (nested withLock re-enters through this). */
const chainHolds = new AsyncLocalStorage<ReadonlyMap<string, Lease>>();
/** Marks an attempt aborted by its own timeout (as opposed to the user's signal or close). */
const TIMEOUT = Symbol('locksmith.timeout');
/** @internal The hook `abandon()` in `testing.ts` uses to simulate a crash. */
export const kAbandon = Symbol('locksmith.abandon');

let lockerSeq = 0;

/** A random holder id: 20 bytes, as the Redlock seed asks for the random value. */
export function randomOwnerId(): string {
  return randomBytes(20).toString('base64url');
}

interface AcquireMode {
  /** false: one attempt, no queue entry left behind. */
  readonly wait: boolean;
  readonly timeoutMs: number | undefined;
  /** What a timeout gives: a `LockTimeoutError` (lock) or `null` (tryLock with waitMs). */
  readonly onTimeout: 'throw' | 'null';
}

/** The read and write sides of one read-write lock. */
export interface ReadWriteLock {
  readonly lockId: string;
  /** Shared hold: many readers together, never with a writer. Waits like `lock()`. */
  read(options?: LockOptions): Promise<Lock>;
  /** Exclusive hold: alone. A waiting writer is not starved by a stream of readers. */
  write(options?: LockOptions): Promise<Lock>;
  tryRead(options?: TryLockOptions): Promise<Lock | null>;
  tryWrite(options?: TryLockOptions): Promise<Lock | null>;
}

/** A counting semaphore: at most `permits` holders at once. */
export interface Semaphore {
  readonly lockId: string;
  readonly permits: number;
  acquire(options?: LockOptions): Promise<Lock>;
  tryAcquire(options?: TryLockOptions): Promise<Lock | null>;
}

/**
 * Distributed locks over one backend. Create it with {@link createLocker}; one locker
 * models one client (one process). Events: see {@link LockerEvents}.
 */
export class Locker extends TypedEmitter {
  /** The resolved options (defaults filled in). */
  readonly options: LockerOptions;
  readonly #id = ++lockerSeq;
  readonly #source: URL | Backend;
  #backend: Promise<Backend> | undefined;
  #closed = false;
  #closing: Promise<void> | undefined;
  readonly #closeController = new AbortController();
  readonly #pending = new Set<Promise<unknown>>();
  readonly #leases = new Set<Lease>();
  readonly #byOwner = new Map<string, Lease>();

  /** @internal Use {@link createLocker}. */
  constructor(source: URL | Backend, options: LockerOptions) {
    super();
    this.#source = source;
    this.options = options;
  }

  /** Wait until the lock is held (mutex). Rejects `LockTimeoutError` after `timeoutMs`. */
  lock(lockId: string, options?: LockOptions): Promise<Lock> {
    return this.#acquire(lockId, 'mutex', 1, options, waitMode(options)) as Promise<Lock>;
  }

  /** One attempt (or wait up to `waitMs`): the lock, or `null` when another holds it. */
  tryLock(lockId: string, options?: TryLockOptions): Promise<Lock | null> {
    return this.#acquire(lockId, 'mutex', 1, options, tryMode(options));
  }

  /** Run `fn` holding the lock; release afterwards. Nested calls on the same lockId re-enter. */
  async withLock<T>(lockId: string, fn: (lock: Lock) => Promise<T> | T, options?: LockOptions): Promise<T> {
    if (typeof fn !== 'function') throw new InvalidArgumentError('fn', 'withLock needs a function');
    const lock = await this.lock(lockId, options);
    try {
      const holds = new Map(chainHolds.getStore() ?? []);
      holds.set(this.#holdKey('mutex', lock.lockId), lock.lease);
      return await chainHolds.run(holds, () => fn(lock));
    } finally {
      await lock.release();
    }
  }

  /** A read-write lock named `lockId`. */
  readWriteLock(lockId: string): ReadWriteLock {
    const id = validateLockId(lockId);
    return {
      lockId: id,
      read: (o) => this.#acquire(id, 'read', 1, o, waitMode(o)) as Promise<Lock>,
      write: (o) => this.#acquire(id, 'write', 1, o, waitMode(o)) as Promise<Lock>,
      tryRead: (o) => this.#acquire(id, 'read', 1, o, tryMode(o)),
      tryWrite: (o) => this.#acquire(id, 'write', 1, o, tryMode(o)),
    };
  }

  /** A semaphore named `lockId` with `permits` concurrent holders. */
  semaphore(lockId: string, { permits }: { permits: number }): Semaphore {
    const id = validateLockId(lockId);
    const n = validatePermits(permits);
    return {
      lockId: id,
      permits: n,
      acquire: (o) => this.#acquire(id, 'semaphore', n, o, waitMode(o)) as Promise<Lock>,
      tryAcquire: (o) => this.#acquire(id, 'semaphore', n, o, tryMode(o)),
    };
  }

  /** What the backend knows of `lockId`: holders, tokens, expiry, waiters. */
  async inspect(lockId: string): Promise<LockState> {
    const id = validateLockId(lockId);
    this.#assertOpen();
    const backend = await this.#getBackend();
    return this.#wrapBackendErrors(backend, () => backend.inspect(id));
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
    this.#closed = true;
    this.#closeController.abort(new LockerClosedError());
    this.#closing = (async () => {
      await Promise.allSettled([...this.#pending]);
      const leases = [...this.#leases];
      for (const lease of leases) lease.lose('closed');
      await Promise.allSettled(leases.map((l) => l.release()));
      const backend = this.#backend ? await this.#backend.catch(() => undefined) : undefined;
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
    this.#closed = true;
    this.#closeController.abort(new LockerClosedError());
    await Promise.allSettled([...this.#pending]);
    for (const lease of this.#leases) lease.abandon();
    this.#leases.clear();
    this.#byOwner.clear();
    const backend = this.#backend ? await this.#backend.catch(() => undefined) : undefined;
    await (backend?.abandon ? backend.abandon() : backend?.close())?.catch(() => undefined);
  }

  #assertOpen(): void {
    if (this.#closed) throw new LockerClosedError();
  }

  #getBackend(): Promise<Backend> {
    if (!this.#backend) {
      const source = this.#source;
      const p =
        source instanceof URL
          ? withTimeout(connect(source, { connectTimeoutMs: this.options.connectTimeoutMs }), this.options.connectTimeoutMs, source)
          : Promise.resolve(source);
      this.#backend = p;
      // A failed connection is retried by the next call instead of being cached forever.
      p.catch(() => {
        if (this.#backend === p) this.#backend = undefined;
      });
    }
    return this.#backend;
  }

  async #wrapBackendErrors<T>(backend: Backend, fn: () => Promise<T>): Promise<T> {
    try {
      return await fn();
    } catch (err) {
      throw asLocksmithError(backend, err);
    }
  }

  #holdKey(kind: LockKind, lockId: string): string {
    return `${this.#id}\0${kind}\0${lockId}`;
  }

  /** Re-enter a hold of this chain or of the same explicit owner, if there is one. */
  #reenter(lockId: string, kind: LockKind, owner: string | undefined): Lock | undefined {
    if (kind === 'semaphore') return undefined;
    const fromChain = chainHolds.getStore()?.get(this.#holdKey(kind, lockId));
    const lease = fromChain?.valid ? fromChain : owner === undefined ? undefined : this.#byOwner.get(`${kind}\0${lockId}\0${owner}`);
    if (!lease?.valid) return undefined;
    lease.retain();
    const lock = new Lock(lease, true, (l) => this.#releaseHandle(l));
    this.emit('acquired', { lockId, ownerId: lease.grant.ownerId, kind, token: lease.grant.token, waitedMs: 0, reentered: true });
    return lock;
  }

  #checkCapabilities(backend: Backend, kind: LockKind, s: CallSettings): void {
    const c = backend.capabilities;
    if ((kind === 'read' || kind === 'write') && !c.shared) throw new UnsupportedError(backend.name, 'read-write locks');
    if (kind === 'semaphore' && !c.permits) throw new UnsupportedError(backend.name, 'semaphores');
    if (s.fair && !c.fair) throw new UnsupportedError(backend.name, 'fair mode');
    if (s.lockDelayMs > 0 && !c.lockDelay) throw new UnsupportedError(backend.name, 'lockDelayMs');
  }

  #acquire(lockId: string, kind: LockKind, permits: number, options: LockOptions | TryLockOptions | undefined, mode: AcquireMode | Error): Promise<Lock | null> {
    const p = this.#acquireInner(lockId, kind, permits, options, mode);
    this.#pending.add(p);
    void p.then(
      () => this.#pending.delete(p),
      () => this.#pending.delete(p),
    );
    return p;
  }

  async #acquireInner(
    rawLockId: string,
    kind: LockKind,
    permits: number,
    options: LockOptions | TryLockOptions | undefined,
    mode: AcquireMode | Error,
  ): Promise<Lock | null> {
    if (mode instanceof Error) throw mode;
    this.#assertOpen();
    const lockId = validateLockId(rawLockId);
    const s = resolveCallSettings(this.options, options);
    s.signal?.throwIfAborted();

    const again = this.#reenter(lockId, kind, s.owner);
    if (again) return again;

    const backend = await this.#getBackend();
    this.#checkCapabilities(backend, kind, s);
    const ownerId = s.owner ?? randomOwnerId();
    const started = now();

    // One controller for every way the wait can end: the user's signal, a timeout, close().
    const attempt = new AbortController();
    const forward = (source: AbortSignal) => () => attempt.abort(source.reason);
    const onUserAbort = s.signal ? forward(s.signal) : undefined;
    const onClose = forward(this.#closeController.signal);
    if (s.signal && onUserAbort) s.signal.addEventListener('abort', onUserAbort, { once: true });
    this.#closeController.signal.addEventListener('abort', onClose, { once: true });
    // Either may have fired while the backend was connecting; a listener added now would never run.
    if (this.#closeController.signal.aborted) attempt.abort(this.#closeController.signal.reason);
    else if (s.signal?.aborted) attempt.abort(s.signal.reason);
    // Ref'd on purpose: a caller awaiting a lock keeps the process alive; cleared when the wait ends.
    const timer = mode.timeoutMs === undefined ? undefined : setTimeout(() => attempt.abort(TIMEOUT), mode.timeoutMs);

    let ticket: unknown;
    let lease: Lease | undefined;
    let earlyLoss: { reason: LossReason; cause: unknown } | undefined;
    const onLost = (reason: 'not-held' | 'session', cause?: unknown): void => {
      if (lease) lease.lose(reason, cause);
      else earlyLoss = { reason, cause };
    };
    const request = (): AcquireRequest => ({
      lockId,
      kind,
      permits,
      ownerId,
      ttlMs: s.ttlMs,
      fair: s.fair,
      lockDelayMs: s.lockDelayMs,
      wait: mode.wait,
      ticket,
      onLost,
    });

    try {
      let announced = false;
      for (;;) {
        if (attempt.signal.aborted) throw attempt.signal.reason;
        const sentAt = now();
        const result = await backend.tryAcquire(request());
        if (result.granted) {
          const grant = result.grant;
          ticket = undefined;
          if (attempt.signal.aborted) {
            // Granted after the caller gave up: hand it straight back.
            await backend.release(grant).catch(() => undefined);
            throw attempt.signal.reason;
          }
          const candidate = new Lease(backend, grant, sentAt, { ...s, driftFactor: this.options.driftFactor }, this.#leaseHooks());
          if (!candidate.valid) {
            // The grant took longer than its own validity (Redlock's negative validity).
            await backend.release(grant).catch(() => undefined);
            if (!mode.wait) return null;
            await raceAbort(backend.waitForChange(lockId, undefined, attempt.signal), attempt.signal);
            continue;
          }
          lease = candidate;
          this.#leases.add(lease);
          if (s.owner !== undefined) this.#byOwner.set(`${kind}\0${lockId}\0${s.owner}`, lease);
          lease.start();
          if (earlyLoss) lease.lose(earlyLoss.reason, earlyLoss.cause);
          this.emit('acquired', { lockId, ownerId, kind, token: grant.token, waitedMs: now() - started, reentered: grant.reentered });
          return new Lock(lease, grant.reentered, (l) => this.#releaseHandle(l));
        }
        ticket = result.contended.ticket;
        if (!mode.wait) return null;
        if (!announced) {
          announced = true;
          this.emit('waiting', { lockId, ownerId, kind });
        }
        await raceAbort(backend.waitForChange(lockId, ticket, attempt.signal), attempt.signal);
      }
    } catch (err) {
      if (ticket !== undefined) {
        const t = ticket;
        ticket = undefined;
        await backend.cancel(request(), t).catch(() => undefined);
        void t;
      }
      if (attempt.signal.aborted) {
        const reason: unknown = attempt.signal.reason;
        if (reason === TIMEOUT) {
          if (mode.onTimeout === 'null') return null;
          throw new LockTimeoutError(lockId, mode.timeoutMs ?? 0);
        }
        throw reason;
      }
      throw asLocksmithError(backend, err);
    } finally {
      clearTimeout(timer);
      if (s.signal && onUserAbort) s.signal.removeEventListener('abort', onUserAbort);
      this.#closeController.signal.removeEventListener('abort', onClose);
    }
  }

  #leaseHooks() {
    return {
      onExtended: (lease: Lease) => {
        const g = lease.grant;
        this.emit('extended', { lockId: g.lockId, ownerId: g.ownerId, kind: g.kind, token: g.token, validUntil: lease.validUntil });
      },
      onLost: (lease: Lease, error: import('./errors.js').LockLostError) => {
        const g = lease.grant;
        this.emit('lost', { lockId: g.lockId, ownerId: g.ownerId, kind: g.kind, token: g.token, error });
      },
      onEnded: (lease: Lease) => {
        this.#leases.delete(lease);
        const g = lease.grant;
        const key = `${g.kind}\0${g.lockId}\0${g.ownerId}`;
        if (this.#byOwner.get(key) === lease) this.#byOwner.delete(key);
      },
    };
  }

  async #releaseHandle(lock: Lock): Promise<void> {
    const lease = lock.lease;
    const wasHeld = lease.state === 'held';
    await lease.unref();
    // Still referenced by an outer handle, or lost before: no release event.
    if (!wasHeld || (lease.state as string) !== 'released') return;
    const released = await lease.release();
    const g = lease.grant;
    this.emit('released', { lockId: g.lockId, ownerId: g.ownerId, kind: g.kind, token: g.token, heldMs: now() - lease.acquiredAt, released });
  }
}

function waitMode(options: LockOptions | undefined): AcquireMode | Error {
  try {
    const t = options?.timeoutMs;
    return { wait: true, timeoutMs: t === undefined ? undefined : validateDuration(t, 'timeoutMs', true), onTimeout: 'throw' };
  } catch (err) {
    return err as Error;
  }
}

function tryMode(options: TryLockOptions | undefined): AcquireMode | Error {
  try {
    const w = options?.waitMs;
    const waitMs = w === undefined ? 0 : validateDuration(w, 'waitMs', true);
    return waitMs === 0 ? { wait: false, timeoutMs: undefined, onTimeout: 'null' } : { wait: true, timeoutMs: waitMs, onTimeout: 'null' };
  } catch (err) {
    return err as Error;
  }
}

/** Resolve/reject with `p`, or reject with the signal's reason as soon as it aborts. */
function raceAbort<T>(p: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) {
    p.catch(() => undefined);
    return Promise.reject(signal.reason);
  }
  return new Promise<T>((resolve, reject) => {
    const onAbort = (): void => reject(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    p.then(
      (v) => {
        signal.removeEventListener('abort', onAbort);
        resolve(v);
      },
      (e: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(e);
      },
    );
  });
}

function asLocksmithError(backend: Backend, err: unknown): LocksmithError {
  if (err instanceof LocksmithError) return err;
  const message = err instanceof Error ? err.message : String(err);
  return new BackendUnavailableError(backend.name, `${backend.name} backend error: ${message}`, { cause: err });
}

async function withTimeout(p: Promise<Backend>, ms: number, url: URL): Promise<Backend> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new BackendUnavailableError(url.protocol.slice(0, -1), `could not connect to ${redact(url)} within ${ms} ms`)),
      ms,
    );
    timer.unref();
  });
  try {
    return await Promise.race([p, timeout]);
  } catch (err) {
    // A backend that connects after we gave up must not leak its connections.
    p.then((b) => b.close(), () => undefined).catch(() => undefined);
    if (err instanceof LocksmithError) throw err;
    throw new BackendUnavailableError(url.protocol.slice(0, -1), `could not connect to ${redact(url)}: ${err instanceof Error ? err.message : String(err)}`, {
      cause: err,
    });
  } finally {
    clearTimeout(timer);
  }
}

/** A URL without its password, for messages. */
export function redact(url: URL): string {
  if (!url.password) return url.href;
  const copy = new URL(url.href);
  copy.password = '***';
  return copy.href;
}

/**
 * Create a locker.
 *
 * @param urlOrBackend a backend URL (`memory://`, `redis://host:port`, `zookeeper://h1,h2/chroot`,
 *   `cassandra://h1,h2/keyspace`, …) or a {@link Backend} instance (the locker takes ownership
 *   and closes it). Defaults to `$LOCKSMITH_BACKEND`, else `memory://`.
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

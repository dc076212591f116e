/**
 * The Locker: lock / tryLock / withLock / readWriteLock / semaphore / election over any
 * backend. The wait loop is in acquire.ts, what it needs of the locker in host.ts and
 * registry.ts, re-entry in reentry.ts, the lease in lease.ts.
 */
import { randomBytes } from 'node:crypto';
import { setMaxListeners } from 'node:events';
import { isAbandonable, type Backend, type LockKind } from './backend.js';
import { parseBackendUrl } from './connect.js';
import { InvalidArgumentError, LockerClosedError, LockLostError } from './errors.js';
import { lockEvent, TypedEmitter } from './events.js';
import { LockerHost } from './host.js';
import { Lock } from './lock.js';
import { Registry } from './registry.js';
import { makeIdentity, type Identity } from './observe/identity.js';
import { acquire, tryMode, waitMode, type Acquired, type AcquireMode } from './acquire.js';
import { Election, type ElectionOptions } from './election.js';
import {
  resolveCallSettings,
  resolveLockerOptions,
  validateLockId,
  validateDuration,
  validatePermits,
  validateSignal,
  type CallSettings,
  type LockerOptions,
  splitWeight,
  type LockOptions,
  type SemaphoreAcquireOptions,
  type SemaphoreTryAcquireOptions,
  type TryLockOptions,
  type WithLockOptions,
} from './options.js';
import { unavailable } from './util/cause.js';
import { checkListOptions, checkPrefix, decodeState, listPage, type ListOptions, type ListResult, type LockInfo } from './observe/list.js';
import { DEFAULT_WATCH_EVERY_MS, watchLocks, type WatchEvent, type WatchOptions } from './observe/watch.js';
import { breakLock, checkReason, type ForceReleaseOptions } from './observe/break.js';
import { lockAll, tryLockAll, type MultiLock } from './lock-all.js';
import { runOnce, type RunOnceOptions, type RunOnceResult } from './run-once.js';

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

/** A counting semaphore: at most `permits` permits in use at once (docs/recipes/semaphore.md). */
export interface Semaphore {
  readonly lockId: string;
  readonly permits: number;
  /** Wait for a permit, or for `options.permits` of them taken together (like `lock()`). */
  acquire(options?: SemaphoreAcquireOptions): Promise<Lock>;
  /** One attempt (or wait up to `waitMs`) for a permit (or `options.permits`); `null` when not free. */
  tryAcquire(options?: SemaphoreTryAcquireOptions): Promise<Lock | null>;
}

/**
 * Distributed locks over one backend. Create it with {@link createLocker}; one locker
 * models one client (one process). Events: see {@link LockerEvents}.
 */
export class Locker extends TypedEmitter {
  /** The resolved options (defaults filled in). */
  readonly options: LockerOptions;
  /** Who this locker is (host, pid, name, meta): written with every hold and queue entry. */
  readonly identity: Identity;
  /** The backend's URL scheme (`redis`, `memory`, …) or, for a Backend instance, its name: the `backend` label of metrics. */
  readonly scheme: string;
  readonly #identity: string;
  /** The backend and close(), handed down to the wait loop. */
  readonly #host: LockerHost;
  /** Leases, re-entry and events, handed down to the wait loop. */
  readonly #registry: Registry;
  #closing: Promise<void> | undefined;
  readonly #pending = new Set<Promise<unknown>>();

  /** @internal Use {@link createLocker}. */
  constructor(source: URL | Backend, options: LockerOptions) {
    const registry = new Registry(++lockerSeq, options.driftFactor);
    super(registry.events);
    this.#registry = registry;
    this.#host = new LockerHost(source, options.connectTimeoutMs);
    this.options = options;
    const who = makeIdentity(options.name, options.meta);
    this.identity = who.identity;
    this.#identity = who.encoded;
    this.scheme = source instanceof URL ? source.protocol.replace(/:$/, '') : source.name;
    // Every uncontended attempt in flight borrows this signal (acquire.ts): many at once is normal.
    setMaxListeners(0, this.#host.closeSignal);
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
      outcome = { ok: true, value: await this.#registry.reentry.run(lock.lease, () => fn(lock)) };
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

  /**
   * A scheduled job's lock: run `fn` here unless another instance holds `name` (then resolve
   * `{ status: 'skipped' }` at once). The backend keeps the lock at least `atLeastForMs` and
   * at most `atMostForMs` after its grant, on its own clock; see docs/recipes/scheduled-jobs.md.
   */
  runOnce<T>(name: string, fn: (lock: Lock) => Promise<T> | T, options: RunOnceOptions): Promise<RunOnceResult<T>> {
    return runOnce(this, name, fn, options, (lock) => {
      lock.lease.abandon();
      this.#registry.forget(lock.lease);
    });
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
      acquire: (o) => this.#weighed(id, n, o, waitMode) as Promise<Lock>,
      tryAcquire: (o) => this.#weighed(id, n, o, tryMode),
    };
  }

  /** A leader election named `name` (a lock with a leadership view); see docs/recipes/election.md. */
  election(name: string, options?: ElectionOptions): Election {
    return new Election(this, validateLockId(name, 'name'), options);
  }

  /** What the backend knows of `lockId`: holders (who, token, since, lease end), waiters in queue order. */
  async inspect(lockId: string): Promise<LockInfo> {
    const id = validateLockId(lockId);
    this.#assertOpen();
    const backend = await this.#host.connect();
    try {
      return decodeState(await backend.inspect(id));
    } catch (err) {
      throw this.#registry.failed('inspect', id, backend.name, unavailable(backend.name, `inspect of '${id}'`, err));
    }
  }

  /**
   * Chubby's CheckSequencer, for a resource that cannot store the last token itself: true
   * when `token` belongs to a current holder of `lockId` as the backend sees it now (for
   * read locks and semaphores: to one of the holders). Only the answer's moment is
   * covered: a resource acts on it at once and still bounds its work by the holder's
   * validity. See docs/guarantees.md, "Checking a token".
   */
  async isCurrent(lockId: string, token: bigint): Promise<boolean> {
    if (typeof token !== 'bigint') throw new InvalidArgumentError('token', 'token must be a bigint (BigInt(text) reads a stored one)');
    const state = await this.inspect(lockId);
    // A holder whose lease ran out on the server (kept only for lockDelay) holds no more.
    return state.holders.some((h) => h.token === token && (h.expiresInMs === undefined || h.expiresInMs > 0));
  }

  /**
   * One page of the locks that have a holder or a waiter, in the backend's stable order;
   * pass `cursor` back for the next page. `UnsupportedError` on a backend that cannot list.
   * docs/observability.md.
   */
  async list(options?: ListOptions): Promise<ListResult> {
    const checked = checkListOptions(options);
    const signal = validateSignal(options?.signal);
    this.#assertOpen();
    signal?.throwIfAborted();
    const backend = await this.#host.connect();
    try {
      return await listPage(backend, checked, signal ?? this.#host.closeSignal);
    } catch (err) {
      throw this.#registry.failed('list', undefined, backend.name, unavailable(backend.name, 'listing locks', err));
    }
  }

  /**
   * The changes of the locks under `prefix` (acquired, released, expired, lost, waiting,
   * abandoned), the existing holds and waiters first. Ends when `signal` aborts or the
   * locker closes. By notification where the backend has it, else by polling `list` every
   * `everyMs` (docs/observability.md, "Watching").
   */
  watch(options: WatchOptions = {}): AsyncIterable<WatchEvent> {
    const prefix = checkPrefix(options.prefix);
    const everyMs = options.everyMs === undefined ? DEFAULT_WATCH_EVERY_MS : validateDuration(options.everyMs, 'everyMs');
    const user = validateSignal(options.signal);
    this.#assertOpen();
    const host = this.#host;
    const registry = this.#registry;
    return {
      [Symbol.asyncIterator]: async function* () {
        const controller = new AbortController();
        const untrack = host.track(controller);
        const forward = (): void => controller.abort(user?.reason);
        if (user?.aborted) forward();
        user?.addEventListener('abort', forward, { once: true });
        try {
          const backend = await host.connect();
          try {
            yield* watchLocks(backend, prefix, everyMs, controller.signal);
          } catch (err) {
            throw registry.failed('watch', undefined, backend.name, unavailable(backend.name, 'watching locks', err));
          }
        } finally {
          user?.removeEventListener('abort', forward);
          untrack();
          controller.abort();
        }
      },
    };
  }

  /**
   * Break `lockId` on purpose: end every hold as if its lease had run out (each holder's
   * signal aborts at its next renewal) and move the token on so that a broken holder's token
   * is refused by fenced resources. Emits `broken` and logs the reason and this locker's
   * identity. Resolves how many holds were ended. docs/observability.md, "Breaking a lock".
   */
  async forceRelease(lockId: string, options: ForceReleaseOptions): Promise<number> {
    const id = validateLockId(lockId);
    const reason = checkReason(options);
    this.#assertOpen();
    const backend = await this.#host.connect();
    let holds: number;
    try {
      holds = await breakLock(backend, id, reason, this.identity);
    } catch (err) {
      throw this.#registry.failed('forceRelease', id, backend.name, unavailable(backend.name, `breaking lock '${id}'`, err));
    }
    const events = this.#registry.events;
    if (events.wants('broken')) events.emit('broken', { lockId: id, reason, by: this.identity, holds });
    return holds;
  }

  /** The backend's name and capabilities (connects if needed). */
  async backend(): Promise<Backend> {
    this.#assertOpen();
    return this.#host.connect();
  }

  /** True after `close()` was called. */
  get closed(): boolean {
    return this.#host.closed;
  }

  /**
   * Reject every waiting call with `LockerClosedError`, release every held lock (their
   * signals abort with reason `closed`), stop every timer, close the backend. Idempotent.
   */
  close(): Promise<void> {
    if (this.#closing) return this.#closing;
    this.#host.stop();
    this.#closing = (async () => {
      await Promise.allSettled([...this.#pending]);
      const leases = this.#registry.held();
      for (const lease of leases) lease.lose('closed');
      await Promise.allSettled(leases.map((l) => l.release()));
      const backend = await this.#host.connected();
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
    this.#host.stop();
    await Promise.allSettled([...this.#pending]);
    for (const lease of this.#registry.held()) lease.abandon();
    this.#registry.clear();
    const backend = await this.#host.connected();
    if (!backend) return;
    await (isAbandonable(backend) ? backend.abandon() : backend.close()).catch(() => undefined);
  }

  #assertOpen(): void {
    if (this.#host.closed) throw new LockerClosedError();
  }

  /** A semaphore call: `options.permits` is the weight of the hold, the rest are lock options. */
  #weighed(
    lockId: string,
    size: number,
    options: SemaphoreTryAcquireOptions | undefined,
    mode: (s: CallSettings) => AcquireMode,
  ): Promise<Lock | null> {
    try {
      const { weight, rest } = splitWeight(options, size);
      return this.#acquire(lockId, 'semaphore', size, rest, mode, weight);
    } catch (err) {
      return Promise.reject(err as Error);
    }
  }

  // Each call is kept until it settles: close() awaits them with allSettled, which also marks
  // the rejection of a call close() ended as handled (a counter instead rejected unhandled).
  #acquire(
    lockId: string,
    kind: LockKind,
    permits: number,
    options: LockOptions | TryLockOptions | undefined,
    mode: (s: CallSettings) => AcquireMode,
    weight = 1,
  ): Promise<Lock | null> {
    // Not an async function: one reaction on the wait loop's promise, not a layer of its own
    // (docs/benchmarks.md, "Redis: the uncontended floor"); a bad argument still rejects.
    let p: Promise<Lock | null>;
    try {
      this.#assertOpen();
      const id = validateLockId(lockId);
      const settings = resolveCallSettings(this.options, options);
      settings.signal?.throwIfAborted();
      const ownerId = settings.owner ?? randomOwnerId();
      const spec = { lockId: id, kind, permits, weight, settings, mode: mode(settings), ownerId, identity: this.#identity };
      p = acquire(this.#host, this.#registry, spec).then((got) => (got === null ? null : this.#handle(got)));
    } catch (err) {
      p = Promise.reject(err as Error);
    }
    this.#pending.add(p);
    const forget = (): void => {
      this.#pending.delete(p);
    };
    p.then(forget, forget);
    return p;
  }

  /** The handle of what an acquisition obtained; tells the `acquired` listeners. */
  #handle(got: Acquired): Lock {
    const events = this.#registry.events;
    if (events.wants('acquired')) {
      events.emit('acquired', lockEvent(got.lease.grant, { waitedMs: got.waitedMs, reentered: got.reentered }));
    }
    return new Lock(got.lease, got.reentered, got.endTurn);
  }
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
 *   and closes it). Defaults to `$LOCKSMITH_BACKEND`, else `memory://` (in-process only; a
 *   warning, once per process, says so).
 * @param options lease defaults, see {@link LockerOptions}.
 * @throws InvalidArgumentError for a malformed URL, an unknown scheme or bad options.
 */
export function createLocker(urlOrBackend?: string | Backend, options?: Partial<LockerOptions>): Locker {
  const resolved = resolveLockerOptions(options);
  if (urlOrBackend === undefined) urlOrBackend = process.env.LOCKSMITH_BACKEND || memoryByDefault();
  if (typeof urlOrBackend === 'string') return new Locker(parseBackendUrl(urlOrBackend), resolved);
  if (typeof urlOrBackend === 'object' && urlOrBackend !== null && typeof urlOrBackend.tryAcquire === 'function') {
    return new Locker(urlOrBackend, resolved);
  }
  throw new InvalidArgumentError('urlOrBackend', 'createLocker needs a backend URL string or a Backend');
}

let warnedMemoryDefault = false;

/**
 * `memory://` when no backend is named: fine for tests, but it coordinates nothing between
 * processes, so say so once per process (docs/backends/file.md names the embedded choice).
 */
function memoryByDefault(): string {
  if (!warnedMemoryDefault) {
    warnedMemoryDefault = true;
    process.emitWarning(
      'createLocker() without a URL or LOCKSMITH_BACKEND uses memory://, which coordinates nothing between processes; ' +
        "pass 'file://' (processes of this machine) or a server's URL",
      { code: 'LOCKSMITH_MEMORY_DEFAULT' },
    );
  }
  return 'memory://';
}

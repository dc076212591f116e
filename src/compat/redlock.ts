/**
 * `locksmith-dlm/compat/redlock`: node-redlock v5's API over locksmith's Redis backend (one
 * client) or Redlock backend (several). Change the import, keep the code; every lock also
 * carries a fencing `token`. What differs on purpose, and why: docs/migrating/node-redlock.md.
 */
import { randomBytes } from 'node:crypto';
import { EventEmitter } from 'node:events';
import { setTimeout as sleep } from 'node:timers/promises';
import { LockLostError, LockTimeoutError, QuorumError, isLocksmithError } from '../errors.js';
import type { MultiLock } from '../lock-all.js';
import type { Locker } from '../locker.js';
import { lockerFor, lossRouter, type CompatClient } from './clients.js';
import { OneLock } from './one-lock.js';

/** A user's ioredis client (`Redis` or `Cluster`). */
export type Client = CompatClient;

/** Per-node summary of one attempt (node-redlock's shape). */
export type ExecutionStats = {
  readonly membershipSize: number;
  readonly quorumSize: number;
  readonly votesFor: Set<Client>;
  readonly votesAgainst: Map<Client, Error>;
};

/** What `release` resolves with: the attempts (one: locksmith waits on notifications, not on a retry loop). */
export type ExecutionResult = {
  attempts: ReadonlyArray<Promise<ExecutionStats>>;
  start: number;
};

/** node-redlock's settings. `retryCount × retryDelay` is the wait bound of an acquisition. */
export interface Settings {
  readonly driftFactor: number;
  readonly retryCount: number;
  readonly retryDelay: number;
  readonly retryJitter: number;
  readonly automaticExtensionThreshold: number;
}

/** Per-call settings: node-redlock's, plus an AbortSignal that ends the wait. */
export type CallSettings = Partial<Settings> & { readonly signal?: AbortSignal };

const defaultSettings: Readonly<Settings> = Object.freeze({
  driftFactor: 0.01,
  retryCount: 10,
  retryDelay: 200,
  retryJitter: 100,
  automaticExtensionThreshold: 500,
});

/** Another holder has (one of) the resources. */
export class ResourceLockedError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'ResourceLockedError';
  }
}

/** An operation did not succeed; `attempts` holds the per-node votes, `cause` locksmith's error. */
export class ExecutionError extends Error {
  readonly attempts: ReadonlyArray<Promise<ExecutionStats>>;
  constructor(message: string, attempts: ReadonlyArray<Promise<ExecutionStats>>, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'ExecutionError';
    this.attempts = attempts;
  }
}

/** node-redlock's abort signal: `error` says why the lock can no longer be trusted. */
export type RedlockAbortSignal = AbortSignal & { error?: Error };

const QUORUM_MESSAGE = 'The operation was unable to achieve a quorum during its retry window.';

/** A held lock on one or more resources. `extend` returns a new Lock, as in node-redlock. */
export class Lock {
  /** Fencing token of `resources[0]`: pass it to the resource (see `tokens` for the others). */
  readonly token: bigint;
  /** @internal */
  readonly multi: MultiLock;
  #tokens: ReadonlyMap<string, bigint> | undefined;

  /** @internal Created by {@link Redlock}. */
  constructor(
    readonly redlock: Redlock,
    readonly resources: string[],
    readonly value: string,
    readonly attempts: ReadonlyArray<Promise<ExecutionStats>>,
    /** Wall-clock ms (Date.now()) up to which the lock is valid; 0 once released or superseded. */
    public expiration: number,
    multi: MultiLock,
  ) {
    this.multi = multi;
    this.token = multi.token(resources[0] ?? '');
  }

  /** Fencing token of every resource (the map made when first read). */
  get tokens(): ReadonlyMap<string, bigint> {
    return (this.#tokens ??= this.multi.tokens);
  }

  /** `redlock.release(this)`. */
  release(): Promise<ExecutionResult> {
    return this.redlock.release(this);
  }

  /** `redlock.extend(this, duration)`. */
  extend(duration: number): Promise<Lock> {
    return this.redlock.extend(this, duration);
  }
}

/**
 * node-redlock's `Redlock`: one client is locksmith's Redis backend, several are its
 * Redlock backend (majority quorum). Emits `error` for every failure it reports.
 */
export default class Redlock extends EventEmitter {
  readonly clients: Set<Client>;
  readonly settings: Settings;
  readonly #locker: Locker;
  /** The attempts of every successful operation (all votes for): made once, not per call. */
  #succeeded: ReadonlyArray<Promise<ExecutionStats>> | undefined;

  constructor(clients: Iterable<Client>, settings: Partial<Settings> = {}, scripts: object = {}) {
    super();
    // As node-redlock: an `error` without a listener must not crash the process.
    this.on('error', () => undefined);
    this.clients = new Set(clients);
    if (this.clients.size === 0) throw new Error('Redlock must be instantiated with at least one redis client.');
    if (Object.keys(scripts).length > 0) throw new Error('Custom Lua scripts are not supported by locksmith-dlm/compat/redlock.');
    const pick = (k: keyof Settings): number => (typeof settings[k] === 'number' ? settings[k] : defaultSettings[k]);
    this.settings = Object.freeze({
      driftFactor: pick('driftFactor'),
      retryCount: pick('retryCount'),
      retryDelay: pick('retryDelay'),
      retryJitter: pick('retryJitter'),
      automaticExtensionThreshold: pick('automaticExtensionThreshold'),
    });
    this.#locker = lockerFor([...this.clients], this.settings.driftFactor);
  }

  /** Release what this instance holds, then `quit()` every client. */
  async quit(): Promise<void> {
    await this.#locker.close();
    await Promise.all([...this.clients].map((c) => c.quit?.()));
  }

  /** Lock every resource (all-or-nothing, deadlock-free order) for `duration` ms, without renewal. */
  async acquire(resources: string[], duration: number, settings?: CallSettings): Promise<Lock> {
    checkDuration(duration);
    const multi = await this.#take(resources, duration, false, settings);
    return this.#lock(resources, multi);
  }

  /** Release the lock. Never throws for a lock that already expired (it is free already). */
  async release(lock: Lock, _settings?: Partial<Settings>): Promise<ExecutionResult> {
    lock.expiration = 0;
    const start = Date.now();
    try {
      await lock.multi.release();
    } catch (err) {
      throw this.#failure(err, QUORUM_MESSAGE);
    }
    return { attempts: this.#success(), start };
  }

  /** Extend a valid lock to `duration` ms from now; the old Lock object is spent (expiration 0). */
  async extend(existing: Lock, duration: number, _settings?: Partial<Settings>): Promise<Lock> {
    checkDuration(duration);
    if (existing.expiration < Date.now() || !existing.multi.held) {
      throw new ExecutionError('Cannot extend an already-expired lock.', []);
    }
    try {
      await existing.multi.extend(duration);
    } catch (err) {
      throw this.#failure(err, 'Cannot extend the lock: it was lost.');
    }
    existing.expiration = 0;
    return this.#lock(existing.resources, existing.multi);
  }

  /**
   * Run `routine` holding the resources, renewing the lock meanwhile. When a renewal fails,
   * `signal` aborts with `signal.error` set; `routine`'s result is returned either way.
   */
  using<T>(resources: string[], duration: number, settings: CallSettings, routine?: (signal: RedlockAbortSignal) => Promise<T>): Promise<T>;
  using<T>(resources: string[], duration: number, routine: (signal: RedlockAbortSignal) => Promise<T>): Promise<T>;
  async using<T>(
    resources: string[],
    duration: number,
    settingsOrRoutine: undefined | CallSettings | ((signal: RedlockAbortSignal) => Promise<T>),
    optionalRoutine?: (signal: RedlockAbortSignal) => Promise<T>,
  ): Promise<T> {
    checkDuration(duration);
    const settings = settingsOrRoutine && typeof settingsOrRoutine !== 'function' ? settingsOrRoutine : {};
    const routine = optionalRoutine ?? settingsOrRoutine;
    if (typeof routine !== 'function') throw new Error('INVARIANT: routine is not a function.');
    const threshold = settings.automaticExtensionThreshold ?? this.settings.automaticExtensionThreshold;
    if (threshold > duration - 100) {
      throw new Error('A lock `duration` must be at least 100ms greater than the `automaticExtensionThreshold` setting.');
    }
    const multi = await this.#take(resources, duration, true, settings);
    const controller = new AbortController();
    const signal = controller.signal as RedlockAbortSignal;
    const onLost = (cause: unknown): void => {
      if (controller.signal.aborted) return;
      const error = new ExecutionError('The lock was lost: exclusivity can no longer be guaranteed.', [], { cause });
      signal.error = error;
      this.emit('error', cause instanceof Error ? cause : error);
      controller.abort(error);
    };
    // The locker's one `lost` listener (clients.ts), not a signal per lock: a lock's signal costs a controller.
    const router = lossRouter(this.#locker);
    const unwatch = multi.locks.map((l) => router.watch(l, onLost));
    try {
      return await routine(signal);
    } finally {
      for (const u of unwatch) u();
      // A failed release is reported, not thrown: the lease expires by itself, and the routine's outcome stands.
      await multi.release().catch((err: unknown) => this.emit('error', err));
    }
  }

  async #take(resources: string[], duration: number, renew: boolean, settings: CallSettings | undefined): Promise<MultiLock> {
    const s = settings === undefined ? this.settings : { ...this.settings, ...settings };
    // node-redlock gives up after retryCount retries spaced retryDelay apart: that span is the wait bound.
    const windowMs = s.retryCount === -1 ? undefined : Math.max(0, s.retryCount) * Math.max(0, s.retryDelay);
    const deadline = windowMs === undefined ? undefined : Date.now() + windowMs;
    const maxAttempts = s.retryCount === -1 ? Infinity : Math.max(0, s.retryCount) + 1;
    const attempts: Promise<ExecutionStats>[] = [];
    // One resource (the common case) skips lockAll's set bookkeeping; the same validation.
    const only = Array.isArray(resources) && resources.length === 1 && typeof resources[0] === 'string' ? resources[0] : undefined;
    for (;;) {
      const options: { ttlMs: number; autoExtend: boolean; timeoutMs?: number; signal?: AbortSignal } = {
        ttlMs: duration,
        autoExtend: renew,
      };
      if (deadline !== undefined) options.timeoutMs = Math.max(0, deadline - Date.now());
      if (settings?.signal) options.signal = settings.signal;
      try {
        if (only !== undefined) return new OneLock(await this.#locker.lock(only, options));
        return await this.#locker.lockAll(resources, options);
      } catch (err) {
        if (settings?.signal?.aborted && err === settings.signal.reason) throw err;
        const failure = this.#failure(err, QUORUM_MESSAGE, attempts);
        // A busy resource was already waited for; an unreachable quorum is retried as node-redlock does.
        const retry = err instanceof QuorumError || isLocksmithError(err, 'BACKEND_UNAVAILABLE');
        if (!retry || attempts.length >= maxAttempts || (deadline !== undefined && Date.now() >= deadline)) throw failure;
        const jitter = Math.floor((Math.random() * 2 - 1) * s.retryJitter);
        await sleep(Math.max(0, s.retryDelay + jitter), undefined, settings?.signal ? { signal: settings.signal } : {});
      }
    }
  }

  #lock(resources: string[], multi: MultiLock): Lock {
    let remaining = Infinity;
    let value: string | undefined;
    if (multi instanceof OneLock) {
      remaining = multi.lock.remainingMs();
      value = multi.lock.ownerId;
    } else {
      for (const l of multi.locks) remaining = Math.min(remaining, l.remainingMs());
      value = multi.locks[0]?.ownerId ?? randomBytes(16).toString('hex');
    }
    return new Lock(this, resources, value, this.#success(), Date.now() + Math.floor(remaining), multi);
  }

  /** The attempts of a successful operation, shared by every Lock and release result of this instance. */
  #success(): ReadonlyArray<Promise<ExecutionStats>> {
    return (this.#succeeded ??= Object.freeze([Promise.resolve(this.#stats(true))]));
  }

  /** node-redlock's error for a locksmith failure, with per-client votes; emits each vote's error. */
  #failure(err: unknown, message: string, attempts: Promise<ExecutionStats>[] = []): unknown {
    if (isLocksmithError(err, 'INVALID_ARGUMENT')) return err;
    const clients = [...this.clients];
    const votes = new Map<Client, Error>();
    if (err instanceof LockTimeoutError) {
      const locked = new ResourceLockedError(`The resource '${String(err.context.lockId)}' is locked by another holder.`, { cause: err });
      for (const c of clients) votes.set(c, locked);
      message = `The resources are locked by another holder: ${err.message}.`;
    } else if (err instanceof QuorumError) {
      err.nodes.forEach((n, i) => {
        const c = clients[i];
        if (c !== undefined && !n.ok) votes.set(c, n.error instanceof Error ? n.error : new Error(String(n.outcome ?? 'refused')));
      });
    } else {
      const e = err instanceof Error ? err : new Error(String(err));
      for (const c of clients) votes.set(c, e);
    }
    for (const e of new Set(votes.values())) this.emit('error', e);
    attempts.push(Promise.resolve(this.#stats(false, votes)));
    return new ExecutionError(err instanceof LockLostError ? `${message} (${err.message})` : message, attempts, { cause: err });
  }

  #stats(ok: boolean, against = new Map<Client, Error>()): ExecutionStats {
    const clients = [...this.clients];
    return {
      membershipSize: clients.length,
      quorumSize: Math.floor(clients.length / 2) + 1,
      votesFor: new Set(ok ? clients : clients.filter((c) => !against.has(c))),
      votesAgainst: against,
    };
  }
}

export { Redlock };

function checkDuration(duration: number): void {
  if (Math.floor(duration) !== duration) throw new Error('Duration must be an integer value in milliseconds.');
}

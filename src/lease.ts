/**
 * One held lease: renewal timer, conservative validity arithmetic, loss detection.
 *
 * Validity is counted from the moment a request was SENT, not from when the answer came
 * back (`σ − (t2 − t1)`, docs/guarantees.md): the server started the ttl somewhere after the send,
 * so `sentAt + ttl` can only be early, never late. From that the drift allowance is taken
 * away (Redlock's `ttl · driftFactor + 2 ms`). The holder's signal aborts a small guard
 * before that deadline, so the critical section hears of the loss before any other client
 * could have been granted the lock.
 */
import type { Backend, Extension, Grant } from './backend.js';
import { BackendUnavailableError, LockLostError, LockNotHeldError, LocksmithError, type LossReason } from './errors.js';
import { lossGuardMs, validityDeadline } from './util/validity.js';
import { leaseClock } from './util/clock.js';
import { leaseLog as log, ms } from './observe/log.js';

export { lossGuardMs, validityDeadline } from './util/validity.js';

/**
 * Monotonic milliseconds, plus any time the host was seen suspended (the clock `validUntil`
 * is expressed in; src/util/clock.ts says why).
 */
export const now = (): number => leaseClock.now();

/** What the lease tells whoever keeps it (the locker's registry). Called synchronously; must not throw. */
export interface LeaseHooks {
  onExtended(lease: Lease): void;
  onLost(lease: Lease, error: LockLostError): void;
  /** The release of a lease that was held when it began reached the backend (`released`: its answer). */
  onReleased(lease: Lease, released: boolean): void;
  /** A renewal or the release failed for a reason that is not an answer about the lock. */
  onError?(lease: Lease, operation: 'extend' | 'release', error: LocksmithError): void;
  /** The lease stopped being held (lost or released): forget it. */
  onEnded(lease: Lease): void;
}

/** Lease settings fixed at acquisition. */
export interface LeaseSettings {
  readonly ttlMs: number;
  readonly autoExtend: boolean;
  readonly driftFactor: number;
}

type LeaseState = 'held' | 'lost' | 'released';

/** @internal One backend grant kept alive for as long as some handle holds it. */
export class Lease {
  readonly grant: Grant;
  /** When the grant was taken in (the locker's clock): the start of `heldMs`. */
  readonly acquiredAt: number;
  readonly #backend: Backend;
  readonly #settings: LeaseSettings;
  readonly #hooks: LeaseHooks;
  /** Created on first use: most holds end without anybody reading their signal. */
  #controller: AbortController | undefined;
  #state: LeaseState = 'held';
  #validUntil: number;
  #lastSentAt: number;
  /** The lease length the backend last vouched for (the grant's, then each renewal's). */
  #ttlMs: number;
  #refs = 1;
  /**
   * One timer per lease, armed for the next thing due: the renewal, or (while a renewal is
   * in flight, or without autoExtend) the loss deadline.
   */
  #timer: NodeJS.Timeout | undefined;
  /** When the next automatic renewal is due (Infinity: none, or one is in flight). */
  #renewAt = Number.POSITIVE_INFINITY;
  #inflight: Promise<void> | undefined;
  #releasing: Promise<boolean> | undefined;

  /** `at`: now, read once by the caller for the grant's bookkeeping (see {@link start}). */
  constructor(backend: Backend, grant: Grant, sentAt: number, settings: LeaseSettings, hooks: LeaseHooks, at: number = now()) {
    this.acquiredAt = at;
    this.#backend = backend;
    this.grant = grant;
    this.#settings = settings;
    this.#hooks = hooks;
    this.#lastSentAt = sentAt;
    this.#ttlMs = grant.ttlMs;
    this.#validUntil = validityDeadline(sentAt, grant.ttlMs, settings.driftFactor);
  }

  /**
   * Arm the timer. Separate from the constructor so the locker can first check validity. A
   * grant still awaiting its confirmation holds on what it vouches for now; the confirmation
   * is applied like a renewal sent with the acquisition (a failed one leaves the renewal or
   * the deadline to decide).
   */
  start(at: number = now()): void {
    this.#renewAt = this.#settings.autoExtend ? this.#lastSentAt + this.#renewEveryMs() : Number.POSITIVE_INFINITY;
    // `at`: the caller's clock reading at the grant (`acquiredAt`), microseconds ago: an
    // uncontended cycle read the clock for each of the lease's first steps (docs/benchmarks.md).
    this.#schedule(at);
    const confirmation = this.grant.confirmation;
    if (confirmation) this.#serialised(() => confirmation, this.#lastSentAt).catch(() => undefined);
  }

  /** The backend's name (for logs and `error` events). */
  get backendName(): string {
    return this.#backend.name;
  }

  /** The ttl the acquisition asked for (what `extend()` renews by default). */
  get requestedTtlMs(): number {
    return this.#settings.ttlMs;
  }

  /** Aborted (with the `LockLostError`) once the lease is lost; read after a stall, it already is. */
  get signal(): AbortSignal {
    this.#expireIfPast();
    this.#controller ??= new AbortController();
    return this.#controller.signal;
  }
  get validUntil(): number {
    return this.#validUntil;
  }
  get state(): LeaseState {
    this.#expireIfPast();
    return this.#state;
  }
  /** True while held and before the abort deadline (read from the monotonic clock, not from a timer). */
  get valid(): boolean {
    this.#expireIfPast();
    return this.#state === 'held';
  }

  /**
   * Declare the loss the moment the deadline is seen to have passed, by whichever looks
   * first: the timer, or code that reads the lease. After a stall of the event loop (a GC
   * pause, a hung VM, a long synchronous loop) the timer runs only after the code that woke
   * up, which must not go on as the holder meanwhile.
   */
  #expireIfPast(at?: number): void {
    if (this.#state === 'held' && (at ?? now()) >= this.#abortAt()) this.lose('expired');
  }

  /** {@link valid} at `at`, a clock reading taken by the caller just now. */
  validAt(at: number): boolean {
    this.#expireIfPast(at);
    return this.#state === 'held';
  }

  /** A reentrant handle takes another reference. */
  retain(): void {
    this.#refs += 1;
  }

  /** Drop one reference; the last one releases on the backend (its promise; undefined while others remain). */
  unref(): Promise<boolean> | undefined {
    this.#refs -= 1;
    return this.#refs <= 0 ? this.release() : undefined;
  }

  #abortAt(): number {
    return this.#validUntil - lossGuardMs(this.#ttlMs);
  }

  #renewEveryMs(): number {
    return Math.max(1, Math.min(this.#settings.ttlMs, this.#ttlMs) / 3);
  }

  #schedule(clock: number = now()): void {
    clearTimeout(this.#timer);
    this.#timer = undefined;
    if (this.#state !== 'held') return;
    const at = Math.min(this.#renewAt, this.#abortAt());
    this.#timer = setTimeout(() => this.#tick(), Math.max(0, at - clock));
    this.#timer.unref();
  }

  #tick(): void {
    this.#timer = undefined;
    if (this.#state !== 'held') return;
    // A process paused past its deadline must not renew as if nothing happened.
    if (now() >= this.#abortAt()) {
      this.lose('expired');
      return;
    }
    if (now() >= this.#renewAt) {
      this.#renewAt = Number.POSITIVE_INFINITY;
      void this.#autoRenew();
    }
    this.#schedule();
  }

  async #autoRenew(): Promise<void> {
    try {
      await this.#renew(this.#settings.ttlMs);
    } catch (err) {
      if (this.#state !== 'held') return;
      if (err instanceof LocksmithError) this.#hooks.onError?.(this, 'extend', err);
      // Transient failure: keep trying while validity lasts; the deadline ends it. Retry
      // soon: after a failover the first renewal that reaches a live server is what keeps it.
      this.#renewAt = now() + Math.max(10, Math.min(this.#renewEveryMs() / 10, 250));
      this.#schedule();
    }
  }

  /** One renewal; serialised so renewals never overlap. */
  #renew(ttlMs: number): Promise<void> {
    return this.#serialised(() => this.#backend.extend(this.grant, ttlMs));
  }

  /**
   * Run `op` after any in flight and apply what it vouches for: an extension (sent now), or
   * the grant's confirmation (sent with the acquisition, at `confirmationSentAt`).
   */
  #serialised(op: () => Promise<Extension>, confirmationSentAt?: number): Promise<void> {
    const run = async (): Promise<void> => {
      const sentAt = confirmationSentAt ?? now();
      // A renewal whose send time is already past validity would extend a lease that may be
      // someone else's by now: it is not sent, the loss is declared instead.
      if (confirmationSentAt === undefined) this.#expireIfPast();
      if (this.#lossError) throw this.#lossError;
      try {
        const ext = await op();
        if (log.enabled) log('%s: renewed token %s for %dms in %s', this.grant.lockId, this.grant.token, ext.ttlMs, ms(now() - sentAt));
        if (this.#state !== 'held') return;
        this.#lastSentAt = sentAt;
        this.#ttlMs = ext.ttlMs;
        this.#validUntil = validityDeadline(sentAt, ext.ttlMs, this.#settings.driftFactor);
        if (this.#settings.autoExtend) this.#renewAt = sentAt + this.#renewEveryMs();
        this.#schedule();
        if (confirmationSentAt === undefined) this.#hooks.onExtended(this);
      } catch (err) {
        if (err instanceof LockLostError) {
          this.lose(err.reason, err);
          throw this.#lossError ?? err;
        }
        throw err instanceof LocksmithError
          ? err
          : new BackendUnavailableError(this.#backend.name, `extending lock '${this.grant.lockId}' failed`, { cause: err });
      }
    };
    const previous = this.#inflight ?? Promise.resolve();
    const p = previous.catch(() => undefined).then(run);
    const tracked = p.finally(() => {
      if (this.#inflight === tracked) this.#inflight = undefined;
    });
    this.#inflight = tracked;
    tracked.catch(() => undefined);
    return p;
  }

  /**
   * A user-requested extension: rejects with the loss error when lost (also after the
   * locker closed: the loss reason is then `closed`), `LockNotHeldError` after a release.
   */
  async extend(ttlMs: number): Promise<void> {
    this.#expireIfPast();
    if (this.#lossError) throw this.#lossError;
    if (this.#state !== 'held') throw new LockNotHeldError(this.grant.lockId, `lock '${this.grant.lockId}' was released`);
    await this.#renew(ttlMs);
    // The renewal may have discovered the loss (state changes under the await).
    if ((this.state as LeaseState) === 'lost') throw this.#lossError ?? new LockLostError(this.grant.lockId, 'not-held');
  }

  #lossError: LockLostError | undefined;

  /** Mark the lease lost (idempotent): stop timers, abort the signal, tell the locker. */
  lose(reason: LossReason, cause?: unknown): void {
    if (this.#state !== 'held') return;
    this.#state = 'lost';
    this.#clearTimers();
    const error = new LockLostError(this.grant.lockId, reason, {
      cause,
      context: { ownerId: this.grant.ownerId, token: this.grant.token, backend: this.#backend.name },
    });
    this.#lossError = error;
    this.#controller ??= new AbortController();
    this.#controller.abort(error);
    this.#hooks.onLost(this, error);
    this.#hooks.onEnded(this);
  }

  /**
   * Release on the backend (idempotent; the same promise for every caller). An in-flight
   * renewal is awaited first, so it cannot re-create the lease after the release. A lease
   * that already expired is not an error: the backend answers false and nothing is thrown.
   */
  release(): Promise<boolean> {
    if (this.#releasing) return this.#releasing;
    // Released after a stall past its deadline: it was lost first (the `lost` event, not `released`).
    this.#expireIfPast();
    const wasHeld = this.#state === 'held';
    this.#state = 'released';
    this.#clearTimers();
    if (wasHeld) this.#hooks.onEnded(this);
    // Most releases have no renewal in flight to wait for: no extra promise for them.
    const inflight = this.#inflight;
    this.#releasing = inflight ? inflight.catch(() => undefined).then(() => this.#sendRelease(wasHeld)) : this.#sendRelease(wasHeld);
    return this.#releasing;
  }

  /** Not an async function: one reaction on the backend's release (docs/benchmarks.md, "Redis: the uncontended floor"). */
  #sendRelease(wasHeld: boolean): Promise<boolean> {
    let sent: Promise<boolean>;
    try {
      sent = this.#backend.release(this.grant);
    } catch (err) {
      sent = Promise.reject(err as Error);
    }
    return sent.then(
      (released) => {
        // A lease lost (or closed) before its release was already reported as lost.
        if (wasHeld) this.#hooks.onReleased(this, released);
        return released;
      },
      (err: unknown) => {
        const error =
          err instanceof LocksmithError
            ? err
            : new BackendUnavailableError(this.#backend.name, `releasing lock '${this.grant.lockId}' failed; it expires after its ttl`, {
                cause: err,
              });
        this.#hooks.onError?.(this, 'release', error);
        throw error;
      },
    );
  }

  /** Stop all timers without touching the backend (a simulated crash). */
  abandon(): void {
    this.#state = 'released';
    this.#clearTimers();
  }

  #clearTimers(): void {
    clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#renewAt = Number.POSITIVE_INFINITY;
  }
}

/**
 * The one wait loop every backend shares (Curator's LockInternals, written once): attempt,
 * wait for a change, attempt again, until a grant, a timeout, an abort or `close()`.
 *
 * Data flows one way (docs/architecture.md, "One way down"): the locker hands down its
 * {@link AcquireHost} (the backend, close) and its {@link Registry} (leases, re-entry,
 * events); the loop registers the lease it obtained there and returns it. It never calls
 * back into the locker, which builds the `Lock` handle from what is returned.
 */
import type { AcquireRequest, AcquireResult, AsyncLossReason, Backend, Grant, LockKind } from './backend.js';
import { LockTimeoutError, UnsupportedError, type LossReason } from './errors.js';
import { lockEvent } from './events.js';
import { now, type Lease } from './lease.js';
import type { CallSettings } from './options.js';
import type { Registry } from './registry.js';
import { unavailable } from './util/cause.js';
import { raceAbort, withDeadline } from './util/time.js';
import { acquireLog as log, ms } from './observe/log.js';

/** Marks an attempt aborted by its own timeout (as opposed to the user's signal or close). */
const TIMEOUT = Symbol('locksmith.timeout');
/** How long abandoning an acquisition may delay the caller's rejection; the rest goes on in the background. */
const CLEANUP_BOUND_MS = 1_000;
/**
 * The least time a first attempt is given before a wait bound cuts it short: a healthy
 * server answers one attempt well within it, so a bound of a few ms still obtains a free
 * lock, while a server that answers nothing costs a bounded call at most this much.
 */
export const FIRST_ATTEMPT_MIN_MS = 250;

/** How one call waits: `lock()` and friends throw on timeout, `tryLock()` and friends resolve null. */
export interface AcquireMode {
  /** false: one attempt, no queue entry left behind. */
  readonly wait: boolean;
  readonly timeoutMs: number | undefined;
  readonly onTimeout: 'throw' | 'null';
}

/** The mode of a waiting call (`lock`, `read`, `write`, `acquire`). `timeoutMs: 0` is one attempt. */
export function waitMode(s: CallSettings): AcquireMode {
  const t = s.waitBoundMs;
  if (t === undefined) return WAIT;
  if (t === 0) return ONCE_THROW;
  return { wait: true, timeoutMs: t, onTimeout: 'throw' };
}

/** The mode of a soft call (`tryLock` and friends): one attempt unless a wait bound is given. */
export function tryMode(s: CallSettings): AcquireMode {
  const t = s.waitBoundMs ?? 0;
  return t === 0 ? ONCE_NULL : { wait: true, timeoutMs: t, onTimeout: 'null' };
}

// The modes without a bound are shared, not built per call.
const WAIT: AcquireMode = Object.freeze({ wait: true, timeoutMs: undefined, onTimeout: 'throw' });
const ONCE_THROW: AcquireMode = Object.freeze({ wait: false, timeoutMs: 0, onTimeout: 'throw' });
const ONCE_NULL: AcquireMode = Object.freeze({ wait: false, timeoutMs: 0, onTimeout: 'null' });

/** What the loop needs from its locker (implemented by host.ts). */
export interface AcquireHost {
  /** The backend, connected (at once when it is); gives up (rejects with the reason) when `signal()` aborts (asked for only when connecting). */
  backend(signal: () => AbortSignal): Backend | Promise<Backend>;
  /** Aborted by close() (with the reason a tracked controller gets): the signal of a call that needs none of its own. */
  readonly closeSignal: AbortSignal;
  /** Abort `controller` on close(); returns the function that stops doing so. */
  track(controller: AbortController): () => void;
}

/** What an acquisition obtained: a started, registered lease. */
export interface Acquired {
  readonly lease: Lease;
  /** True when it re-entered a hold (of this locker, or on the backend by the same owner). */
  readonly reentered: boolean;
  /** From the call to the grant. */
  readonly waitedMs: number;
  /** Passes the re-entry turn on once the handle is released (a re-entry of the enclosing withLock). */
  readonly endTurn: (() => void) | undefined;
}

/** One acquisition: what is asked and how to wait. */
export interface AcquireSpec {
  readonly lockId: string;
  readonly kind: LockKind;
  readonly permits: number;
  /** Permits this hold takes (1 but for a weighted semaphore acquisition). */
  readonly weight: number;
  readonly settings: CallSettings;
  readonly mode: AcquireMode;
  readonly ownerId: string;
  /** The locker's encoded identity (observe/identity.ts), stored with the hold or queue entry. */
  readonly identity: string;
}

/**
 * The abort signal of one acquisition. A call without a signal of the caller's borrows the
 * locker's close signal until it has to wait; a controller of its own (tracked by close(),
 * fed by the user's signal and the timeout, whose timer counts from the call) is made only
 * when the call waits: to connect, for a re-entry turn, or after a contended attempt. An
 * explicit owner needs none either: it changes what is asked of the backend, not how the
 * call ends. An AbortController per call was most of the core's own cost of an uncontended
 * cycle (docs/benchmarks.md, "The core's own cost").
 *
 * A wait bound of W ms bounds the whole call: it covers connecting, the attempts and the
 * waits, and the call ends by max(W, {@link FIRST_ATTEMPT_MIN_MS}) after it began. A bound
 * that falls due during the first attempt cuts that attempt short only once it has run
 * {@link FIRST_ATTEMPT_MIN_MS} since the call: a free lock is still obtained however short
 * the bound (no grant made only to be handed back, no fencing token burnt), while an attempt
 * stuck on a server that answers nothing (a paused Redlock master whose per-node timeout is
 * longer than W) no longer holds the caller past the bound (docs/architecture.md, "What the
 * core owns"). A first attempt that borrowed the close signal cannot be told to stop: the
 * call stops waiting for it, and what it obtains late is handed back ({@link giveBackLate}).
 */
class AttemptSignal {
  readonly #host: AcquireHost;
  readonly #spec: AcquireSpec;
  /** When the call began: its wait bound and its `waitedMs` count from here. */
  readonly startedAt = now();
  #controller: AbortController | undefined;
  #timer: NodeJS.Timeout | undefined;
  /** Cuts the first attempt short (a call with a controller of its own). */
  #cut: NodeJS.Timeout | undefined;
  #unlisten: (() => void) | undefined;
  #untrack: (() => void) | undefined;
  /** `before` the first attempt, `during` it (a due timeout waits), `after` it. */
  #first: 'before' | 'during' | 'after' = 'before';
  /** The timeout fell due during the first attempt. */
  #due = false;

  constructor(host: AcquireHost, spec: AcquireSpec) {
    this.#host = host;
    this.#spec = spec;
    if (spec.settings.signal !== undefined) this.own();
  }

  get signal(): AbortSignal {
    return this.#controller?.signal ?? this.#host.closeSignal;
  }

  /** Switch to a controller of this call's own (idempotent); returns its signal. */
  own(): AbortSignal {
    if (this.#controller) return this.#controller.signal;
    const controller = new AbortController();
    this.#controller = controller;
    this.#untrack = this.#host.track(controller);
    this.#unlisten = forwardAbort(this.#spec.settings.signal, controller);
    const t = this.#spec.mode.timeoutMs;
    if (t !== undefined && this.#spec.mode.wait) {
      // The bound counts from the call, however late the controller is made.
      const left = t - (now() - this.startedAt);
      // Ref'd on purpose: a caller awaiting a lock keeps the process alive; cleared when the wait ends.
      if (left > 0) this.#timer = setTimeout(() => this.#timeout(), left);
      else this.#timeout();
    }
    return controller.signal;
  }

  #timeout(): void {
    if (this.#first === 'during') this.#due = true;
    else this.#controller?.abort(TIMEOUT);
  }

  /**
   * `attempt`, just sent, raced against the end of the call: its signal of its own aborting
   * (the caller's signal, the bound, close()), and for the first attempt of a bounded call
   * the cut at max(W, FIRST_ATTEMPT_MIN_MS) after the call. The backend is told through
   * `req.signal` when it was given the call's own (src/backend.ts), but the call does not
   * wait for it to listen: what an attempt given up on ends with is given back
   * ({@link giveBackLate}).
   */
  bound(attempt: Promise<AcquireResult>, backend: Backend, req: AcquireRequest): Promise<AcquireResult> {
    const first = this.#first === 'before';
    if (first) this.#first = 'during';
    const t = this.#spec.mode.timeoutMs;
    const cutInMs =
      first && this.#spec.mode.wait && t !== undefined ? Math.max(t, FIRST_ATTEMPT_MIN_MS) - (now() - this.startedAt) : undefined;
    const signal = this.#controller?.signal;
    // A call without a signal of its own nor a bound: nothing can end it but close().
    if (signal === undefined && cutInMs === undefined) return attempt;
    return new Promise<AcquireResult>((resolve, reject) => {
      let gaveUp = false;
      const giveUp = (): void => {
        if (gaveUp) return;
        gaveUp = true;
        finish();
        reject(this.signal.reason);
      };
      const finish = (): void => {
        clearTimeout(this.#cut);
        signal?.removeEventListener('abort', giveUp);
      };
      // Ref'd like the bound's own timer (a caller awaiting a lock keeps the process alive).
      if (cutInMs !== undefined) {
        this.#cut = setTimeout(
          () => {
            this.#cutShort();
            giveUp();
          },
          Math.max(0, cutInMs),
        );
      }
      signal?.addEventListener('abort', giveUp, { once: true });
      if (signal?.aborted) giveUp();
      attempt.then(
        (result) => {
          if (gaveUp) return giveBackLate(backend, req, result);
          finish();
          resolve(result);
        },
        (err: unknown) => {
          // An attempt that stopped on the abort left nothing the cancel does not take back.
          if (gaveUp) return err === this.signal.reason ? undefined : giveBackLate(backend, req, undefined);
          finish();
          reject(err);
        },
      );
    });
  }

  /** The first attempt outlasted the bound: end the call (a controller is made if there was none). */
  #cutShort(): void {
    if (this.#first !== 'during') return;
    this.#first = 'after';
    this.own();
    this.#controller?.abort(TIMEOUT);
  }

  /** The first attempt did not end the acquisition: a timeout that fell due during it ends it now. */
  attempted(): void {
    if (this.#first !== 'during') return;
    this.#first = 'after';
    clearTimeout(this.#cut);
    if (this.#due) this.#controller?.abort(TIMEOUT);
  }

  dispose(): void {
    clearTimeout(this.#timer);
    clearTimeout(this.#cut);
    this.#unlisten?.();
    this.#untrack?.();
  }
}

/**
 * Run one acquisition to its end: what it obtained (the lease registered in `registry`),
 * `null` (tryLock), or an error.
 */
export async function acquire(host: AcquireHost, registry: Registry, spec: AcquireSpec): Promise<Acquired | null> {
  const attempt = new AttemptSignal(host, spec);
  const started = attempt.startedAt;
  try {
    const s = spec.settings;
    const found = registry.reentry.find(spec.lockId, spec.kind, s.owner, s.reentrant, () => attempt.own());
    const again = found instanceof Promise ? await found : found;
    if (again.kind === 'reenter') {
      again.lease.retain();
      return { lease: again.lease, reentered: true, waitedMs: 0, endTurn: again.endTurn };
    }
    // Connecting is waiting: the timeout covers it (a connected backend answers at once).
    const connecting = host.backend(() => attempt.own());
    const backend = connecting instanceof Promise ? await connecting : connecting;
    checkCapabilities(backend, spec, s);
    // Nothing awaited since the call began (no re-entry turn, connected): its clock reading
    // serves as the first attempt's send time, earlier by microseconds (so, if anything, a
    // shorter validity), one clock reading less per acquisition.
    const sentAt = found instanceof Promise || connecting instanceof Promise ? undefined : started;
    try {
      return await new Loop(registry, backend, spec, attempt, sentAt).run();
    } catch (err) {
      if (attempt.signal.aborted) throw err;
      throw registry.failed('acquire', spec.lockId, backend.name, unavailable(backend.name, `acquire of '${spec.lockId}'`, err));
    }
  } catch (err) {
    if (!attempt.signal.aborted) {
      if (err instanceof LockTimeoutError) timedOut(registry, spec, started);
      throw err;
    }
    const reason: unknown = attempt.signal.reason;
    if (reason !== TIMEOUT) throw reason;
    timedOut(registry, spec, started);
    if (spec.mode.onTimeout === 'null') return null;
    throw new LockTimeoutError(spec.lockId, spec.mode.timeoutMs ?? 0);
  } finally {
    attempt.dispose();
  }
}

/** Tell the `timeout` listeners and the log that an acquisition's wait bound ran out. */
function timedOut(registry: Registry, spec: AcquireSpec, started: number): void {
  const waitedMs = now() - started;
  if (log.enabled) log('%s: timed out after %s (bound %dms, %s)', spec.lockId, ms(waitedMs), spec.mode.timeoutMs ?? 0, spec.kind);
  const events = registry.events;
  if (events.wants('timeout')) events.emit('timeout', { ...lockEvent(spec), timeoutMs: spec.mode.timeoutMs ?? 0, waitedMs });
}

/** Refuse options the backend cannot honour (`UnsupportedError`), before anything is sent. */
function checkCapabilities(backend: Backend, spec: AcquireSpec, s: CallSettings): void {
  const c = backend.capabilities;
  const kind = spec.kind;
  if ((kind === 'read' || kind === 'write') && !c.shared) throw new UnsupportedError(backend.name, 'read-write locks');
  if (kind === 'semaphore' && !c.permits) throw new UnsupportedError(backend.name, 'semaphores');
  if (spec.weight > 1 && c.weightedPermits !== true) throw new UnsupportedError(backend.name, 'several permits per hold');
  if (s.fair && !c.fair) throw new UnsupportedError(backend.name, 'fair mode');
  if (s.lockDelayMs > 0 && !c.lockDelay) throw new UnsupportedError(backend.name, 'lockDelayMs');
}

/** The attempt / wait loop against one connected backend. */
class Loop {
  readonly #registry: Registry;
  readonly #backend: Backend;
  readonly #spec: AcquireSpec;
  readonly #attempt: AttemptSignal;
  readonly #started: number;
  #ticket: unknown;
  /** An attempt failed in flight: it may have left a hold or a queue entry on the server. */
  #uncertain = false;
  #lease: Lease | undefined;
  #earlyLoss: { reason: LossReason; cause: unknown } | undefined;

  /** The first attempt's send time, when the caller read the clock for it just now. */
  #firstSentAt: number | undefined;

  constructor(registry: Registry, backend: Backend, spec: AcquireSpec, attempt: AttemptSignal, firstSentAt?: number) {
    this.#registry = registry;
    this.#backend = backend;
    this.#spec = spec;
    this.#attempt = attempt;
    this.#started = attempt.startedAt;
    this.#firstSentAt = firstSentAt;
  }

  get #signal(): AbortSignal {
    return this.#attempt.signal;
  }

  #request(): AcquireRequest {
    const { lockId, kind, permits, weight, settings: s, mode, ownerId, identity } = this.#spec;
    return {
      lockId,
      kind,
      permits,
      weight,
      ownerId,
      identity,
      freshOwner: s.owner === undefined,
      ttlMs: s.ttlMs,
      fair: s.fair,
      lockDelayMs: s.lockDelayMs,
      wait: mode.wait,
      ticket: this.#ticket,
      signal: this.#signal,
      onLost: (reason, cause) => this.#onLost(reason, cause),
    };
  }

  #onLost(reason: AsyncLossReason, cause: unknown): void {
    if (this.#lease) this.#lease.lose(reason, cause);
    else this.#earlyLoss = { reason, cause };
  }

  async run(): Promise<Acquired | null> {
    try {
      let announced = false;
      for (;;) {
        this.#signal.throwIfAborted();
        const sentAt = this.#firstSentAt ?? now();
        this.#firstSentAt = undefined;
        this.#uncertain = true;
        const req = this.#request();
        const result = await this.#attempt.bound(this.#backend.tryAcquire(req), this.#backend, req);
        this.#uncertain = false;
        if (log.enabled)
          log(
            '%s: attempt (%s) %s in %s',
            this.#spec.lockId,
            this.#spec.kind,
            result.granted ? 'granted' : 'contended',
            ms(now() - sentAt),
          );
        if (result.granted) {
          this.#ticket = undefined;
          // Granted after the caller gave up: hand it straight back.
          if (this.#signal.aborted) await this.#handBack(result.grant, true);
          const got = this.#onGrant(result.grant, sentAt);
          if (got) return got;
          // The grant took longer than its own validity (Redlock's negative validity): retry.
          await this.#handBack(result.grant, false);
        } else {
          this.#ticket = result.contended.ticket;
        }
        this.#attempt.attempted();
        this.#signal.throwIfAborted();
        if (!this.#spec.mode.wait) return this.#contended();
        if (!announced) {
          announced = true;
          const events = this.#registry.events;
          if (events.wants('waiting')) events.emit('waiting', lockEvent(this.#spec));
        }
        // A wait gets a signal of its own: waits must not pile listeners onto the shared close signal.
        const signal = this.#attempt.own();
        signal.throwIfAborted();
        const waitFrom = log.enabled ? now() : 0;
        await raceAbort(this.#backend.waitForChange(this.#spec.lockId, this.#ticket, signal), signal);
        if (log.enabled) log('%s: woken after %s', this.#spec.lockId, ms(now() - waitFrom));
      }
    } catch (err) {
      await this.#abandon();
      throw err;
    }
  }

  /** A one-shot attempt found the lock held: `null` for tryLock, `LockTimeoutError` for `timeoutMs: 0`. */
  #contended(): null {
    if (this.#spec.mode.onTimeout === 'null') return null;
    throw new LockTimeoutError(this.#spec.lockId, 0);
  }

  /**
   * Turn a grant into a started, registered lease; undefined when it was too late to be of
   * use. Synchronous: the usual grant costs no promise of its own.
   */
  #onGrant(grant: Grant, sentAt: number): Acquired | undefined {
    // One clock reading for the lease's first steps (taken in, still valid, its timer).
    const at = now();
    const lease = this.#registry.lease(this.#backend, grant, sentAt, this.#spec.settings, at);
    if (!lease.validAt(at)) return undefined;
    this.#lease = lease;
    this.#registry.adopt(lease, this.#spec.settings.owner);
    lease.start(at);
    if (log.enabled) log('%s: holding token %s after %s', grant.lockId, grant.token, ms(now() - this.#started));
    if (this.#earlyLoss) lease.lose(this.#earlyLoss.reason, this.#earlyLoss.cause);
    return { lease, reentered: grant.reentered, waitedMs: lease.acquiredAt - this.#started, endTurn: undefined };
  }

  /** Give back a grant nobody will use; `aborted`: then end the acquisition with the signal's reason. */
  async #handBack(grant: Grant, aborted: boolean): Promise<void> {
    await this.#backend.release(grant).catch(() => undefined);
    if (aborted) throw this.#signal.reason;
  }

  /**
   * The acquisition ends without a lock: remove our queue entry, and (for an attempt whose
   * reply never came) whatever of ours it may have left on the server. Bounded, so that an
   * unreachable backend does not hold up the caller's rejection.
   */
  async #abandon(): Promise<void> {
    const ticket = this.#ticket;
    this.#ticket = undefined;
    const ghost = this.#uncertain && this.#spec.settings.owner === undefined;
    if (ticket === undefined && !ghost) return;
    const cleanup = this.#backend.cancel(this.#request(), ticket);
    await withDeadline(cleanup, { timeoutMs: CLEANUP_BOUND_MS }).catch(() => undefined);
  }
}

/**
 * An attempt the call stopped waiting for ended after all (a backend that was not told to
 * stop, or did not listen): give back its grant, its queue entry, or, when it failed other
 * than by the abort and the owner is this call's own, whatever it may have left.
 */
function giveBackLate(backend: Backend, req: AcquireRequest, result: AcquireResult | undefined): void {
  if (result?.granted) void backend.release(result.grant).catch(() => undefined);
  else if (result?.contended.ticket !== undefined || req.freshOwner) {
    void backend.cancel(req, result?.contended.ticket).catch(() => undefined);
  }
}

/** One listener per user signal, however many waits share it (no MaxListenersExceededWarning). */
const forwards = new WeakMap<AbortSignal, Set<AbortController>>();

/** Abort `target` when `source` aborts; returns the function that stops forwarding. */
function forwardAbort(source: AbortSignal | undefined, target: AbortController): () => void {
  if (!source) return () => undefined;
  if (source.aborted) {
    target.abort(source.reason);
    return () => undefined;
  }
  let set = forwards.get(source);
  if (!set) {
    const targets = new Set<AbortController>();
    set = targets;
    forwards.set(source, targets);
    source.addEventListener(
      'abort',
      () => {
        forwards.delete(source);
        for (const c of [...targets]) c.abort(source.reason);
      },
      { once: true },
    );
  }
  const targets = set;
  targets.add(target);
  return () => {
    targets.delete(target);
  };
}

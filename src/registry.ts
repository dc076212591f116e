/**
 * What one locker holds: its live leases, its re-entry bookkeeping and the hub its events
 * go out on. The locker owns it and hands it down to the wait loop (acquire.ts), which
 * registers what it obtains here instead of calling back into the locker; the leases report
 * renewals, losses and releases here (docs/architecture.md, "One way down").
 */
import type { Backend, Grant } from './backend.js';
import { BackendUnavailableError, QuorumError, type LockLostError, type LocksmithError } from './errors.js';
import { EventHub, lockEvent, type BackendOperation } from './events.js';
import { leaseLog as log } from './observe/log.js';
import { Lease, now, type LeaseHooks } from './lease.js';
import { Reentry } from './reentry.js';

/** The lease settings an acquisition chose. */
export interface LeaseChoice {
  readonly ttlMs: number;
  readonly autoExtend: boolean;
}

/** @internal The leases, re-entry and events of one locker. */
export class Registry {
  /** Where the locker's events are emitted (its `on` / `off` subscribe here). */
  readonly events = new EventHub();
  readonly reentry: Reentry;
  readonly #leases = new Set<Lease>();
  readonly #driftFactor: number;
  /** One set of hooks for every lease of this locker (no closures per acquisition). */
  readonly #hooks: LeaseHooks;

  constructor(lockerId: number, driftFactor: number) {
    this.reentry = new Reentry(lockerId);
    this.#driftFactor = driftFactor;
    const events = this.events;
    this.#hooks = {
      onExtended: (lease) => {
        if (events.wants('extended')) events.emit('extended', lockEvent(lease.grant, { validUntil: lease.validUntil }));
      },
      onLost: (lease, error: LockLostError) => {
        if (log.enabled) log('%s: lost token %s (%s)', lease.grant.lockId, lease.grant.token, error.reason);
        if (events.wants('lost')) events.emit('lost', lockEvent(lease.grant, { error }));
      },
      onReleased: (lease, released) => {
        if (log.enabled)
          log(
            '%s: released token %s after %dms (%s)',
            lease.grant.lockId,
            lease.grant.token,
            Math.round(now() - lease.acquiredAt),
            released ? 'was held' : 'had expired',
          );
        if (events.wants('released')) events.emit('released', lockEvent(lease.grant, { heldMs: now() - lease.acquiredAt, released }));
      },
      onError: (lease, operation, error) => {
        this.failed(operation, lease.grant.lockId, lease.backendName, error);
      },
      onEnded: (lease) => {
        this.#leases.delete(lease);
        this.reentry.forget(lease);
      },
    };
  }

  /**
   * Tell the `error` listeners (and the log) of a backend failure: unreachable, or an error
   * that is not an answer about the lock. Returns the error, to be thrown on.
   */
  failed(operation: BackendOperation, lockId: string | undefined, backend: string, error: LocksmithError): LocksmithError {
    if (!(error instanceof BackendUnavailableError || error instanceof QuorumError)) return error;
    if (log.enabled) log('%s: %s on %s failed: %s', lockId ?? '-', operation, backend, error.message);
    if (this.events.wants('error')) this.events.emit('error', { lockId, operation, backend, error });
    return error;
  }

  /** A lease on `grant`, its validity counted from `sentAt`, taken in at `at` (default: now); not started nor registered yet. */
  lease(backend: Backend, grant: Grant, sentAt: number, choice: LeaseChoice, at?: number): Lease {
    const settings = { ttlMs: choice.ttlMs, autoExtend: choice.autoExtend, driftFactor: this.#driftFactor };
    return new Lease(backend, grant, sentAt, settings, this.#hooks, at);
  }

  /** Keep a lease about to start (for close, and for re-entry by its explicit `owner`). */
  adopt(lease: Lease, owner: string | undefined): void {
    this.#leases.add(lease);
    this.reentry.rememberOwner(lease, owner);
  }

  /** The live leases, as a list (ending one removes it from the registry). */
  held(): Lease[] {
    return [...this.#leases];
  }

  /** Forget one lease without ending it (a hold left to run out on the backend). */
  forget(lease: Lease): void {
    this.#leases.delete(lease);
    this.reentry.forget(lease);
  }

  /** Forget every lease without ending any (a simulated crash). */
  clear(): void {
    this.#leases.clear();
    this.reentry.clear();
  }
}

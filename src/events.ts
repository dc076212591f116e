/**
 * Typed events of a Locker. Listeners run synchronously; a listener that throws is reported
 * as a process warning and never breaks the lock machinery.
 */
import type { LockKind } from './backend.js';
import type { LockLostError, LocksmithError } from './errors.js';
import type { Identity } from './observe/identity.js';

/** What a locker was doing when its backend failed (the `error` event). */
export type BackendOperation = 'acquire' | 'extend' | 'release' | 'inspect' | 'list' | 'watch' | 'forceRelease';

/** Fields every lock event carries. */
export interface LockEventBase {
  readonly lockId: string;
  readonly ownerId: string;
  readonly kind: LockKind;
}

/** The events and their payloads. */
export interface LockerEvents {
  /** A contended acquisition starts waiting. */
  waiting: LockEventBase;
  /** A lock was obtained (`waitedMs` from the call to the grant). */
  acquired: LockEventBase & { readonly token: bigint; readonly waitedMs: number; readonly reentered: boolean };
  /** A lease was renewed; `validUntil` is the new local deadline. */
  extended: LockEventBase & { readonly token: bigint; readonly validUntil: number };
  /** A held lock was released (`released` false when it had already expired on the backend). */
  released: LockEventBase & { readonly token: bigint; readonly heldMs: number; readonly released: boolean };
  /** A held lock was lost. */
  lost: LockEventBase & { readonly token: bigint; readonly error: LockLostError };
  /** An acquisition gave up when its wait bound ran out (`lock()` rejects, `tryLock()` resolves null). */
  timeout: LockEventBase & { readonly timeoutMs: number; readonly waitedMs: number };
  /**
   * The backend failed an operation (unreachable, or an error that is not about the lock).
   * Informational: the call concerned still rejects or retries as documented; unlike a Node
   * EventEmitter's `error`, nobody needs to listen.
   */
  error: {
    readonly lockId: string | undefined;
    readonly operation: BackendOperation;
    readonly backend: string;
    readonly error: LocksmithError;
  };
  /** `forceRelease()` broke a lock: every hold of it ended, its token counter moved on. */
  broken: { readonly lockId: string; readonly reason: string; readonly by: Identity; readonly holds: number };
}

/** Name of a locker event. */
export type LockerEventName = keyof LockerEvents;
type Listener<E extends LockerEventName> = (event: LockerEvents[E]) => void;

/** What a hold's event is about: a grant (or anything shaped like one). */
interface HoldSubject extends LockEventBase {
  readonly token: bigint;
}

/**
 * The one place an event payload is made: the subject's `lockId`, `ownerId`, `kind` (and
 * `token`, for a hold) and the event's own fields. Only those fields are copied, so a grant
 * or a request can be passed as it is.
 */
export function lockEvent(who: LockEventBase): LockEventBase;
export function lockEvent<X extends object>(who: HoldSubject, extra: X): HoldSubject & X;
export function lockEvent(who: LockEventBase & { readonly token?: bigint }, extra?: object): LockEventBase {
  const base = { lockId: who.lockId, ownerId: who.ownerId, kind: who.kind };
  if (extra === undefined) return base;
  const hold = { ...base, token: who.token, ...extra };
  return hold;
}

/** @internal The listeners of one locker, and the one way to tell them (no `error` event semantics). */
export class EventHub {
  readonly #listeners = new Map<LockerEventName, Set<(event: never) => void>>();

  on<E extends LockerEventName>(event: E, listener: Listener<E>): void {
    let set = this.#listeners.get(event);
    if (!set) {
      set = new Set();
      this.#listeners.set(event, set);
    }
    set.add(listener as (event: never) => void);
  }

  off<E extends LockerEventName>(event: E, listener: Listener<E>): void {
    this.#listeners.get(event)?.delete(listener as (event: never) => void);
  }

  /** True when somebody listens to `event` (a payload nobody reads is not built). */
  wants(event: LockerEventName): boolean {
    return (this.#listeners.get(event)?.size ?? 0) > 0;
  }

  /** Call every listener of `event`; a listener that throws becomes a process warning. */
  emit<E extends LockerEventName>(event: E, payload: LockerEvents[E]): void {
    const set = this.#listeners.get(event);
    if (!set) return;
    for (const l of [...set]) {
      try {
        (l as Listener<E>)(payload);
      } catch (err) {
        process.emitWarning(`locksmith: a '${event}' listener threw: ${String(err)}`, { code: 'LOCKSMITH_LISTENER' });
      }
    }
  }
}

/** A minimal typed event emitter over an {@link EventHub} (the hub is what the core emits on). */
export class TypedEmitter {
  readonly #hub: EventHub;

  /** @internal */
  constructor(hub: EventHub) {
    this.#hub = hub;
  }

  /** Subscribe to an event. */
  on<E extends LockerEventName>(event: E, listener: Listener<E>): this {
    this.#hub.on(event, listener);
    return this;
  }

  /** Subscribe for one occurrence. */
  once<E extends LockerEventName>(event: E, listener: Listener<E>): this {
    const wrapper: Listener<E> = (e) => {
      this.off(event, wrapper);
      listener(e);
    };
    return this.on(event, wrapper);
  }

  /** Unsubscribe. */
  off<E extends LockerEventName>(event: E, listener: Listener<E>): this {
    this.#hub.off(event, listener);
    return this;
  }
}

/**
 * Typed events of a Locker. Listeners run synchronously; a listener that throws is reported
 * as a process warning and never breaks the lock machinery.
 */
import type { LockKind } from './backend.js';
import type { LockLostError } from './errors.js';

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
}

/** Name of a locker event. */
export type LockerEventName = keyof LockerEvents;
type Listener<E extends LockerEventName> = (event: LockerEvents[E]) => void;

/** A minimal typed event emitter (no `error` event semantics, no throws into the emitter). */
export class TypedEmitter {
  readonly #listeners = new Map<LockerEventName, Set<(event: never) => void>>();

  /** Subscribe to an event. */
  on<E extends LockerEventName>(event: E, listener: Listener<E>): this {
    let set = this.#listeners.get(event);
    if (!set) {
      set = new Set();
      this.#listeners.set(event, set);
    }
    set.add(listener as (event: never) => void);
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
    this.#listeners.get(event)?.delete(listener as (event: never) => void);
    return this;
  }

  /** @internal */
  protected emit<E extends LockerEventName>(event: E, payload: LockerEvents[E]): void {
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

/**
 * Re-entry: when a second acquisition of a lock is answered from a hold this locker already
 * has instead of going to the backend. Two ways, both explicit (docs/recipes/mutex.md,
 * "Re-entry"):
 *
 * - By **async context**: `withLock` runs its callback in a context that names the hold. A
 *   nested acquisition of the same lock from that context must say what it means:
 *   `reentrant: true` re-enters, `reentrant: false` waits like any other caller, and no
 *   answer is an error. Re-entries of one hold take turns (a baton), so siblings started
 *   with `Promise.all` never overlap each other. Why not implicit: AsyncLocalStorage flows
 *   into every timer and promise started inside the callback, so implicit re-entry would
 *   let forked work run "inside" the lock beside the callback itself.
 * - By **explicit owner**: the same `owner` id re-enters within this locker (and across
 *   clients where the backend counts holds). The owner id is the holder's identity.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import type { LockKind } from './backend.js';
import { InvalidArgumentError } from './errors.js';
import type { Lease } from './lease.js';

/** One FIFO turn at a time among the re-entries of one hold. */
class Baton {
  #busy = false;
  readonly #queue: Array<() => void> = [];

  /** Resolve with a function that passes the baton on; reject with the reason if `signal` aborts first. */
  take(signal: AbortSignal): Promise<() => void> {
    if (signal.aborted) return Promise.reject(signal.reason);
    if (!this.#busy) {
      this.#busy = true;
      return Promise.resolve(this.#passer());
    }
    return new Promise((resolve, reject) => {
      const turn = (): void => {
        signal.removeEventListener('abort', onAbort);
        resolve(this.#passer());
      };
      const onAbort = (): void => {
        const i = this.#queue.indexOf(turn);
        if (i >= 0) this.#queue.splice(i, 1);
        reject(signal.reason);
      };
      this.#queue.push(turn);
      signal.addEventListener('abort', onAbort, { once: true });
    });
  }

  #passer(): () => void {
    let passed = false;
    return () => {
      if (passed) return;
      passed = true;
      const next = this.#queue.shift();
      if (next) next();
      else this.#busy = false;
    };
  }
}

/** A hold as seen from the callback of the `withLock` that entered it. */
interface Frame {
  readonly lease: Lease;
  readonly baton: Baton;
}

/** What {@link Reentry.find} found. */
export type ReentryMatch =
  /** No hold to re-enter: acquire from the backend. */
  | { readonly kind: 'none' }
  /** Re-enter `lease`; call `endTurn` (when there is one: a turn among siblings) when the re-entered handle is released. */
  | { readonly kind: 'reenter'; readonly lease: Lease; readonly endTurn: (() => void) | undefined };

const NONE: ReentryMatch = { kind: 'none' };

/** The re-entry bookkeeping of one locker: which holds a new acquisition may re-enter. */
export class Reentry {
  readonly #context = new AsyncLocalStorage<ReadonlyMap<string, Frame>>();
  readonly #byOwner = new Map<string, Lease>();
  readonly #lockerId: number;

  constructor(lockerId: number) {
    this.#lockerId = lockerId;
  }

  #contextKey(kind: LockKind, lockId: string): string {
    return `${this.#lockerId}\0${kind}\0${lockId}`;
  }

  static #ownerKey(kind: LockKind, lockId: string, owner: string): string {
    return `${kind}\0${lockId}\0${owner}`;
  }

  /**
   * Find a hold to re-enter for a new acquisition, waiting (until `signal()` aborts) for the
   * baton when the context holds it. Semaphores never re-enter (each acquisition is one more permit).
   */
  find(
    lockId: string,
    kind: LockKind,
    owner: string | undefined,
    reentrant: boolean | undefined,
    signal: () => AbortSignal,
  ): ReentryMatch | Promise<ReentryMatch> {
    if (kind === 'semaphore') return NONE;
    const frame = this.#context.getStore()?.get(this.#contextKey(kind, lockId));
    if (frame?.lease.valid && reentrant !== false) {
      if (reentrant !== true) {
        throw new InvalidArgumentError(
          'reentrant',
          `lock '${lockId}' is held by the enclosing withLock in this async context: pass { reentrant: true } to re-enter ` +
            '(for calls the holder awaits) or { reentrant: false } to wait for it like any other caller (for forked work)',
          { context: { lockId } },
        );
      }
      // Asked for only here: waiting for a turn is what needs the call's own signal.
      return this.#takeTurn(frame, lockId, kind, owner, signal());
    }
    return this.#byOwnerHold(lockId, kind, owner);
  }

  async #takeTurn(frame: Frame, lockId: string, kind: LockKind, owner: string | undefined, signal: AbortSignal): Promise<ReentryMatch> {
    const pass = await frame.baton.take(signal);
    if (frame.lease.valid) return { kind: 'reenter', lease: frame.lease, endTurn: pass };
    pass();
    return this.#byOwnerHold(lockId, kind, owner);
  }

  #byOwnerHold(lockId: string, kind: LockKind, owner: string | undefined): ReentryMatch {
    const byOwner = owner === undefined ? undefined : this.#byOwner.get(Reentry.#ownerKey(kind, lockId, owner));
    if (byOwner?.valid) return { kind: 'reenter', lease: byOwner, endTurn: undefined };
    return NONE;
  }

  /** Remember a fresh hold taken with an explicit owner. */
  rememberOwner(lease: Lease, owner: string | undefined): void {
    if (owner === undefined) return;
    const g = lease.grant;
    this.#byOwner.set(Reentry.#ownerKey(g.kind, g.lockId, owner), lease);
  }

  /** Forget a hold that ended. */
  forget(lease: Lease): void {
    // Most lockers never pass an explicit owner: no key to build then.
    if (this.#byOwner.size === 0) return;
    const g = lease.grant;
    const key = Reentry.#ownerKey(g.kind, g.lockId, g.ownerId);
    if (this.#byOwner.get(key) === lease) this.#byOwner.delete(key);
  }

  /** Forget every hold (a simulated crash). */
  clear(): void {
    this.#byOwner.clear();
  }

  /** Run `fn` in a context where `lease` can be re-entered (with `reentrant: true`). */
  run<T>(lease: Lease, fn: () => T): T {
    const g = lease.grant;
    const frames = new Map(this.#context.getStore() ?? []);
    frames.set(this.#contextKey(g.kind, g.lockId), { lease, baton: new Baton() });
    return this.#context.run(frames, fn);
  }
}

/**
 * The handle a holder gets from `lock()`, `tryLock()`, `read()`, `write()`, `acquire()`.
 */
import type { LockKind } from './backend.js';
import { LockNotHeldError } from './errors.js';
import { now, type Lease } from './lease.js';
import { validateDuration } from './options.js';

/**
 * A held lock. Use it with `await using` (or call `release()`):
 *
 * ```ts
 * await using lock = await locker.lock('account:42');
 * await resource.write(lock.token, value);
 * ```
 */
export class Lock implements AsyncDisposable {
  /** The lock's name. */
  readonly lockId: string;
  /** Unique id of this holder (a thread id, in other lock libraries), or the explicit `owner`. */
  readonly ownerId: string;
  /**
   * Fencing token: strictly increasing per lockId across all clients. Pass it to the
   * resource. A `bigint`: `lock.token.toString()` is its decimal form (store it as such, or
   * in a 64-bit integer column) and `BigInt(text)` reads it back; `JSON.stringify(lock)`
   * writes it as that string (see {@link Lock.toJSON}), while `JSON.stringify(lock.token)`
   * throws, as for every bigint.
   */
  readonly token: bigint;
  /** `mutex`, `read`, `write` or `semaphore`. */
  readonly kind: LockKind;
  /** True when this handle re-entered a hold (nested withLock, same explicit owner). */
  readonly reentered: boolean;
  readonly #lease: Lease;
  /** Passes the re-entry turn on (a handle that re-entered the enclosing withLock's hold). */
  readonly #endTurn: (() => void) | undefined;
  #released = false;

  /** @internal Created by the Locker only. */
  constructor(lease: Lease, reentered: boolean, endTurn?: () => void) {
    this.#lease = lease;
    this.lockId = lease.grant.lockId;
    this.ownerId = lease.grant.ownerId;
    this.token = lease.grant.token;
    this.kind = lease.grant.kind;
    this.reentered = reentered;
    this.#endTurn = endTurn;
  }

  /**
   * Aborted — with a `LockLostError` as `reason` — as soon as exclusivity can no longer be
   * guaranteed: before `validUntil`, when a renewal is refused, or when the backend reports
   * the loss. Pass it to the work done under the lock.
   */
  get signal(): AbortSignal {
    return this.#lease.signal;
  }

  /**
   * Local monotonic deadline up to which exclusivity is guaranteed, in `performance.now()`
   * ms plus any time the host was seen suspended (0 unless it was; docs/guarantees.md,
   * "Validity"); not wall-clock time. It moves forward with every renewal. Most code wants
   * {@link Lock.remainingMs} instead.
   */
  get validUntil(): number {
    return this.#lease.validUntil;
  }

  /** Milliseconds of guaranteed exclusivity left (0 once released or lost). */
  remainingMs(): number {
    if (!this.held) return 0;
    return Math.max(0, this.#lease.validUntil - now());
  }

  /**
   * A JSON-safe view for logs: `token` as a decimal string (a bigint has no JSON form; use
   * `BigInt(json.token)` to read it back, or `lock.token.toString()` directly).
   */
  toJSON(): { lockId: string; ownerId: string; kind: LockKind; token: string; held: boolean; remainingMs: number } {
    return {
      lockId: this.lockId,
      ownerId: this.ownerId,
      kind: this.kind,
      token: this.token.toString(),
      held: this.held,
      remainingMs: Math.round(this.remainingMs()),
    };
  }

  /** For logs: `lock 'account:42' (mutex, token 17, held)`. */
  toString(): string {
    return `lock '${this.lockId}' (${this.kind}, token ${this.token}, ${this.held ? 'held' : 'not held'})`;
  }

  /** True while this handle is not released and the lease is valid. */
  get held(): boolean {
    return !this.#released && this.#lease.valid;
  }

  /**
   * Renew the lease now (by `ttlMs`, default the acquisition's ttl). Rejects with
   * `LockLostError` when the lock was lost, `LockNotHeldError` after `release()`.
   */
  async extend(ttlMs?: number): Promise<void> {
    if (this.#released) throw new LockNotHeldError(this.lockId, `lock '${this.lockId}' was released by this handle`);
    const ttl = ttlMs === undefined ? this.#lease.requestedTtlMs : validateDuration(ttlMs, 'ttlMs');
    await this.#lease.extend(ttl);
  }

  /**
   * Give the lock up. Idempotent; never throws for a lease that already expired. A
   * re-entered handle only drops its count; the outermost release frees the lock.
   */
  release(): Promise<void> {
    if (this.#released) return Promise.resolve();
    this.#released = true;
    // Not an async function: the usual release (no re-entry turn to pass on) is one reaction
    // on the lease's release (docs/benchmarks.md, "Redis: the uncontended floor").
    const endTurn = this.#endTurn;
    let released: Promise<boolean> | undefined;
    try {
      // The last reference releases on the backend; the lease reports it (the `released` event).
      released = this.#lease.unref();
    } catch (err) {
      endTurn?.();
      return Promise.reject(err as Error);
    }
    if (!released) {
      endTurn?.();
      return Promise.resolve();
    }
    if (!endTurn) return released.then(nothing);
    return released.then(
      () => endTurn(),
      (err: unknown) => {
        endTurn();
        throw err;
      },
    );
  }

  /** `await using` calls `release()`. */
  [Symbol.asyncDispose](): Promise<void> {
    return this.release();
  }

  /** @internal */
  get lease(): Lease {
    return this.#lease;
  }
}

const nothing = (): void => undefined;

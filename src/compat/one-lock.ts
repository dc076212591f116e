/**
 * One resource's lock in the shape of a `lockAll` result: with one id there is nothing to
 * order, combine or roll back, so node-redlock's common single-resource `acquire` skips
 * `lockAll`'s set bookkeeping, most of the shim's own cost of an uncontended cycle
 * (docs/benchmarks.md, "Compat shims").
 */
import { InvalidArgumentError } from '../errors.js';
import type { Lock as Hold } from '../lock.js';
import type { MultiLock } from '../lock-all.js';

/** A {@link MultiLock} of exactly one lock. */
export class OneLock implements MultiLock {
  readonly #lock: Hold;
  #lockIds: readonly string[] | undefined;
  #locks: readonly Hold[] | undefined;
  #releasing: Promise<void> | undefined;

  constructor(lock: Hold) {
    this.#lock = lock;
  }

  /** The one lock. */
  get lock(): Hold {
    return this.#lock;
  }

  /** Made when first read: an acquire + release never reads them. */
  get lockIds(): readonly string[] {
    return (this.#lockIds ??= Object.freeze([this.#lock.lockId]));
  }

  get locks(): readonly Hold[] {
    return (this.#locks ??= Object.freeze([this.#lock]));
  }

  get tokens(): ReadonlyMap<string, bigint> {
    return new Map([[this.#lock.lockId, this.#lock.token]]);
  }

  /** The lock's own signal (made when first read). */
  get signal(): AbortSignal {
    return this.#lock.signal;
  }

  get held(): boolean {
    return this.#releasing === undefined && this.#lock.held;
  }

  token(lockId: string): bigint {
    if (lockId !== this.#lock.lockId) throw new InvalidArgumentError('lockId', `'${lockId}' is not one of this MultiLock's ids`);
    return this.#lock.token;
  }

  async extend(ttlMs?: number): Promise<void> {
    await this.#lock.extend(ttlMs);
  }

  /** Release (idempotent: the same promise for every call). */
  release(): Promise<void> {
    return (this.#releasing ??= this.#lock.release());
  }

  [Symbol.asyncDispose](): Promise<void> {
    return this.release();
  }
}

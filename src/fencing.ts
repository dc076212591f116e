/**
 * The resource side of fencing (Chubby's CheckSequencer; docs/guarantees.md): a resource that
 * remembers the newest fencing token it has seen and rejects operations with older ones.
 *
 * It fences READS as well as writes. With write-only fencing a read-modify-write still
 * loses updates: A (token 33) reads, B (token 34) reads, A writes — accepted, 33 is the
 * newest *write* — then B writes over it from a stale read. Fencing the reads makes B's
 * read raise the bar to 34, so A's write is rejected.
 */
import { InvalidArgumentError, StaleTokenError } from './errors.js';

/** Options of {@link FencedResource}. */
export interface FencedResourceOptions {
  /** Fence reads too. `false` reproduces the write-only flaw, for demonstrations. @default true */
  readonly fenceReads?: boolean;
}

/** A value guarded by fencing tokens. Operations with a token older than the newest seen throw `StaleTokenError`. */
export class FencedResource<T> {
  #value: T;
  #newest = -1n;
  readonly #fenceReads: boolean;
  #rejected = 0;

  constructor(initial: T, options: FencedResourceOptions = {}) {
    this.#value = initial;
    this.#fenceReads = options.fenceReads ?? true;
  }

  /** The newest token seen so far (-1 before any). */
  get newestToken(): bigint {
    return this.#newest;
  }

  /** How many operations were rejected as stale. */
  get rejected(): number {
    return this.#rejected;
  }

  /** Check `token` and raise the bar to it. */
  check(token: bigint, operation = 'operation'): void {
    if (typeof token !== 'bigint') throw new InvalidArgumentError('token', 'a fencing token is a bigint');
    if (token < this.#newest) {
      this.#rejected += 1;
      throw new StaleTokenError(token, this.#newest, operation);
    }
    this.#newest = token;
  }

  /** Read the value under `token`. */
  read(token: bigint): T {
    if (this.#fenceReads) this.check(token, 'read');
    return this.#value;
  }

  /** Write the value under `token`. */
  write(token: bigint, value: T): void {
    this.check(token, 'write');
    this.#value = value;
  }

  /** Read-modify-write under one token. */
  update(token: bigint, fn: (value: T) => T): T {
    const next = fn(this.read(token));
    this.write(token, next);
    return next;
  }

  /** The current value without a token (for checkers and tests, not for clients). */
  peek(): T {
    return this.#value;
  }
}

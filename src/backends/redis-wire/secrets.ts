/** The random secrets a fair attempt stores in its queue entry (docs/backends/redis.md, "Waiting by notification"). */
import { randomBytes } from 'node:crypto';

/**
 * Random 96-bit secrets, cut from a pooled string: one `randomBytes` call per attempt cost
 * about 2 µs, a visible share of an uncontended fair lock.
 */
export class Secrets {
  /** 256 secrets of 12 random bytes, as base64url (16 characters each, no padding). */
  #pool = '';
  #at = 0;

  next(): string {
    if (this.#at >= this.#pool.length) {
      this.#pool = randomBytes(12 * 256).toString('base64url');
      this.#at = 0;
    }
    this.#at += 16;
    return this.#pool.slice(this.#at - 16, this.#at);
  }
}

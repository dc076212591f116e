/**
 * The first attempt of an acquisition at a lock this backend has not seen contended lately:
 * ACQUIRE_SOLO, ACQUIRE's fast path alone on 4 keys and 7 arguments, a bare token back. The
 * full ACQUIRE (7 keys, 14 arguments, an array back) cost an uncontended cycle several µs of
 * the client's time to build, send and parse (docs/backends/redis.md, "Lua scripts";
 * docs/benchmarks.md, "Redis: the uncontended floor"). A lock seen contended goes to the full
 * ACQUIRE at once, so a contended lock pays no second round trip but the first time.
 */
import { BoundedMap, type AcquireRequest, type AcquireResult } from '../kit.js';
import type { RedisCommands } from '../redis-wire/commands.js';
import type { LockKeyCache } from '../redis-wire/keys.js';
import { ACQUIRE_SOLO } from './scripts.js';

/**
 * A lock this backend saw contended (held, queued, re-entered, a waiter woken by its release)
 * within this long takes the full ACQUIRE at once.
 */
export const CONTENDED_MEMORY_MS = 2_000;

/** When this backend last saw each recently used lock contended (bounded). */
export class Contention {
  readonly #at = new BoundedMap<string, number>(1_024);

  /** Whether `lockId` was seen contended within {@link CONTENDED_MEMORY_MS}. */
  seen(lockId: string): boolean {
    const at = this.#at.get(lockId);
    if (at === undefined) return false;
    if (performance.now() - at < CONTENDED_MEMORY_MS) return true;
    this.#at.delete(lockId);
    return false;
  }

  /** `lockId` is contended now. */
  saw(lockId: string): void {
    this.#at.set(lockId, performance.now());
  }
}

/** Whether an attempt may go to ACQUIRE_SOLO: a first attempt, not a semaphore, at a lock not seen contended. */
export function soloFits(req: AcquireRequest<unknown>, contention: Contention): boolean {
  return req.ticket === undefined && req.kind !== 'semaphore' && !contention.seen(req.lockId);
}

/**
 * Send ACQUIRE_SOLO: resolves to the new hold's token, or 0 when the full ACQUIRE must decide.
 * `keys`: the backend's, which also keeps the holder's record of each identity built.
 */
export function soloAttempt(
  commands: RedisCommands,
  keys: LockKeyCache,
  req: AcquireRequest<unknown>,
  kindLetter: string,
  stamp: string,
  inboxPrefix: string,
): Promise<unknown> {
  const [h, x, t, q] = keys.of(req.lockId);
  const who = keys.who(req.lockId, req.identity);
  return commands.eval(ACQUIRE_SOLO, [h, q, x, t], [kindLetter, req.ownerId, req.ttlMs, req.lockDelayMs, stamp, who, inboxPrefix]);
}

/** The grant of an attempt's reply (`code` 2: re-entered), whose hold is the hash field `field`. */
export function granted<T>(
  req: AcquireRequest<T>,
  code: number,
  token: unknown,
  field: unknown,
): AcquireResult<T, { readonly field: string }> {
  return {
    granted: true,
    grant: {
      lockId: req.lockId,
      kind: req.kind,
      ownerId: req.ownerId,
      token: BigInt(String(token)),
      ttlMs: req.ttlMs,
      reentered: code === 2,
      data: { field: String(field) },
    },
  };
}

/**
 * `locker.forceRelease()`: break a lock on purpose and on the record. The backend ends every
 * hold and moves the token counter on; the core validates the reason, emits `broken` and
 * logs who broke it and why. docs/observability.md, "Breaking a lock".
 */
import type { Backend } from '../backend.js';
import { InvalidArgumentError, UnsupportedError } from '../errors.js';
import { unavailable } from '../util/cause.js';
import { formatIdentity, type Identity } from './identity.js';
import { observeLog as log } from './log.js';

/** Options of `locker.forceRelease()`. */
export interface ForceReleaseOptions {
  /** Why the lock is broken (kept in the `broken` event and the log): 1..1024 bytes. */
  readonly reason: string;
}

/** Upper bound on a break's reason. */
export const MAX_REASON_BYTES = 1024;

/** The reason of a break, validated (InvalidArgumentError before anything is sent). */
export function checkReason(options: unknown): string {
  const reason = typeof options === 'object' && options !== null ? (options as { reason?: unknown }).reason : undefined;
  if (typeof reason !== 'string' || reason.trim() === '' || Buffer.byteLength(reason) > MAX_REASON_BYTES) {
    throw new InvalidArgumentError('reason', `forceRelease needs { reason }: a non-empty string of at most ${MAX_REASON_BYTES} bytes`);
  }
  return reason;
}

/**
 * Break `lockId` on `backend` and log who broke it and why; resolves how many holds ended.
 * Failures are wrapped (`BackendUnavailableError`); the locker reports them and emits `broken`.
 */
export async function breakLock(backend: Backend, lockId: string, reason: string, by: Identity): Promise<number> {
  if (!backend.forceRelease) throw new UnsupportedError(backend.name, 'breaking locks (forceRelease)');
  let holds: number;
  try {
    holds = await backend.forceRelease(lockId);
  } catch (err) {
    throw unavailable(backend.name, `breaking lock '${lockId}'`, err);
  }
  // The identity is shown as `name pid@host` only: never its meta.
  if (log.enabled) log('%s: broken by %s (%d holds ended): %s', lockId, formatIdentity(by), holds, reason);
  return holds;
}

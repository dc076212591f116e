/**
 * One log line per round trip of an engine, on its `locksmith:backend:<name>` namespace
 * (docs/observability.md, "Logging"): what was asked, of which lock, how it came out and how
 * long it took. When the namespace is off a call costs one `enabled` read: no clock, no
 * closure, no string. Failures are logged by their stable code only, because a driver's
 * message may quote an address or a statement.
 */
import type { AcquireResult, Backend, Extension, Grant, LockKind } from '../backend.js';
import { LocksmithError, LockLostError } from '../errors.js';
import { causeCode } from '../util/cause.js';
import { ms, type Log } from '../observe/log.js';

/** A failure as a log line may show it: the locksmith code (and loss reason) or the driver's code. */
export function failureCode(err: unknown): string {
  if (err instanceof LockLostError) return `${err.code} ${err.reason}`;
  if (err instanceof LocksmithError) return err.code;
  if (typeof err === 'object' && err !== null && (err as { name?: unknown }).name === 'AbortError') return 'aborted';
  return causeCode(err) ?? (err instanceof Error ? err.name : 'unknown');
}

/**
 * Run `run`; when `log` is on, log `<lockId>: <op> <outcome(value)> in <ms>` (or `failed in
 * <ms> (<code>)`). Returns `run()`'s own promise when off.
 */
export function timed<T>(log: Log, op: string, lockId: string, run: () => Promise<T>, outcome: (value: T) => string): Promise<T> {
  if (!log.enabled) return run();
  const started = performance.now();
  return run().then(
    (value) => {
      log('%s: %s %s in %s', lockId, op, outcome(value), ms(performance.now() - started));
      return value;
    },
    (error: unknown) => {
      log('%s: %s failed in %s (%s)', lockId, op, ms(performance.now() - started), failureCode(error));
      throw error;
    },
  );
}

const attemptOutcome = (r: AcquireResult): string =>
  r.granted
    ? `granted token ${r.grant.token}${r.grant.reentered ? ' (re-entered)' : ''}${r.grant.confirmation ? ' (on hand-off, confirming)' : ''}`
    : `contended${r.contended.ticket === undefined ? '' : ' (queued)'}`;

/** Log one acquisition attempt: kind, granted with its token, or contended (queued or not). */
export function loggedAttempt<R extends AcquireResult>(
  log: Log,
  req: { lockId: string; kind: LockKind },
  run: () => Promise<R>,
): Promise<R> {
  if (!log.enabled) return run();
  return timed(log, `attempt ${req.kind}`, req.lockId, run, attemptOutcome);
}

/** Log one renewal: the lease vouched for, or the failure (a loss says so with its reason). */
export function loggedExtend(log: Log, grant: Grant, run: () => Promise<Extension>): Promise<Extension> {
  if (!log.enabled) return run();
  return timed(log, `renew token ${grant.token}`, grant.lockId, run, (e) => `for ${e.ttlMs}ms`);
}

/** Log one release: released, or not held any more (expired or taken over). */
export function loggedRelease(log: Log, grant: Grant, run: () => Promise<boolean>): Promise<boolean> {
  if (!log.enabled) return run();
  return timed(log, `release token ${grant.token}`, grant.lockId, run, (done) => (done ? 'released' : 'not held any more'));
}

/**
 * How a waiter was woken: by the engine (`notification`: pub/sub, watch, NOTIFY, an
 * in-process wake-up) or by its fallback `poll`.
 */
export type WakeCause = 'notification' | 'poll';

/** Log a waiter's wake-up and how long it slept (`since` from `wakeClock(log)`). */
export function logWake(log: Log, lockId: string, cause: WakeCause, since: number): void {
  if (log.enabled) log('%s: woken by %s after %s', lockId, cause, ms(performance.now() - since));
}

/** The clock to pass to {@link logWake} later: 0 (not read) when the namespace is off. */
export const wakeClock = (log: Log): number => (log.enabled ? performance.now() : 0);

/**
 * Log every attempt, renewal and release of `backend` on `log`, by wrapping its methods on
 * the instance (one line in an engine's constructor, `logRoundTrips(this, log)`). Off, a
 * call costs the `enabled` read.
 */
export function logRoundTrips<T, D>(backend: Backend<T, D>, log: Log): void {
  const tryAcquire = backend.tryAcquire.bind(backend);
  const extend = backend.extend.bind(backend);
  const release = backend.release.bind(backend);
  // Off, no closure per call: the check comes before the wrapper (an uncontended cycle's cost, docs/benchmarks.md).
  backend.tryAcquire = (req) => (log.enabled ? loggedAttempt(log, req, () => tryAcquire(req)) : tryAcquire(req));
  backend.extend = (grant, ttlMs) => (log.enabled ? loggedExtend(log, grant, () => extend(grant, ttlMs)) : extend(grant, ttlMs));
  backend.release = (grant) => (log.enabled ? loggedRelease(log, grant, () => release(grant)) : release(grant));
}

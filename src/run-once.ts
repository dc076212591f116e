/**
 * The scheduled-job lock (ShedLock's `@SchedulerLock`), written against the public Locker
 * API: see docs/recipes/scheduled-jobs.md.
 *
 * Which clock decides: the BACKEND's lease, never a client's wall clock. The hold is taken
 * with a ttl of exactly `atLeastForMs`, so a job that ends sooner is not deleted: it is let
 * go locally and the backend expires it `atLeastForMs` after its grant, on its own clock,
 * even if this process exits at once. While the job runs past that, the lease is renewed by
 * hand, each time only up to what is left of `atMostForMs`, then no more: the lease runs
 * out and the job's signal aborts before it does. A job that ends after a renewal but before
 * the minimum waits out the rest on this process's MONOTONIC clock (a duration, not a time
 * of day), counted from the grant's arrival, which is after the backend started the lease:
 * the error can only make the hold longer. docs/recipes/scheduled-jobs.md says the same
 * for users.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { InvalidArgumentError, LockLostError } from './errors.js';
import type { Lock } from './lock.js';
import type { LockerOptions, TryLockOptions } from './options.js';
import { now } from './lease.js';
import { minTtlMs, validateDuration, validateSignal } from './options.js';

/** The part of a Locker that runOnce needs (structural, so that locker.ts can import this module). */
export interface RunOnceLocker {
  readonly options: LockerOptions;
  tryLock(lockId: string, options?: TryLockOptions): Promise<Lock | null>;
}

/** Options of `Locker.runOnce`. */
export interface RunOnceOptions {
  /**
   * The hold ends at the latest this long after the backend granted it (plus, at most, the
   * time the last renewal took to reach the backend): renewals stop there, the lease runs
   * out and the job's `lock.signal` aborts just before. Where the backend expires holds by
   * itself, a crashed instance's lock frees itself by then too. Must be > 0 and ≥ `atLeastForMs`.
   */
  readonly atMostForMs: number;
  /**
   * The hold lasts at least this long after the backend granted it, even when the job
   * returns (or throws) at once: a fleet whose clocks disagree cannot run the job twice per
   * schedule tick. Measured by the backend's lease, never by a wall clock. @default 0
   */
  readonly atLeastForMs?: number;
  /** Abort the one acquisition attempt (the call rejects with `signal.reason`). */
  readonly signal?: AbortSignal;
}

/** What `Locker.runOnce` resolves: the job ran here (with its value), or another instance held the lock. */
export type RunOnceResult<T> = { readonly status: 'ran'; readonly value: T; readonly token: bigint } | { readonly status: 'skipped' };

/** How the locker lets a hold run out on the backend: no release on `close()`, no renewal. */
export type KeepOnBackend = (lock: Lock) => void;

const KNOWN = new Set(['atMostForMs', 'atLeastForMs', 'signal']);

/** Validated options: typed errors for what ShedLock users and JavaScript callers get wrong. */
export function checkRunOnceOptions(options: unknown): { atMost: number; atLeast: number; signal: AbortSignal | undefined } {
  if (typeof options !== 'object' || options === null) {
    throw new InvalidArgumentError('options', 'runOnce needs { atMostForMs } (and optionally atLeastForMs)');
  }
  for (const key of Object.keys(options)) {
    if (!KNOWN.has(key)) {
      throw new InvalidArgumentError(key, `unknown runOnce option '${key}' (known: atMostForMs, atLeastForMs, signal)`);
    }
  }
  const o = options as Partial<RunOnceOptions>;
  const atMost = validateDuration(o.atMostForMs, 'atMostForMs');
  const atLeast = o.atLeastForMs === undefined ? 0 : validateDuration(o.atLeastForMs, 'atLeastForMs', true);
  if (atLeast > atMost) {
    throw new InvalidArgumentError('atLeastForMs', `atLeastForMs (${atLeast}) must not exceed atMostForMs (${atMost})`);
  }
  return { atMost, atLeast, signal: validateSignal(o.signal) };
}

/**
 * Run `fn` on the one instance that gets `name`; every other instance resolves
 * `{ status: 'skipped' }` at once (no waiting). See {@link RunOnceOptions} for the bounds.
 */
export async function runOnce<T>(
  locker: RunOnceLocker,
  name: string,
  fn: (lock: Lock) => Promise<T> | T,
  options: RunOnceOptions,
  keep: KeepOnBackend,
): Promise<RunOnceResult<T>> {
  if (typeof fn !== 'function') throw new InvalidArgumentError('fn', 'runOnce needs a function');
  const { atMost, atLeast, signal } = checkRunOnceOptions(options);
  const { ttlMs, driftFactor } = locker.options;
  // The first lease is exactly the minimum: a job that ends before it leaves the backend to end it.
  const first = atLeast > 0 ? Math.min(atMost, Math.max(atLeast, minTtlMs(driftFactor))) : Math.min(ttlMs, atMost);
  const sentAt = now();
  const lock = await locker.tryLock(name, { ttlMs: first, autoExtend: false, reentrant: false, waitMs: 0, ...(signal ? { signal } : {}) });
  if (lock === null) return { status: 'skipped' };
  // After the grant arrived: the backend's lease began before this instant.
  const grantedAt = now();
  const renewals = renewUpTo(lock, sentAt, atMost, Math.max(first, Math.min(ttlMs, atMost)), minTtlMs(driftFactor));
  let outcome: { ok: true; value: T } | { ok: false; error: unknown };
  try {
    outcome = { ok: true, value: await fn(lock) };
  } catch (error) {
    outcome = { ok: false, error };
  }
  const lost: unknown = lock.signal.aborted ? lock.signal.reason : undefined;
  await finish(lock, { atLeast, grantedAt, driftFactor, renewals, keep });
  if (!outcome.ok) throw outcome.error;
  if (lost instanceof LockLostError) throw lost.withResult(outcome.value);
  return { status: 'ran', value: outcome.value, token: lock.token };
}

interface Renewals {
  /** True once a renewal was sent (the backend may have applied it even if no answer came). */
  readonly sent: boolean;
  stop(): void;
}

/**
 * Renew while `fn` runs, each time by at most what is left of `atMostForMs` counted from
 * the acquisition's SEND (before the backend's grant), so the lease asked for never reaches
 * past the ceiling by more than the renewal's own trip to the backend; below `floor` ms
 * left, renewing stops and the lease runs out (the signal aborts first).
 */
function renewUpTo(lock: Lock, sentAt: number, atMost: number, step: number, floor: number): Renewals {
  let timer: NodeJS.Timeout | undefined;
  let stopped = false;
  const state = { sent: false, stop: (): void => {} };
  const arm = (delayMs: number): void => {
    if (stopped) return;
    timer = setTimeout(() => void tick(), Math.max(1, delayMs));
    timer.unref();
  };
  const tick = async (): Promise<void> => {
    const ttl = Math.floor(Math.min(step, atMost - (now() - sentAt)));
    if (stopped || ttl < floor || !lock.held) return;
    state.sent = true;
    try {
      await lock.extend(ttl);
      arm(ttl / 3);
    } catch {
      // Lost: the signal has aborted and nothing is left to renew. Unreachable: retry soon.
      if (lock.held) arm(Math.min(250, ttl / 10));
    }
  };
  state.stop = () => {
    stopped = true;
    clearTimeout(timer);
  };
  arm(lock.remainingMs() / 3);
  return state;
}

interface Ending {
  readonly atLeast: number;
  readonly grantedAt: number;
  readonly driftFactor: number;
  readonly renewals: Renewals;
  readonly keep: KeepOnBackend;
}

/**
 * End the hold. Past the minimum: delete it. Before it, unrenewed: the first lease was
 * exactly the minimum, so let the backend expire it on its own clock (nothing deleted, the
 * process may exit at once). Before it, renewed (the lease now reaches further): wait out
 * what is left of the minimum on this process's monotonic clock, counted from the grant's
 * ARRIVAL, which can only make the hold longer, then delete it. Never throws: a failed
 * release leaves the hold to run out by itself.
 */
async function finish(lock: Lock, e: Ending): Promise<void> {
  const left = e.atLeast - (now() - e.grantedAt);
  if (lock.held && left > 0 && !e.renewals.sent) {
    e.renewals.stop();
    e.keep(lock);
    return;
  }
  // The allowance covers a backend clock that runs faster than ours over `left` ms.
  if (lock.held && left > 0) await sleep(Math.ceil(left * (1 + e.driftFactor)) + 1);
  e.renewals.stop();
  await lock.release().catch(() => undefined);
}

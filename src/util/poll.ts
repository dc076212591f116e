/**
 * The waiter's poll: a bounded, jittered sleep that a local wake-up ends early. A backend
 * whose waiters learn of a release only in this process (a commit of the same backend, a
 * local hand-off) sleeps this way: the wake-up makes the hand-off quick, the timeout bounds
 * what a missed one costs, and the jitter keeps waiters of one lock from polling in step.
 */
import { MAX_TIMER_MS } from './time.js';

/**
 * `ms` spread uniformly over ×(1 − `spread`) … ×(1 + `spread`), and at least 1 ms: `spread`
 * 0.25 is ±25 %.
 */
export function jitter(ms: number, spread: number): number {
  return Math.max(1, ms * (1 - spread + 2 * spread * Math.random()));
}

/** Options of {@link pollSleep}. */
export interface PollSleepOptions {
  /** Spread the sleep by this fraction (see {@link jitter}); 0 (the default): exactly `ms`. */
  readonly jitter?: number;
  /**
   * Called once, synchronously, as the sleep ends (woken, elapsed or aborted): a registry of
   * sleepers drops it here, so that a wake-up arriving after this one finds it gone.
   */
  readonly onSettled?: () => void;
}

/** One sleep of {@link pollSleep}. */
export interface PollSleep {
  /** True when woken, false when the time ran out; rejects with `signal.reason` when it aborts. */
  readonly woken: Promise<boolean>;
  /** End the sleep now (nothing once it ended). */
  wake(): void;
}

/**
 * Sleep about `ms` unless {@link PollSleep.wake} comes first; throws `signal.reason` at once
 * when `signal` has aborted already (so `onSettled` never runs before this returns). The timer
 * is ref'd: a caller awaits the lock it polls for, and that keeps the process alive
 * (docs/architecture.md).
 */
export function pollSleep(ms: number, signal: AbortSignal, options: PollSleepOptions = {}): PollSleep {
  signal.throwIfAborted();
  let settle: (how: boolean | { error: unknown }) => void = () => undefined;
  const woken = new Promise<boolean>((resolve, reject) => {
    const wait = options.jitter ? jitter(ms, options.jitter) : Math.max(1, ms);
    const timer = setTimeout(() => settle(false), Math.min(MAX_TIMER_MS, Math.round(wait)));
    const onAbort = (): void => settle({ error: signal.reason });
    settle = (how) => {
      settle = () => undefined;
      clearTimeout(timer);
      signal.removeEventListener('abort', onAbort);
      options.onSettled?.();
      if (typeof how === 'boolean') resolve(how);
      else reject(how.error);
    };
    signal.addEventListener('abort', onAbort, { once: true });
  });
  return { woken, wake: () => settle(true) };
}

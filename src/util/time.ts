/**
 * Waiting with an owner: an abortable sleep and the one deadline race that every wait of the
 * core and of the backends goes through (timers unref'd when nobody awaits them, always
 * cleared, listeners removed).
 */
import { setTimeout as delay } from 'node:timers/promises';

/** setTimeout's limit; a longer delay would fire at once. */
export const MAX_TIMER_MS = 2_147_483_647;

/**
 * Sleep `ms`, or reject with `signal.reason` (unchanged) as soon as it aborts. `ref: false`
 * for background waits that must not keep the process alive; a wait a caller awaits stays
 * ref'd (the default).
 */
export async function sleep(ms: number, signal?: AbortSignal, { ref = true }: { ref?: boolean } = {}): Promise<void> {
  signal?.throwIfAborted();
  try {
    await delay(Math.min(MAX_TIMER_MS, Math.max(0, ms)), undefined, { ref, ...(signal ? { signal } : {}) });
  } catch (err) {
    // timers/promises rejects with its own AbortError; callers expect the signal's reason.
    if (signal?.aborted) throw signal.reason;
    throw err;
  }
}

/** Options of {@link withDeadline}. */
export interface DeadlineOptions<T> {
  /** Give up after this long (undefined: no time limit). */
  readonly timeoutMs?: number;
  /** The error a timeout rejects with. */
  readonly onTimeout?: () => Error;
  /** Give up when this aborts (rejects with its reason, unchanged). */
  readonly signal?: AbortSignal;
  /**
   * Called with the value if `work` settles after we gave up, so that a late connection
   * or a late grant is closed or handed back instead of leaking.
   */
  readonly onLate?: (value: T) => void;
}

/**
 * The one deadline race: `work`, or a timeout, or an abort, whichever comes first. The
 * timer is unref'd and cleared, the listener removed, and a late rejection of `work` is
 * never left unhandled.
 */
export function withDeadline<T>(work: Promise<T>, options: DeadlineOptions<T>): Promise<T> {
  const { timeoutMs, signal, onLate } = options;
  let gaveUp = false;
  work.then(
    (v) => {
      if (gaveUp) onLate?.(v);
    },
    () => undefined,
  );
  if (signal?.aborted) {
    gaveUp = true;
    return Promise.reject(signal.reason);
  }
  if (timeoutMs === undefined && !signal) return work;
  return new Promise<T>((resolve, reject) => {
    let timer: NodeJS.Timeout | undefined;
    const finish = (): void => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
    };
    const giveUp = (err: unknown): void => {
      gaveUp = true;
      finish();
      reject(err);
    };
    const onAbort = (): void => giveUp(signal?.reason);
    if (timeoutMs !== undefined) {
      timer = setTimeout(
        () => giveUp(options.onTimeout ? options.onTimeout() : new Error(`timed out after ${timeoutMs} ms`)),
        Math.min(MAX_TIMER_MS, Math.max(0, timeoutMs)),
      );
      timer.unref();
    }
    signal?.addEventListener('abort', onAbort, { once: true });
    work.then(
      (v) => {
        if (gaveUp) return;
        finish();
        resolve(v);
      },
      (err: unknown) => {
        if (gaveUp) return;
        finish();
        reject(err);
      },
    );
  });
}

/** Resolve or reject with `work`, or reject with `signal.reason` as soon as it aborts. */
export function raceAbort<T>(work: Promise<T>, signal: AbortSignal): Promise<T> {
  return withDeadline(work, { signal });
}

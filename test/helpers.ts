/** Small helpers shared by the test files. */
import type { Lock } from '../src/index.js';

/**
 * Resolve with `lock.signal.reason` once the lock's signal aborts. Lease timers are
 * unref'd by design, so while it waits this holds a ref'd interval that keeps the test
 * process alive.
 */
export function lossOf(lock: Lock): Promise<unknown> {
  return new Promise((resolve) => {
    if (lock.signal.aborted) {
      resolve(lock.signal.reason);
      return;
    }
    const keepAlive = setInterval(() => undefined, 1_000);
    lock.signal.addEventListener(
      'abort',
      () => {
        clearInterval(keepAlive);
        resolve(lock.signal.reason);
      },
      { once: true },
    );
  });
}

/**
 * What `election.observe()` waits on with ZooKeeper: a watch on the lock's queue instead of
 * a poll. Leadership is the first node of the queue, so any change of leader is a change of
 * the queue's children (a child watch), and a lock without a node yet is watched for its
 * creation (an exists watch). Watches are reliable within a session; a reconnect or the
 * fallback poll makes the observer look again anyway. See docs/backends/zookeeper.md,
 * "Elections".
 */
import type { ZkSession } from './session.js';

/**
 * Resolve once the children of `base` may have changed (or `base` was created), after a
 * reconnect, or after `maxMs` at the latest; reject with `signal.reason` when it aborts.
 * The watch is set when this returns a promise's first tick: a caller reads the state after
 * calling it, so no change between the read and the watch is missed (requests of one
 * session are answered in order).
 */
export function watchQueue(s: ZkSession, base: string, maxMs: number, signal: AbortSignal): Promise<void> {
  if (signal.aborted) return Promise.reject(signal.reason);
  return new Promise<void>((resolve, reject) => {
    let done = false;
    let off: (() => void) | undefined;
    const finish = (err?: unknown): void => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      signal.removeEventListener('abort', onAbort);
      unsubscribe();
      off?.();
      if (err === undefined) resolve();
      else reject(err);
    };
    const onAbort = (): void => finish(signal.reason);
    // Ref'd like any wait a caller awaits; the jitter spreads many observers' polls.
    const timer = setTimeout(() => finish(), maxMs * (0.75 + Math.random() / 2));
    const unsubscribe = s.onState((state) => {
      if (state !== 'disconnected' && state !== 'connecting') finish();
    });
    signal.addEventListener('abort', onAbort, { once: true });
    const onEvent = (): void => finish();
    s.watchChildrenOrCreation(base, onEvent).then(
      (w) => {
        off = w.off;
        if (done) off();
      },
      () => finish(),
    );
  });
}

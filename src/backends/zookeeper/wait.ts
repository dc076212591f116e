/**
 * Waiting for a change worth another attempt: a ZooKeeper watch on the one node (or, for
 * the holder of the gate, the one folder) that blocks us, a re-check after every reconnect,
 * and a slow fallback poll. Watches are reliable within a session (the client re-registers
 * them on reconnect), so the poll only bounds the cost of a lost one; a poll per waiter
 * every few seconds was most of a thousand idle waiters' load on the ensemble. See
 * docs/backends/zookeeper.md, "The algorithm".
 */
import { BackendUnavailableError, sleep } from '../kit.js';
import { EVENT, isConnectionLoss } from './driver.js';
import type { ArmedWatch, WatchSpec, ZkTicket } from './recipe.js';
import type { ZkSession } from './session.js';

/** Watches are reliable within a session; this poll only bounds the cost of a lost one. */
const FALLBACK_POLL_MS = 30_000;
/** Without a watch (nothing queued) look again after this long. */
const UNQUEUED_RETRY_MS = 300;

/** What waiting needs from the backend. */
export interface WaitHooks {
  /** A watch notification from the ensemble arrived (the herd-effect counter). */
  notified(): void;
}

/** Resolve when another attempt is worth making; reject with `signal.reason` when it aborts. */
export function waitForChange(t: ZkTicket | undefined, signal: AbortSignal, hooks: WaitHooks): Promise<void> {
  if (signal.aborted) return Promise.reject(signal.reason);
  const watch = t?.watch;
  if (!t || !watch) return sleep(UNQUEUED_RETRY_MS, signal);
  const s = t.session;
  if (!s.alive) return Promise.reject(sessionEnded(t, s.state));
  return new Promise<void>((resolve, reject) => {
    let done = false;
    let timer: NodeJS.Timeout | undefined;
    const finish = (err?: unknown): void => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      signal.removeEventListener('abort', onAbort);
      unsubscribe();
      armed.wake.delete(wake);
      if (err === undefined) resolve();
      else reject(err);
    };
    const wake = (): void => finish();
    const onAbort = (): void => finish(signal.reason);
    const unsubscribe = s.onState((state) => {
      if (state === 'expired' || state === 'closed') finish(sessionEnded(t, state));
      // Back after a disconnect: the client re-registered our watch, but look again anyway.
      else if (state === 'connected') wake();
    });
    const poll = (): void => {
      if (done) return;
      fallbackCheck(s, watch).then(
        (changed) => (changed ? wake() : schedule()),
        () => wake(),
      );
    };
    // Ref'd on purpose: a caller awaiting a lock keeps the process alive. Jitter spreads the
    // polls of many waiters.
    const schedule = (): void => {
      if (!done) timer = setTimeout(poll, FALLBACK_POLL_MS * (0.75 + Math.random() / 2));
    };
    signal.addEventListener('abort', onAbort, { once: true });
    schedule();
    const armed = arm(t, watch, hooks, finish);
    armed.wake.add(wake);
    if (armed.fired) wake();
  });
}

/**
 * The fallback poll: a cheap `exists` on the node ahead (not a full children listing, which
 * would cost O(waiters) per waiter); a folder watch simply tries again.
 */
async function fallbackCheck(s: ZkSession, watch: WatchSpec): Promise<boolean> {
  if (watch.type !== 'node' || !s.alive) return true;
  return (await s.exists(watch.path)) === null;
}

/** The ticket's watch on `watch`: the one already set and not fired, or a new one. */
function arm(t: ZkTicket, watch: WatchSpec, hooks: WaitHooks, fail: (err: unknown) => void): ArmedWatch {
  const key = `${watch.type}:${watch.path}`;
  if (t.armed && t.armed.key === key && !t.armed.fired) return t.armed;
  const armed: ArmedWatch = { key, fired: false, gone: false, wake: new Set() };
  t.armed = armed;
  const fire = (): void => {
    if (armed.fired) return;
    armed.fired = true;
    for (const w of [...armed.wake]) w();
  };
  const onEvent = (type: number): void => {
    if (armed.fired) return;
    // SESSION_ENDED is the session dying, not a notification from the ensemble.
    if (type !== EVENT.SESSION_ENDED) hooks.notified();
    if (type === EVENT.DELETED) armed.gone = true;
    fire();
  };
  register(t.session, watch, onEvent).then(
    (alreadyChanged) => {
      // The node ahead left before the watch was set (Curator's NoNode case): check again.
      if (alreadyChanged && watch.type === 'node') armed.gone = true;
      if (alreadyChanged) fire();
    },
    (err: unknown) => {
      // A lost connection is not the end: the next attempt checks again and sets the watch
      // again. Anything else surfaces.
      if (isConnectionLoss(err)) fire();
      else fail(new BackendUnavailableError('zookeeper', 'zookeeper: cannot set a watch', { cause: err, context: { lockId: t.lockId } }));
    },
  );
  return armed;
}

/** Set the watch; resolves true when the awaited change has already happened. */
async function register(s: ZkSession, watch: WatchSpec, onEvent: (type: number) => void): Promise<boolean> {
  if (watch.type === 'node') return (await s.watchNode(watch.path, onEvent)) === null;
  const children = await s.watchChildren(watch.path, onEvent);
  return children === null || watch.ready(children);
}

function sessionEnded(t: ZkTicket, state: string): BackendUnavailableError {
  return new BackendUnavailableError('zookeeper', `the ZooKeeper session ${state === 'expired' ? 'expired' : 'ended'} while waiting`, {
    context: { lockId: t.lockId },
  });
}

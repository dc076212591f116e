/**
 * Waiting for a change (docs/backends/etcd.md, "The recipe"): a watch on the one key the
 * waiter is behind (or, for a semaphore waiting on permits, on the lock's keys), started
 * at the revision right after the listing it decided from, so a deletion between that
 * listing and the watch is still delivered. A bounded fallback poll covers a watch stream
 * that is down; the end of our lease wakes the waiter too (its key is gone: it re-queues).
 */
import { sleep } from '../kit.js';
import type { EtcdClient } from './client.js';
import type { EtcdTicket } from './recipe.js';

/** Longest wait without a notification before the next attempt. */
export const FALLBACK_POLL_MS = 2_000;

/** Resolve when the ticket's watch fires, its lease ends, or the fallback poll is due. */
export async function waitForChange(
  client: EtcdClient,
  ticket: EtcdTicket | undefined,
  signal: AbortSignal,
  notified: () => void,
): Promise<void> {
  const spec = ticket?.watch;
  if (!ticket || !spec || !ticket.session.alive) {
    await sleep(ticket ? 0 : FALLBACK_POLL_MS, signal);
    return;
  }
  signal.throwIfAborted();
  const builder = client.watch().startRevision((ticket.seenAt + 1n).toString());
  const watcher = (spec.type === 'key' ? builder.key(spec.key) : builder.prefix(spec.prefix)).only('delete').watcher();
  watcher.on('error', () => undefined);
  // A plain promise, not an aborted sleep: the hand-off path creates no AbortError (a stack
  // capture each) between the watch event and the next attempt.
  let wake!: () => void;
  const woken = new Promise<void>((resolve) => (wake = resolve));
  let done = false;
  const stop = (): void => {
    done = true;
    wake();
  };
  // A watch the package re-attaches after its stream dropped may skip events: no proof from it.
  watcher.on('disconnected', () => {
    if (spec.type === 'last' && !done) stop();
  });
  signal.addEventListener('abort', stop, { once: true });
  const unsubscribe = ticket.session.onEnd(stop);
  const timer = setTimeout(stop, FALLBACK_POLL_MS);
  watcher.on('delete', (kv) => {
    if (done) return;
    if (spec.type === 'last') {
      // One watch, so its events come in revision order: the last key before ours deleted
      // while ours stood makes us the holder at that revision; a younger waiter leaving is
      // nothing to us; our own key gone first sends the next attempt to re-list.
      const key = kv.key.toString('utf8');
      if (key === spec.key) ticket.heldAt = BigInt(kv.mod_revision);
      else if (key !== spec.own) return;
    }
    notified();
    stop();
  });
  try {
    await woken;
    signal.throwIfAborted();
  } finally {
    done = true;
    clearTimeout(timer);
    signal.removeEventListener('abort', stop);
    unsubscribe();
    // The cancel request is written after the attempt this wake-up starts, not before it.
    setImmediate(() => void watcher.cancel().catch(() => undefined));
  }
}

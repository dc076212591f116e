/**
 * `changes()` of the PostgreSQL backend (only with `?watch=notify`): every transaction of such
 * a client that writes a lock's holders or queue sends `pg_notify(<table>_watch, lockId)`
 * while somebody watches, delivered on commit; each watch LISTENs on its own pooled
 * connection, reconnects after a loss and then says so with `null` (docs/backends/postgres.md,
 * "Watching").
 */
import type pg from 'pg';
import { PgListener } from './listener.js';

/**
 * The advisory lock (two-key space) every watch holds shared while it listens. A notifying
 * transaction first tries it exclusively, to the end of the transaction: taken means nobody
 * watches, and it skips the NOTIFY. A watch that starts meanwhile waits for that commit before
 * it yields `null`, so the core's listing afterwards sees the write.
 */
const WATCHED_KEY = `hashtext('locksmith-watch'), hashtext($1)`;

/**
 * The lock ids under `prefix` as their changes commit: `null` first once LISTEN is in place
 * (and again after every reconnect), then ids, until `signal` aborts.
 */
export async function* pgChanges(pool: pg.Pool, channel: string, prefix: string, signal: AbortSignal): AsyncGenerator<string | null> {
  if (signal.aborted) return;
  const pending: (string | null)[] = [];
  let wake: (() => void) | undefined;
  const push = (item: string | null): void => {
    pending.push(item);
    wake?.();
  };
  const listener = new PgListener(
    pool,
    channel,
    (lockId) => {
      if (lockId !== undefined && lockId.startsWith(prefix)) push(lockId);
    },
    () => {
      // Ids heard before the advisory lock was in place are covered by the listing `null` asks for.
      pending.length = 0;
      push(null);
    },
    { text: `SELECT pg_advisory_lock_shared(${WATCHED_KEY})`, values: [channel] },
  );
  let stopped: Promise<void> | undefined;
  // Dropped at the abort itself, even while the consumer is not asking for the next id.
  const stop = (): Promise<void> => (stopped ??= listener.close());
  const onAbort = (): void => {
    void stop();
    wake?.();
  };
  signal.addEventListener('abort', onAbort, { once: true });
  listener.keepTrying();
  try {
    for (;;) {
      if (signal.aborted) return;
      const item = pending.shift();
      if (item !== undefined) {
        yield item;
        continue;
      }
      await new Promise<void>((resolve) => (wake = resolve));
      wake = undefined;
    }
  } finally {
    signal.removeEventListener('abort', onAbort);
    await stop();
  }
}

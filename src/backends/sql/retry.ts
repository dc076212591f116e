/**
 * Running a statement batch again on a fresh connection when the pool handed out one the
 * server had already dropped (a restart, a kill) and whose goodbye the driver had not read
 * yet: only when that cannot repeat a COMMIT (docs/backends/postgres.md, "Failure modes").
 */
import { failureCode, type Log } from '../kit.js';
import type { SqlEngine, SqlTx } from './types.js';

/** Attempts of a transaction that met connections the server had dropped. */
const LOST_CONNECTION_TRIES = 5;

/** What a retry needs of its backend. */
export interface RetryContext {
  readonly engine: SqlEngine;
  /** The backend was closed: nothing more is tried. */
  readonly closed: () => boolean;
  readonly log: Log;
}

/** Lets the driver read the goodbyes of the pool's other dropped connections (the same poll phase) first. */
const nextTurn = (): Promise<void> => new Promise<void>((resolve) => setImmediate(resolve));

function retriable(ctx: RetryContext, attempt: number, err: unknown): boolean {
  if (attempt >= LOST_CONNECTION_TRIES || ctx.closed() || !ctx.engine.isConnectionLost(err)) return false;
  if (ctx.log.enabled) ctx.log('connection dropped by the server (%s): once more on a fresh one', failureCode(err));
  return true;
}

/** `call` (idempotent: a renewal) again on a fresh connection when the server dropped the one it got. */
export async function retryLost<T>(ctx: RetryContext, call: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await call();
    } catch (err) {
      if (!retriable(ctx, attempt, err)) throw err;
    }
    await nextTurn();
  }
}

/**
 * A transaction, run again on another connection when its first round trip failed because
 * the connection was already gone. Only when nothing can have been committed: the first
 * round trip carried no COMMIT, or the work only reads (`readOnly`). A lost COMMIT may have
 * happened, and is never repeated.
 */
export async function retryTransaction<T>(ctx: RetryContext, work: (tx: SqlTx) => Promise<T>, readOnly: boolean): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    let trips = 0;
    let firstFailed = false;
    let firstCommits = false;
    const counted = (tx: SqlTx): SqlTx => ({
      run: (stmts, commit) => {
        trips += 1;
        if (trips === 1) firstCommits = commit === true;
        const sent = tx.run(stmts, commit);
        if (trips === 1) sent.catch(() => (firstFailed = true));
        return sent;
      },
    });
    try {
      return await ctx.engine.transaction((tx) => work(counted(tx)));
    } catch (err) {
      const safe = trips === 1 && firstFailed && (readOnly || !firstCommits);
      if (!safe || !retriable(ctx, attempt, err)) throw err;
    }
    await nextTurn();
  }
}

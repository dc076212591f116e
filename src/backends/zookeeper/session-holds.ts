/**
 * The holds of one backend: their lease timers, and how a loss learned asynchronously is
 * reported. The session is the lease (docs/backends/zookeeper.md, "The session is the
 * lease"): when our node disappears, the cause decides the reason the holder is told —
 * `session` when the ensemble ended our session (it deletes every node of ours), `not-held`
 * when someone deleted the node while our session lives. A read cannot tell the two apart
 * (a server may still answer reads for a session it is closing); a write can: the ensemble
 * refuses every write of a session it closed. So we ask with one.
 */
import { performance } from 'node:perf_hooks';
import { HoldTable, withDeadline, type AsyncLossReason, type TrackedHold } from '../kit.js';
import { RC, ZkError } from './driver.js';
import type { Deleter } from './nodes.js';
import type { ZkGrantData } from './recipe.js';
import type { SessionState, ZkSession } from './session.js';

/** One hold, as long as we believe it is ours. */
export interface ZkHold extends TrackedHold<ZkGrantData> {
  /** Why our node is gone, once asked. */
  cause: Promise<AsyncLossReason> | undefined;
}

/**
 * The holds the sessions of one backend carry, by grant data. The lease is the session AND the ttl: a holder
 * that stops renewing must not keep the lock for as long as its session lives, so when the
 * lease we vouched for ends without an extend, we delete our own nodes (the kit's HoldTable).
 */
export class SessionHolds extends HoldTable<ZkGrantData, ZkHold> {
  constructor(deleter: Deleter) {
    super({
      backend: 'zookeeper',
      make: (grant, onLost) => ({ grant, onLost, timer: undefined, cause: undefined }),
      expired: (held) => {
        const s = held.grant.data.session;
        if (s.alive) for (const n of held.grant.data.nodes) deleter.delete(s, n).catch(() => undefined);
        return { reason: 'lease ended' };
      },
    });
  }

  /** The session of some holds ended: every one of its holds is lost, for that reason. */
  sessionEnded(session: ZkSession, state: SessionState): void {
    this.loseWhere((h) => h.grant.data.session === session, 'session', { state });
  }

  /** Our node `path` of `held` is gone: find out why, then tell the holder (once). */
  async nodeGone(held: ZkHold, path: string): Promise<AsyncLossReason> {
    held.cause ??= whyGone(held.grant.data.session, path);
    const reason = await held.cause;
    this.lose(held, reason, { path });
    return reason;
  }
}

/**
 * Why `path` is gone: delete it again (a write, refused as SESSIONEXPIRED once the ensemble
 * closed our session; NONODE while it lives). A lost connection is retried once the client
 * reconnects; no answer within a session timeout means the session is, or soon will be, gone.
 */
async function whyGone(s: ZkSession, path: string): Promise<AsyncLossReason> {
  const deadline = performance.now() + s.sessionTimeoutMs;
  while (s.alive && performance.now() < deadline) {
    try {
      await withDeadline(s.delete(path), { timeoutMs: Math.max(1, deadline - performance.now()) });
      return s.alive ? 'not-held' : 'session';
    } catch (err) {
      if (err instanceof ZkError && err.rc === RC.SESSIONEXPIRED) return 'session';
      if (!s.alive) break;
      await nextState(s, deadline - performance.now());
    }
  }
  return 'session';
}

/** Resolve at the session's next state change, or after `ms`. */
function nextState(s: ZkSession, ms: number): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(done, Math.max(0, ms));
    timer.unref();
    const unsubscribe = s.onState(done);
    function done(): void {
      clearTimeout(timer);
      unsubscribe();
      resolve();
    }
  });
}

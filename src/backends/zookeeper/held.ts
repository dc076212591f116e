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
import { LockLostError, withDeadline, type AcquireRequest, type AsyncLossReason, type Grant } from '../kit.js';
import { RC, ZkError } from './driver.js';
import type { Deleter } from './nodes.js';
import type { ZkGrantData } from './recipe.js';
import type { SessionState, ZkSession } from './session.js';

/** One hold, as long as we believe it is ours. */
export interface Held {
  readonly grant: Grant<ZkGrantData>;
  readonly onLost: AcquireRequest['onLost'];
  /** Deletes our nodes when the lease we vouched for ends without an extend. */
  timer: NodeJS.Timeout | undefined;
  /** Why our node is gone, once asked. */
  cause: Promise<AsyncLossReason> | undefined;
}

/** The holds of one backend, by grant data. */
export class HeldTable {
  readonly #held = new Map<ZkGrantData, Held>();
  readonly #deleter: Deleter;

  constructor(deleter: Deleter) {
    this.#deleter = deleter;
  }

  /** Start tracking `grant`, with a lease of `ttlMs` from now. */
  add(grant: Grant<ZkGrantData>, onLost: AcquireRequest['onLost'], ttlMs: number): Held {
    const held: Held = { grant, onLost, timer: undefined, cause: undefined };
    this.#held.set(grant.data, held);
    this.arm(held, ttlMs);
    return held;
  }

  /** The hold of `data`, while we believe it is ours. */
  get(data: ZkGrantData): Held | undefined {
    return this.#held.get(data);
  }

  /** True while `held` is tracked. */
  has(held: Held): boolean {
    return this.#held.get(held.grant.data) === held;
  }

  /**
   * The lease is the session AND the ttl: a holder that stops renewing (autoExtend off, a
   * stuck event loop) must not keep the lock for as long as its session lives. So when the
   * lease we vouched for ends without an extend, we delete our own nodes. The timer starts
   * when the answer arrives, after the core's `sentAt`, so the nodes outlive `validUntil`.
   */
  arm(held: Held, ttlMs: number): void {
    if (held.timer) clearTimeout(held.timer);
    held.timer = setTimeout(() => {
      if (!this.has(held)) return;
      this.drop(held.grant.data);
      const s = held.grant.data.session;
      if (s.alive) for (const n of held.grant.data.nodes) this.#deleter.delete(s, n).catch(() => undefined);
      tell(held, 'not-held', { reason: 'lease ended' });
    }, ttlMs);
    held.timer.unref();
  }

  /** Forget a hold (and its lease timer); returns whether it was tracked. */
  drop(data: ZkGrantData): boolean {
    const h = this.#held.get(data);
    if (!h) return false;
    if (h.timer) clearTimeout(h.timer);
    this.#held.delete(data);
    return true;
  }

  /** The session of some holds ended: every one of its holds is lost, for that reason. */
  sessionEnded(session: ZkSession, state: SessionState): void {
    for (const h of [...this.#held.values()]) {
      if (h.grant.data.session !== session) continue;
      this.drop(h.grant.data);
      tell(h, 'session', { state });
    }
  }

  /** Our node `path` of `held` is gone: find out why, then tell the holder (once). */
  async nodeGone(held: Held, path: string): Promise<AsyncLossReason> {
    held.cause ??= whyGone(held.grant.data.session, path);
    const reason = await held.cause;
    if (this.has(held)) {
      this.drop(held.grant.data);
      tell(held, reason, { path });
    }
    return reason;
  }

  /** Forget every hold (close, abandon): nobody is told. */
  clear(): void {
    for (const h of this.#held.values()) if (h.timer) clearTimeout(h.timer);
    this.#held.clear();
  }
}

function tell(h: Held, reason: AsyncLossReason, context: Record<string, unknown>): void {
  try {
    h.onLost(reason, new LockLostError(h.grant.lockId, reason, { context: { backend: 'zookeeper', ...context } }));
  } catch {
    /* the core's callback must not break a timer or the client's event dispatch */
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

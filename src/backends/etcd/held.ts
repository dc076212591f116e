/**
 * The holds of one backend and how their loss is reported. One lease carries every hold
 * of a backend, so each hold also has a ttl of its own (docs/backends/etcd.md, "One lease,
 * many holds"): a holder that stops extending (autoExtend off, a stuck event loop) must not
 * keep the lock for as long as the backend's lease lives, so when the time it was vouched
 * for ends without an extend, its key is deleted. The timer starts when the answer came,
 * after the core's `sentAt`, so the key outlives `validUntil`.
 */
import { LockLostError, type AcquireRequest, type AsyncLossReason, type Grant } from '../kit.js';
import type { EtcdGrantData } from './recipe.js';
import type { LeaseSession } from './session.js';

/** One hold, as long as we believe it is ours. */
export interface Held {
  readonly grant: Grant<EtcdGrantData>;
  readonly onLost: AcquireRequest['onLost'];
  timer: NodeJS.Timeout | undefined;
  /** Stops the watch on our key (set by the backend once the watch is placed). */
  unwatch: (() => void) | undefined;
}

/** The holds of one backend, by grant data. */
export class HeldTable {
  readonly #held = new Map<EtcdGrantData, Held>();
  readonly #remove: (data: EtcdGrantData) => void;

  /** `remove` deletes a hold's key (guarded by its revision) when its own ttl ends. */
  constructor(remove: (data: EtcdGrantData) => void) {
    this.#remove = remove;
  }

  /** Start tracking `grant`, with a ttl of `ttlMs` from now. */
  add(grant: Grant<EtcdGrantData>, onLost: AcquireRequest['onLost'], ttlMs: number): Held {
    const held: Held = { grant, onLost, timer: undefined, unwatch: undefined };
    this.#held.set(grant.data, held);
    this.arm(held, ttlMs);
    return held;
  }

  /** The hold of `data`, while we believe it is ours. */
  get(data: EtcdGrantData): Held | undefined {
    return this.#held.get(data);
  }

  /** (Re)start the hold's own ttl. */
  arm(held: Held, ttlMs: number): void {
    clearTimeout(held.timer);
    held.timer = setTimeout(() => {
      if (this.#held.get(held.grant.data) !== held) return;
      this.drop(held.grant.data);
      this.#remove(held.grant.data);
      tell(held, 'not-held', { reason: 'ttl ended without an extend' });
    }, ttlMs);
    held.timer.unref();
  }

  /** Forget a hold (and its timer); returns whether it was tracked. */
  drop(data: EtcdGrantData): boolean {
    const h = this.#held.get(data);
    if (!h) return false;
    clearTimeout(h.timer);
    h.unwatch?.();
    this.#held.delete(data);
    return true;
  }

  /** Our key of `data` is gone or taken: the holder is told (once). */
  gone(data: EtcdGrantData): void {
    const h = this.#held.get(data);
    if (!h || !this.drop(data)) return;
    tell(h, 'not-held', { key: data.key });
  }

  /** The lease of some holds ended: every one of its holds is lost. */
  sessionEnded(session: LeaseSession, why: string): void {
    for (const h of [...this.#held.values()]) {
      if (h.grant.data.session !== session) continue;
      this.drop(h.grant.data);
      tell(h, 'session', { lease: session.hex, why });
    }
  }

  /** Forget every hold (close, abandon): nobody is told. */
  clear(): void {
    for (const h of this.#held.values()) {
      clearTimeout(h.timer);
      h.unwatch?.();
    }
    this.#held.clear();
  }
}

function tell(h: Held, reason: AsyncLossReason, context: Record<string, unknown>): void {
  try {
    h.onLost(reason, new LockLostError(h.grant.lockId, reason, { context: { backend: 'etcd', ...context } }));
  } catch {
    /* the core's callback must not break a timer */
  }
}

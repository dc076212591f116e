/**
 * The holds a backend tracks while it believes they are its own, each with a timer for the
 * time it vouched for. A backend whose one lease carries many holds (an etcd lease, a
 * ZooKeeper session) must not let a holder that stops extending (autoExtend off, a stuck
 * event loop) keep the lock for as long as that lease lives: when a hold's time ends without
 * an extend, the backend removes it on the server and the holder is told `not-held`. A loss
 * learned another way (a watch, the lease's end) is told through {@link HoldTable.lose}, once.
 * The timer starts when the answer came, after the core's `sentAt`, so the hold on the server
 * outlives the core's `validUntil`. Part of the backend kit (docs/architecture.md).
 */
import { LockLostError } from '../errors.js';
import type { AcquireRequest, AsyncLossReason, Grant } from '../backend.js';
import { backendLog } from '../observe/log.js';

/** One hold, as long as the backend believes it is its own; backends add their own fields. */
export interface TrackedHold<D> {
  readonly grant: Grant<D>;
  readonly onLost: AcquireRequest['onLost'];
  /** The hold's own ttl (owned by the table). */
  timer: NodeJS.Timeout | undefined;
}

/** What a {@link HoldTable} needs from its backend. */
export interface HoldTableOptions<D, H extends TrackedHold<D>> {
  /** The backend's name, for the loss's context. */
  readonly backend: string;
  /** A new hold record (with the backend's own fields unset). */
  readonly make: (grant: Grant<D>, onLost: AcquireRequest['onLost']) => H;
  /** The hold's time ended without an extend: remove it on the server (not awaited); returns the loss's context. */
  readonly expired: (held: H) => Record<string, unknown>;
  /** Undo what the backend attached to a hold (a watch) when the hold is dropped or cleared. */
  readonly dropped?: (held: H) => void;
}

/** The holds of one backend, by grant data. */
export class HoldTable<D extends object, H extends TrackedHold<D>> {
  readonly #held = new Map<D, H>();
  readonly #o: HoldTableOptions<D, H>;

  constructor(options: HoldTableOptions<D, H>) {
    this.#o = options;
  }

  /** Start tracking `grant`, with a ttl of `ttlMs` from now. */
  add(grant: Grant<D>, onLost: AcquireRequest['onLost'], ttlMs: number): H {
    const held = this.#o.make(grant, onLost);
    this.#held.set(grant.data, held);
    this.arm(held, ttlMs);
    return held;
  }

  /** The hold of `data`, while the backend believes it is its own. */
  get(data: D): H | undefined {
    return this.#held.get(data);
  }

  /** True while `held` is tracked. */
  has(held: H): boolean {
    return this.#held.get(held.grant.data) === held;
  }

  /** (Re)start the hold's own ttl. */
  arm(held: H, ttlMs: number): void {
    clearTimeout(held.timer);
    held.timer = setTimeout(() => {
      if (!this.has(held)) return;
      this.drop(held.grant.data);
      this.#tell(held, 'not-held', this.#o.expired(held));
    }, ttlMs);
    // The core's own timers keep a waiting caller alive; this one is upkeep.
    held.timer.unref();
  }

  /** Forget a hold (its timer, what the backend attached); returns whether it was tracked. */
  drop(data: D): boolean {
    const held = this.#held.get(data);
    if (!held) return false;
    clearTimeout(held.timer);
    this.#o.dropped?.(held);
    this.#held.delete(data);
    return true;
  }

  /** `held` is lost for `reason`: forget it and tell its holder, unless that already happened. */
  lose(held: H, reason: AsyncLossReason, context: Record<string, unknown>): void {
    if (!this.has(held)) return;
    this.drop(held.grant.data);
    this.#tell(held, reason, context);
  }

  /** Every hold `match` picks is lost for `reason` (the lease that carried them ended). */
  loseWhere(match: (held: H) => boolean, reason: AsyncLossReason, context: Record<string, unknown>): void {
    for (const held of [...this.#held.values()]) if (match(held)) this.lose(held, reason, context);
  }

  /** Forget every hold (close, abandon): nobody is told. */
  clear(): void {
    for (const held of this.#held.values()) {
      clearTimeout(held.timer);
      this.#o.dropped?.(held);
    }
    this.#held.clear();
  }

  #tell(held: H, reason: AsyncLossReason, context: Record<string, unknown>): void {
    const log = backendLog(this.#o.backend);
    if (log.enabled) log('%s: lost token %s (%s)', held.grant.lockId, held.grant.token, reason);
    try {
      held.onLost(reason, new LockLostError(held.grant.lockId, reason, { context: { backend: this.#o.backend, ...context } }));
    } catch {
      // The core's callback must not break a timer or a client's event dispatch.
    }
  }
}

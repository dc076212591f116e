/**
 * The holds of one etcd backend. One lease carries every hold of a backend, so each hold
 * also has a ttl of its own (docs/backends/etcd.md, "One lease, many holds"): when the time
 * it was vouched for ends without an extend, its key is deleted (the kit's HoldTable).
 */
import { HoldTable, type TrackedHold } from '../kit.js';
import type { EtcdGrantData } from './recipe.js';
import type { KeptAliveLease } from './lease.js';

/** One hold, as long as we believe it is ours. */
export interface EtcdHold extends TrackedHold<EtcdGrantData> {
  /** Stops the watch on our key (set by the backend once the watch is placed). */
  unwatch: (() => void) | undefined;
}

/** The holds the lease of one backend carries, by grant data, each with a ttl of its own. */
export class LeaseHolds extends HoldTable<EtcdGrantData, EtcdHold> {
  /** `remove` deletes a hold's key (guarded by its revision) when its own ttl ends. */
  constructor(remove: (data: EtcdGrantData) => void) {
    super({
      backend: 'etcd',
      make: (grant, onLost) => ({ grant, onLost, timer: undefined, unwatch: undefined }),
      expired: (held) => {
        remove(held.grant.data);
        return { reason: 'ttl ended without an extend' };
      },
      dropped: (held) => held.unwatch?.(),
    });
  }

  /** Our key of `data` is gone or taken: the holder is told (once). */
  gone(data: EtcdGrantData): void {
    const held = this.get(data);
    if (held) this.lose(held, 'not-held', { key: data.key });
  }

  /** The lease of some holds ended: every one of its holds is lost. */
  sessionEnded(session: KeptAliveLease, why: string): void {
    this.loseWhere((h) => h.grant.data.session === session, 'session', { lease: session.hex, why });
  }
}

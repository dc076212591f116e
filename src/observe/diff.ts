/**
 * What a watch compares: every hold and waiter under a prefix as a map, and the events that
 * turn one such map into the next (shared by the polling watch and the notified one).
 */
import type { Backend, HolderState, LockKind, LockState, WaiterState, WatchChangeType } from '../backend.js';
import { decodeIdentity, type Identity } from './identity.js';
import { MAX_LIST_LIMIT } from './list.js';

/** One change `locker.watch()` yields. */
export interface WatchEvent {
  /**
   * `acquired` a hold appeared; `released` it ended before its lease end; `expired` it
   * ended at or after its lease end; `lost` it was ended by someone else (notifying
   * backends only); `waiting` a waiter joined a queue; `abandoned` a waiter left without
   * holding (timeout, abort, crash).
   */
  readonly type: WatchChangeType;
  readonly lockId: string;
  readonly kind: LockKind;
  readonly ownerId: string;
  /** The holder's or waiter's identity, when stored. */
  readonly identity?: Identity;
  /** The hold's fencing token (hold changes only). */
  readonly token?: bigint;
  /** When it happened or was seen, ms since the epoch. */
  readonly at: number;
  /** True for the holds and waiters that already existed when the watch began (reported once, first). */
  readonly initial?: boolean;
}

/** One hold or one waiter as a watch last saw it. */
export type Seen =
  | { readonly hold: true; readonly lockId: string; readonly h: HolderState }
  | { readonly hold: false; readonly lockId: string; readonly w: WaiterState };

/** Every hold and waiter under `prefix`, page by page. */
export async function snapshot(backend: Backend, prefix: string, signal: AbortSignal): Promise<Map<string, Seen>> {
  const list = backend.list?.bind(backend);
  const seen = new Map<string, Seen>();
  if (!list) return seen;
  let cursor: string | undefined;
  do {
    const page = await list({ prefix, limit: MAX_LIST_LIMIT, cursor, signal });
    for (const s of page.locks) add(seen, s);
    cursor = page.cursor;
  } while (cursor !== undefined && !signal.aborted);
  return seen;
}

/** The holds and waiters of one lock, keyed as a snapshot keys them. */
export function stateEntries(s: LockState): Map<string, Seen> {
  const seen = new Map<string, Seen>();
  add(seen, s);
  return seen;
}

function add(seen: Map<string, Seen>, s: LockState): void {
  for (const h of s.holders) seen.set(`h\0${s.lockId}\0${h.ownerId}\0${h.token}`, { hold: true, lockId: s.lockId, h });
  for (const w of s.queue ?? []) seen.set(`w\0${s.lockId}\0${w.ownerId}\0${w.kind}`, { hold: false, lockId: s.lockId, w });
}

/**
 * What changed from `before` to `after` (`before` undefined: everything is initial). Endings
 * come before beginnings, so that a hand-off seen in one snapshot reads in the order it
 * happened: the previous holder's `released`, then the next one's `acquired`.
 */
export function diff(before: Map<string, Seen> | undefined, after: Map<string, Seen>, now: number): WatchEvent[] {
  const out = before ? endings(before, after, now) : [];
  const initial = before === undefined ? { initial: true } : {};
  for (const [key, s] of after) {
    if (before?.has(key)) continue;
    out.push(
      s.hold
        ? holdEvent('acquired', s.lockId, s.h, s.h.acquiredAt ?? now, initial)
        : waitEvent('waiting', s.lockId, s.w, s.w.since ?? now, initial),
    );
  }
  return out;
}

/** The holds and waits of `before` gone from `after`; a waiter that became a holder did not abandon. */
function endings(before: Map<string, Seen>, after: Map<string, Seen>, now: number): WatchEvent[] {
  const out: WatchEvent[] = [];
  const holding = new Set<string>();
  for (const s of after.values()) if (s.hold) holding.add(`${s.lockId}\0${s.h.ownerId}`);
  for (const [key, s] of before) {
    if (after.has(key)) continue;
    if (s.hold) {
      const ended = s.h.leaseEndsAt !== undefined && s.h.leaseEndsAt <= now;
      out.push(holdEvent(ended ? 'expired' : 'released', s.lockId, s.h, now, {}));
    } else if (!holding.has(`${s.lockId}\0${s.w.ownerId}`)) {
      out.push(waitEvent('abandoned', s.lockId, s.w, now, {}));
    }
  }
  return out;
}

function holdEvent(type: WatchChangeType, lockId: string, h: HolderState, at: number, extra: object): WatchEvent {
  const identity = decodeIdentity(h.identity);
  return { type, lockId, kind: h.kind, ownerId: h.ownerId, ...(identity ? { identity } : {}), token: h.token, at, ...extra };
}

function waitEvent(type: WatchChangeType, lockId: string, w: WaiterState, at: number, extra: object): WatchEvent {
  const identity = decodeIdentity(w.identity);
  return { type, lockId, kind: w.kind, ownerId: w.ownerId, ...(identity ? { identity } : {}), at, ...extra };
}

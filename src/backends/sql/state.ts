/**
 * The lease-row state machine, apart from any driver: given what one transaction read under
 * the lock row (holders, queue, the database's clock), decide what an attempt does. The
 * compatibility and queue rules are the memory backend's (docs/backends/memory.md), so every
 * engine grants the same way.
 */
import { checkPermits, kindsCompatible, permitsInUse, queueAllows, type AcquireRequest } from '../kit.js';
import type { HolderRow, WaiterRow } from './types.js';

/** µs per ms. */
export const US = 1000;

/** Until when a hold keeps others out: its lease, plus the lock delay if it is never released. */
export function blocksUntilUs(h: HolderRow): number {
  return h.expiresUs + h.lockDelayMs * US;
}

/** The state of one lock id as a transaction sees it. */
export interface LockView {
  readonly nowUs: number;
  /** Holds that still block (alive, or expired within their lock delay). */
  readonly holders: readonly HolderRow[];
  /** Unexpired waiters, in sequence order. */
  readonly queue: readonly WaiterRow[];
  /** Rows that expired and are to be deleted. */
  readonly staleHolders: boolean;
  readonly staleWaiters: boolean;
}

/** Split raw rows into live ones and the fact that stale ones exist. */
export function view(nowUs: number, holders: readonly HolderRow[], queue: readonly WaiterRow[]): LockView {
  const live = holders.filter((h) => blocksUntilUs(h) > nowUs);
  const waiting = queue.filter((w) => w.expiresUs > nowUs).sort((a, b) => (a.seq < b.seq ? -1 : a.seq > b.seq ? 1 : 0));
  return {
    nowUs,
    holders: live,
    queue: waiting,
    staleHolders: live.length !== holders.length,
    staleWaiters: waiting.length !== queue.length,
  };
}

/** What an attempt does. */
export type Decision =
  | { readonly type: 'reenter'; readonly holder: HolderRow }
  | { readonly type: 'grant' }
  | { readonly type: 'contended'; readonly mine: WaiterRow | undefined };

/** The same owner holding the same kind (alive) re-enters; semaphores never do. */
export function reentry(v: LockView, req: AcquireRequest<unknown>): HolderRow | undefined {
  if (req.kind === 'semaphore') return undefined;
  return v.holders.find((h) => h.ownerId === req.ownerId && h.kind === req.kind && h.expiresUs > v.nowUs);
}

/** Decide one attempt of `req` (whose queue row, if any, has sequence `seq`). */
export function decide(v: LockView, req: AcquireRequest<unknown>, seq: bigint | undefined): Decision {
  const again = reentry(v, req);
  if (again) return { type: 'reenter', holder: again };
  const at = seq === undefined ? -1 : v.queue.findIndex((w) => w.seq === seq);
  const mine = at >= 0 ? v.queue[at] : undefined;
  const ahead = at >= 0 ? v.queue.slice(0, at) : v.queue;
  // Rows an older version wrote carry no size (0): nothing to compare them with.
  const sized = v.holders.find((h) => h.kind === 'semaphore' && h.permits > 0);
  checkPermits(req.lockId, req, sized?.permits);
  if (kindsCompatible(v.holders, req) && queueAllows(req, ahead, permitsInUse(v.holders))) return { type: 'grant' };
  return { type: 'contended', mine };
}

/**
 * How long a contended waiter may sleep before something it saw can change by itself: the
 * next expiry of a hold (plus its lock delay) or of a waiter ahead. Notifications cover the
 * rest (releases, cancels, grants).
 */
export function nextExpiryMs(v: LockView): number {
  let at = Number.POSITIVE_INFINITY;
  for (const h of v.holders) at = Math.min(at, h.expiresUs > v.nowUs ? h.expiresUs : blocksUntilUs(h));
  for (const w of v.queue) at = Math.min(at, w.expiresUs);
  return at === Number.POSITIVE_INFINITY ? at : Math.max(1, Math.ceil((at - v.nowUs) / US) + 1);
}

/**
 * Seeing locks on NATS (docs/backends/nats.md, "Listing"): the state of one lock from its
 * record, and one page of every lock under the backend's prefix, in key order.
 */
import { InvalidArgumentError, type HolderState, type ListPage, type ListRequest, type LockState, type WaiterState } from '../kit.js';
import { escapeId, keyOf, keysFilter, unescapeId } from './keys.js';
import { decodeRec, isIdle, prune, type LockRec } from './state.js';
import type { Store } from './store.js';

const CURSOR_TAG = 'n1.';

/** The state of `lockId` as its record says, leases judged on this client's clock. */
export function lockState(lockId: string, rec: LockRec, revision: number, now: number, skewMs: number): LockState {
  prune(rec, now, skewMs);
  const holders: HolderState[] = rec.holders.map((h) => ({
    ownerId: h.o,
    kind: h.k,
    token: BigInt(h.t),
    count: 1,
    identity: h.i,
    acquiredAt: h.a,
    leaseEndsAt: h.e,
    expiresInMs: Math.max(0, h.e - now),
  }));
  const queue: WaiterState[] = rec.queue.map((w) => ({ ownerId: w.o, kind: w.k, fair: w.f, identity: w.i, since: w.s }));
  const last = BigInt(rec.last);
  // With no record left, the delete marker's revision bounds every token issued.
  const lastToken = last > 0n ? last : revision > 0 ? BigInt(revision) : undefined;
  return { lockId, holders, waiters: queue.length, queue, ...(lastToken !== undefined ? { lastToken } : {}) };
}

/** Read one lock (inspect). */
export async function readLock(store: Store, prefix: string, lockId: string, skewMs: number): Promise<LockState> {
  const read = await store.read(keyOf(prefix, lockId));
  return lockState(lockId, decodeRec(read.value), read.revision, Date.now(), skewMs);
}

function decodeCursor(cursor: string, base: string): string {
  const key = cursor.startsWith(CURSOR_TAG) ? cursor.slice(CURSOR_TAG.length) : undefined;
  if (key === undefined || !key.startsWith(base) || !/^[-/_=.A-Za-z0-9]+$/.test(key)) {
    throw new InvalidArgumentError('cursor', 'not a cursor of this nats listing');
  }
  return key;
}

/**
 * One page: the bucket's live keys under the prefix (a key listing, names only), sorted,
 * from the cursor's key on; each lock's record read until `limit` locks with a holder or a
 * waiter are found.
 */
export async function listPage(store: Store, prefix: string, req: ListRequest, skewMs: number): Promise<ListPage> {
  const base = `${prefix}${escapeId(req.prefix)}`;
  const after = req.cursor === undefined ? undefined : decodeCursor(req.cursor, base);
  const keys = (await store.keys(keysFilter(prefix)))
    .filter((k) => k.startsWith(base) && (after === undefined || k > after))
    .sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  const locks: LockState[] = [];
  let last: string | undefined;
  for (const key of keys) {
    if (locks.length >= req.limit) return { locks, cursor: `${CURSOR_TAG}${last ?? key}` };
    req.signal.throwIfAborted();
    last = key;
    const lockId = unescapeId(key.slice(prefix.length));
    if (lockId === undefined) continue;
    const read = await store.read(key);
    const rec = decodeRec(read.value);
    const now = Date.now();
    prune(rec, now, skewMs);
    if (isIdle(rec, now)) continue;
    locks.push(lockState(lockId, rec, read.revision, now, skewMs));
  }
  return { locks, cursor: undefined };
}

/**
 * One lock is one key of the bucket, and its value is the whole lock: holders, queue, the
 * last fencing token and a lock-delay fence (docs/backends/nats.md, "The record"). Every
 * step reads the key, decides here — pure functions, no I/O — and writes the new value
 * back with an update guarded by the revision it read (compare-and-set). A lost race
 * re-reads and decides again.
 */
import { kindsCompatible, queueAllows, type LockKind } from '../kit.js';

/** One holder in the record. Times are epoch ms on the writing client's wall clock. */
export interface HolderRec {
  /** Owner id. */
  readonly o: string;
  /** Kind of hold. */
  readonly k: LockKind;
  /** The acquisition's nonce: tells this grant from another of the same owner. */
  readonly n: string;
  /** Fencing token (decimal). */
  readonly t: string;
  /** Lease end. */
  e: number;
  /** When the hold began. */
  readonly a: number;
  /** Lock delay (ms) to keep the lock blocked past `e` when the holder vanishes. */
  readonly d: number;
  /** Identity, verbatim. */
  readonly i: string;
  /** A semaphore hold's semaphore size (absent on other kinds and on records of older versions). */
  readonly p?: number;
}

/**
 * The semaphore size of a live holder that differs from `permits`, if any: a semaphore is
 * opened with one size by all its holders (docs/recipes/semaphore.md).
 */
export function otherSize(r: LockRec, permits: number): number | undefined {
  return r.holders.find((h) => h.k === 'semaphore' && h.p !== undefined && h.p !== permits)?.p;
}

/** One queued waiter. `e` is a heartbeat: a waiter that stops retrying leaves the queue. */
export interface WaiterRec {
  readonly o: string;
  readonly k: LockKind;
  readonly n: string;
  readonly p: number;
  readonly f: boolean;
  readonly s: number;
  e: number;
  readonly i: string;
}

/** The value of one lock's key. */
export interface LockRec {
  /** The last fencing token issued (decimal), or forced by a break. */
  last: string;
  holders: HolderRec[];
  queue: WaiterRec[];
  /** Nobody is granted before this (a vanished holder's lock delay). */
  blockedUntil: number;
}

/** An empty record (a lock nobody holds). */
export const emptyRec = (): LockRec => ({ last: '0', holders: [], queue: [], blockedUntil: 0 });

/** Parse a stored value; anything unreadable is an empty lock (never a crash on a stray key). */
export function decodeRec(value: Uint8Array | undefined): LockRec {
  if (!value || value.length === 0) return emptyRec();
  try {
    const v = JSON.parse(Buffer.from(value).toString('utf8')) as Partial<LockRec>;
    return {
      last: typeof v.last === 'string' && /^\d+$/.test(v.last) ? v.last : '0',
      holders: Array.isArray(v.holders) ? v.holders : [],
      queue: Array.isArray(v.queue) ? v.queue : [],
      blockedUntil: typeof v.blockedUntil === 'number' ? v.blockedUntil : 0,
    };
  } catch {
    return emptyRec();
  }
}

export const encodeRec = (r: LockRec): Uint8Array => Buffer.from(JSON.stringify(r));

/** True when the record holds nothing worth keeping but its token (the key may be deleted). */
export const isIdle = (r: LockRec, now: number): boolean => r.holders.length === 0 && r.queue.length === 0 && r.blockedUntil <= now;

/**
 * Drop holders whose lease ended `skewMs` ago (the clocks of two lockers may disagree that
 * much: docs/backends/nats.md, "Whose clock") and waiters whose heartbeat stopped, as of
 * `now`. A vanished holder with a lock delay blocks the lock until its lease end plus the
 * delay. Returns true when anything changed.
 */
export function prune(r: LockRec, now: number, skewMs: number): boolean {
  const before = r.holders.length + r.queue.length;
  const ended = (h: HolderRec): boolean => h.e + skewMs <= now;
  for (const h of r.holders) if (ended(h) && h.d > 0) r.blockedUntil = Math.max(r.blockedUntil, h.e + skewMs + h.d);
  r.holders = r.holders.filter((h) => !ended(h));
  r.queue = r.queue.filter((w) => w.e > now);
  if (r.blockedUntil <= now) r.blockedUntil = 0;
  return r.holders.length + r.queue.length !== before;
}

/**
 * The next fencing token: above the last one in the record and above the revision the
 * record was read at. Every token ever issued for this key is at most the revision of the
 * write that carried it, so a key deleted (its delete marker's revision is read) or broken
 * still gives a larger token (docs/backends/nats.md, "Fencing").
 */
export function nextToken(r: LockRec, revision: number): bigint {
  const last = BigInt(r.last);
  const rev = BigInt(revision);
  return (last > rev ? last : rev) + 1n;
}

/** What an acquisition asks. */
export interface Ask {
  readonly owner: string;
  readonly nonce: string;
  readonly kind: LockKind;
  readonly permits: number;
  readonly fair: boolean;
}

const kindOf = (x: { readonly k: LockKind }): { readonly kind: LockKind } => ({ kind: x.k });

/** May `ask` hold now? `ahead` are the waiters queued before it (all of them if it has no place). */
export function mayHold(r: LockRec, ask: Ask, now: number): boolean {
  if (r.blockedUntil > now) return false;
  const mine = r.queue.findIndex((w) => w.n === ask.nonce);
  const ahead = mine < 0 ? r.queue : r.queue.slice(0, mine);
  if (!kindsCompatible(r.holders.map(kindOf), ask)) return false;
  return queueAllows(ask, ahead.map(kindOf), r.holders.length);
}

/** The earliest instant a blocking lease or lock delay ends (when no write will wake a waiter). */
export function nextExpiry(r: LockRec, skewMs: number): number {
  let at = Infinity;
  for (const h of r.holders) at = Math.min(at, h.e + skewMs);
  for (const w of r.queue) at = Math.min(at, w.e);
  if (r.blockedUntil > 0) at = Math.min(at, r.blockedUntil);
  return at;
}

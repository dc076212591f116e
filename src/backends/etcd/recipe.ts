/**
 * Who holds, who waits, and what a waiter watches: the decision of the Go recipe, made on
 * one listing of a lock's keys (oldest create revision first). See docs/backends/etcd.md,
 * "The recipe".
 *
 * - mutex, write and foreign keys (`etcdctl lock`) are exclusive: held when no key is older;
 *   a waiter watches only the key just older than its own (no herd effect).
 * - read: held when no older key is exclusive; it watches the youngest older exclusive key.
 * - semaphore of `permits`: held when no older key is of another kind and the weights (the
 *   permits each takes) of the older semaphore keys and its own add up to at most `permits`:
 *   in queue order, so a waiter for several permits is never passed by younger single ones.
 *   A waiter behind other kinds watches the youngest
 *   of them; a waiter behind permits watches every deletion under the lock (any of the
 *   older holders leaving may let it in).
 */
import type { LockKind } from '../kit.js';
import type { Entry } from './client.js';
import { parseValue, type KeyMeta } from './layout.js';
import type { KeptAliveLease } from './lease.js';

/**
 * What a waiting attempt watches next. `last`: `key` is the last key before ours, so its
 * deletion makes us the holder; the watch covers every key under `prefix` (deletions only) to
 * see, in revision order, whether our own key went first (docs/backends/etcd.md, "The recipe").
 */
export type WatchSpec =
  | { readonly type: 'key'; readonly key: string }
  | { readonly type: 'prefix'; readonly prefix: string }
  | { readonly type: 'last'; readonly key: string; readonly prefix: string; readonly own: string };

/** The queue position a contended attempt leaves behind (the seam's `Ticket`). */
export interface EtcdTicket {
  readonly session: KeptAliveLease;
  readonly lockId: string;
  /** Exclusive (mutex, write): only the key just older than ours matters, so only it is read. */
  readonly exclusive: boolean;
  readonly prefix: string;
  /** Our key (under `prefix`). */
  key: string;
  /** Our key's value (it carries the nonce). */
  readonly value: Buffer;
  /** Tells our own key from any other of the same name. */
  readonly nonce: string;
  /** The create revision of our key, once created. */
  rev: bigint | undefined;
  /** What to watch, and the revision of the listing it was chosen from. */
  watch: WatchSpec | undefined;
  seenAt: bigint;
  /**
   * Set by the wait of a `last` watch: the revision at which the last key before ours was
   * deleted while ours still stood, which makes us the holder at that revision.
   */
  heldAt: bigint | undefined;
}

/** What a grant carries for extend and release (the seam's grant `Data`). */
export interface EtcdGrantData {
  readonly session: KeptAliveLease;
  readonly key: string;
  readonly rev: bigint;
  /** The hold's delay marker and its create revision, when granted with a lock-delay (delay.ts). */
  readonly marker: { readonly key: string; readonly rev: bigint; readonly delayMs: number } | undefined;
}

/** One key of a listing, with what its value says. */
export interface Holder extends Entry, KeyMeta {}

/** The keys of a listing with their meaning. */
export function holders(entries: readonly Entry[]): Holder[] {
  return entries.map((e) => ({ ...e, ...parseValue(e.value) }));
}

/** The decision for the key of create revision `rev`: held, or what to watch. */
export function decide(
  kind: LockKind,
  permits: number,
  rev: bigint,
  keys: readonly Holder[],
  prefix: string,
  weight = 1,
): { readonly held: true } | { readonly held: false; readonly watch: WatchSpec } {
  // Oldest first, whatever order the listing came in (an exclusive waiter's is youngest first).
  const older = keys.filter((k) => k.createRevision < rev).sort((a, b) => (a.createRevision < b.createRevision ? -1 : 1));
  const blocking =
    kind === 'read' ? older.filter((k) => k.kind !== 'read') : kind === 'semaphore' ? older.filter((k) => k.kind !== 'semaphore') : older;
  const youngest = blocking[blocking.length - 1];
  if (youngest) return { held: false, watch: { type: 'key', key: youngest.key } };
  if (kind === 'semaphore' && older.reduce((sum, k) => sum + k.weight, weight) > permits)
    return { held: false, watch: { type: 'prefix', prefix } };
  return { held: true };
}

/** The keys of a listing that hold now (for `inspect`), in queue order. */
export function holding(keys: readonly Holder[]): Holder[] {
  return keys.filter((k) => decide(k.kind, k.permits, k.createRevision, keys, '', k.weight).held);
}

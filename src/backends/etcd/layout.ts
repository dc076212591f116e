/**
 * How a lock id maps to etcd keys, and what a key's value says (docs/backends/etcd.md,
 * "Keys"). The layout is the one of etcd's Go `concurrency.Mutex`: every holder and waiter
 * of lock `L` is one key directly under `<prefix>L/`, attached to its client's lease, and
 * the order of the queue is the order of the keys' create revisions. So `etcdctl lock L`
 * (prefix '') and locksmith wait in one queue.
 */
import type { LockKind } from '../kit.js';

/**
 * The key segment of a lock id: the id itself, with only `%` and `/` percent-encoded, so
 * that `a` and `a/b` never share a key prefix and `etcdctl lock account:42` names the same
 * lock as `locker.lock('account:42')`.
 */
export function encodeLockId(lockId: string): string {
  return lockId.replaceAll('%', '%25').replaceAll('/', '%2F');
}

/** The inverse of {@link encodeLockId}. */
export function decodeLockId(segment: string): string {
  return segment.replaceAll('%2F', '/').replaceAll('%25', '%');
}

/** The key prefix of every holder and waiter of `lockId` (ends with `/`). */
export function lockPrefix(prefix: string, lockId: string): string {
  return `${prefix}${encodeLockId(lockId)}/`;
}

/** etcd's range end for "every key starting with `prefix`" (the prefix with its last byte + 1). */
export function rangeEnd(prefix: Buffer): Buffer {
  const end = Buffer.from(prefix);
  for (let i = end.length - 1; i >= 0; i--) {
    if ((end[i] ?? 0xff) < 0xff) {
      end[i] = (end[i] ?? 0) + 1;
      return end.subarray(0, i + 1);
    }
  }
  // All 0xff: the range runs to the end of the key space.
  return Buffer.from([0]);
}

/** What a key under a lock prefix says about its holder. */
export interface KeyMeta {
  /** The kind of hold; a key written by another tool (`etcdctl lock`, Go's Mutex) is a `mutex`. */
  readonly kind: LockKind;
  /** The locksmith owner id, when locksmith wrote the key. */
  readonly owner: string | undefined;
  /** The acquisition's nonce: tells our own create, retried after a lost reply, from a stranger. */
  readonly nonce: string | undefined;
  /** A semaphore's size as its holder asked for it (1 for other kinds). */
  readonly permits: number;
}

const KINDS: readonly LockKind[] = ['mutex', 'read', 'write', 'semaphore'];

/** The value of a locksmith key (JSON; Go's Mutex writes an empty value). */
export function encodeValue(meta: { kind: LockKind; owner: string; nonce: string; permits: number }): Buffer {
  return Buffer.from(JSON.stringify({ locksmith: 1, kind: meta.kind, owner: meta.owner, nonce: meta.nonce, permits: meta.permits }));
}

/** Read a key's value: anything that is not a locksmith value is an exclusive foreign holder. */
export function parseValue(value: Buffer | undefined): KeyMeta {
  const foreign: KeyMeta = { kind: 'mutex', owner: undefined, nonce: undefined, permits: 1 };
  if (!value || value.length === 0 || value[0] !== 0x7b) return foreign;
  try {
    const v = JSON.parse(value.toString('utf8')) as Record<string, unknown>;
    if (v['locksmith'] !== 1) return foreign;
    const kind = KINDS.find((k) => k === v['kind']) ?? 'mutex';
    const owner = typeof v['owner'] === 'string' ? v['owner'] : undefined;
    const nonce = typeof v['nonce'] === 'string' ? v['nonce'] : undefined;
    const permits = typeof v['permits'] === 'number' && Number.isInteger(v['permits']) && v['permits'] > 0 ? v['permits'] : 1;
    return { kind, owner, nonce, permits };
  } catch {
    return foreign;
  }
}

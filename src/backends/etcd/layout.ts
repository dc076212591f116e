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

/**
 * The lock id of a key segment, or undefined when the segment is not one that
 * {@link encodeLockId} writes (a bare `%`: some other key under the prefix, or a fence key).
 */
export function lockIdOf(segment: string): string | undefined {
  if (segment === '') return undefined;
  const id = decodeLockId(segment);
  return encodeLockId(id) === segment ? id : undefined;
}

/**
 * The key whose writes mark a forced release of `lockId` (docs/backends/etcd.md, "Breaking
 * a lock"). Its segment `%fence` is never an encoded lock id (an encoded `%` is always
 * followed by `25` or `2F`), so no lock's key range and no `etcdctl lock` queue contains it.
 */
export function fenceKey(prefix: string, lockId: string): string {
  return `${prefix}%fence/${encodeLockId(lockId)}`;
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
  /** The permits the hold takes (1 for other kinds and keys of older versions). */
  readonly weight: number;
  /** The writer's identity (`AcquireRequest.identity`), verbatim, when locksmith wrote the key. */
  readonly identity: string | undefined;
  /** The writer's wall clock (epoch ms) when it sent the put: etcd keeps no time of its own. */
  readonly at: number | undefined;
  /**
   * Whether this key, once it holds, writes a lock-delay marker: false for keys of other tools
   * (they never do), undefined for locksmith keys of older versions (not said: assume it may).
   */
  readonly marks: boolean | undefined;
}

/** What locksmith writes in a key's value. */
export interface ValueFields {
  readonly kind: LockKind;
  readonly owner: string;
  readonly nonce: string;
  readonly permits: number;
  /** Permits the hold takes (semaphores; 1 when absent). */
  readonly weight?: number;
  readonly identity: string;
  readonly at: number;
  /** The hold writes a lock-delay marker (its request has a lock-delay). */
  readonly marks: boolean;
}

const KINDS: readonly LockKind[] = ['mutex', 'read', 'write', 'semaphore'];

/** The value of a locksmith key (JSON; Go's Mutex writes an empty value). */
export function encodeValue(v: ValueFields): Buffer {
  const { kind, owner, nonce, permits, identity, at, marks } = v;
  // weight only when above 1: the keys of single permits read as older versions wrote them.
  const weight = v.weight !== undefined && v.weight > 1 ? { weight: v.weight } : {};
  return Buffer.from(JSON.stringify({ locksmith: 1, kind, owner, nonce, permits, ...weight, id: identity, at, marks }));
}

/** Read a key's value: anything that is not a locksmith value is an exclusive foreign holder. */
export function parseValue(value: Buffer | undefined): KeyMeta {
  const foreign: KeyMeta = {
    kind: 'mutex',
    owner: undefined,
    nonce: undefined,
    permits: 1,
    weight: 1,
    identity: undefined,
    at: undefined,
    marks: false,
  };
  if (!value || value.length === 0 || value[0] !== 0x7b) return foreign;
  try {
    const v = JSON.parse(value.toString('utf8')) as Record<string, unknown>;
    if (v['locksmith'] !== 1) return foreign;
    const kind = KINDS.find((k) => k === v['kind']) ?? 'mutex';
    const owner = typeof v['owner'] === 'string' ? v['owner'] : undefined;
    const nonce = typeof v['nonce'] === 'string' ? v['nonce'] : undefined;
    const permits = typeof v['permits'] === 'number' && Number.isInteger(v['permits']) && v['permits'] > 0 ? v['permits'] : 1;
    const weight = typeof v['weight'] === 'number' && Number.isInteger(v['weight']) && v['weight'] > 0 ? v['weight'] : 1;
    const identity = typeof v['id'] === 'string' ? v['id'] : undefined;
    const at = typeof v['at'] === 'number' && Number.isFinite(v['at']) ? v['at'] : undefined;
    const marks = typeof v['marks'] === 'boolean' ? v['marks'] : undefined;
    return { kind, owner, nonce, permits, weight, identity, at, marks };
  } catch {
    return foreign;
  }
}

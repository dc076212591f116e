/**
 * The znode layout, identical to Apache Curator's recipes so that a Java service using
 * Curator and a locksmith client on the same path exclude each other:
 *
 * - mutex (`InterProcessMutex(client, base)`): `base/_c_<uuid>-lock-NNNNNNNNNN`
 * - read-write (`InterProcessReadWriteLock(client, base)`):
 *   `base/_c_<uuid>-__READ__NNNNNNNNNN` and `base/_c_<uuid>-__WRIT__NNNNNNNNNN`
 * - semaphore (`InterProcessSemaphoreV2(client, base, maxLeases)`): an internal mutex under
 *   `base/locks/_c_<uuid>-lock-NNNNNNNNNN` and the leases `base/leases/_c_<uuid>-lease-NNNNNNNNNN`
 *
 * `_c_<uuid>-` is Curator's "protected mode" prefix: after a create whose reply was lost,
 * the client finds its node again by the uuid instead of leaking it.
 */
import type { LockKind } from '../../backend.js';

/** Curator's mutex node name (`InterProcessMutex`, and the semaphore's internal mutex). */
export const LOCK_NAME = 'lock-';
/** Curator's read-lock node name (`InterProcessReadWriteLock`). */
export const READ_NAME = '__READ__';
/** Curator's write-lock node name (`InterProcessReadWriteLock`). */
export const WRITE_NAME = '__WRIT__';
/** Curator's semaphore lease node name (`InterProcessSemaphoreV2`). */
export const LEASE_NAME = 'lease-';
/** The semaphore's internal mutex folder under its base path. */
export const SEM_LOCKS = 'locks';
/** The semaphore's lease folder under its base path. */
export const SEM_LEASES = 'leases';
const PROTECTED_PREFIX = '_c_';

/** The protected prefix of a node created with `uuid` (Curator's `_c_<uuid>-`). */
export function protectedPrefix(uuid: string): string {
  return `${PROTECTED_PREFIX}${uuid}-`;
}

/** One queue node, parsed. */
export interface QueueNode {
  readonly name: string;
  /** `lock-`, `__READ__`, `__WRIT__` or `lease-`. */
  readonly lockName: string;
  readonly sequence: number;
}

const NODE_RE = /^(?:_c_[0-9a-fA-F-]{36}-)?(lock-|__READ__|__WRIT__|lease-)(-?\d{10})$/;

/** Parse and sort (by sequence, as Curator's `fixForSorting`) the queue nodes among `children`. */
export function sortedQueue(children: readonly string[], names: readonly string[]): QueueNode[] {
  const out: QueueNode[] = [];
  for (const c of children) {
    const m = NODE_RE.exec(c);
    if (!m || m[1] === undefined || m[2] === undefined) continue;
    if (!names.includes(m[1])) continue;
    out.push({ name: c, lockName: m[1], sequence: Number(m[2]) });
  }
  out.sort((a, b) => a.sequence - b.sequence || (a.name < b.name ? -1 : 1));
  return out;
}

/** The Curator node name a kind creates (before the sequence suffix). */
export function nodeNameFor(kind: LockKind): string {
  switch (kind) {
    case 'read':
      return READ_NAME;
    case 'write':
      return WRITE_NAME;
    case 'mutex':
    case 'semaphore':
      return LOCK_NAME;
  }
}

/** The names that share one queue with `kind`'s nodes (mutex and write exclude everything). */
export const QUEUE_NAMES: readonly string[] = [LOCK_NAME, READ_NAME, WRITE_NAME];

/** Result of a "do I hold it?" check (Curator's `PredicateResults`). */
export interface Predicate {
  readonly holds: boolean;
  /** The node to watch when not holding (the predecessor that blocks us). */
  readonly watch?: string;
}

/**
 * Exclusive (mutex, write): hold when first; otherwise watch the immediate predecessor only.
 * Shared (read): hold when no exclusive node is ahead; otherwise watch the nearest exclusive
 * node ahead (a reader never waits for other readers).
 */
export function predicate(queue: readonly QueueNode[], ours: string, kind: LockKind): Predicate | undefined {
  const i = queue.findIndex((n) => n.name === ours);
  if (i < 0) return undefined;
  if (kind !== 'read') {
    if (i === 0) return { holds: true };
    return { holds: false, watch: queue[i - 1]?.name };
  }
  for (let j = i - 1; j >= 0; j--) {
    const n = queue[j];
    if (n && n.lockName !== READ_NAME) return { holds: false, watch: n.name };
  }
  return { holds: true };
}

const KEEP = /^[A-Za-z0-9_~-]$/;

/**
 * Map a lockId to a path below the chroot. A lockId made of valid znode names separated by
 * `/` (no `%`, no empty, `.` or `..` segment, printable characters) is used as is, so
 * `locks/account-42` is the same path a Curator user would write. Anything else is
 * percent-encoded byte by byte; an encoded id always contains `%` and a plain one never
 * does, so the mapping is injective.
 */
export function lockPath(chroot: string, lockId: string): string {
  return `${chroot}/${encodeLockId(lockId)}`;
}

/** See {@link lockPath}. */
export function encodeLockId(lockId: string): string {
  if (isPlain(lockId)) return lockId;
  let out = '';
  let first = true;
  for (const byte of Buffer.from(lockId, 'utf8')) {
    const ch = String.fromCharCode(byte);
    // The first byte is always encoded so that every encoded id contains '%'.
    out += KEEP.test(ch) && !first ? ch : `%${byte.toString(16).toUpperCase().padStart(2, '0')}`;
    first = false;
  }
  return out;
}

function isPlain(lockId: string): boolean {
  if (lockId.includes('%')) return false;
  for (const seg of lockId.split('/')) {
    if (seg === '' || seg === '.' || seg === '..' || seg === 'zookeeper') return false;
    for (const ch of seg) {
      const c = ch.codePointAt(0) ?? 0;
      const ok = (c >= 0x20 && c <= 0x7e) || (c >= 0xa0 && c < 0xd800) || (c >= 0xf900 && c < 0xfff0);
      if (!ok) return false;
    }
  }
  return true;
}

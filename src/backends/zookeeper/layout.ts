/**
 * The znode layout. Each lock id is ONE znode name directly under the chroot, so no id is
 * a path prefix of another id or of another kind's nodes; under it, Apache Curator's
 * recipes (see docs/backends/zookeeper.md, "Layout" and "One id, one lock"):
 *
 * - `P/_c_<uuid>-lock-N`       mutex           (Curator's InterProcessMutex on P)
 * - `P/_c_<uuid>-__READ__N`    read hold       (InterProcessReadWriteLock on P)
 * - `P/_c_<uuid>-__WRIT__N`    write hold
 * - `P/locks/_c_<uuid>-lock-N` the gate: InterProcessSemaphoreV2's internal mutex, also
 *   taken by mutex and write holds (`read-lock-` for read holds) once the id has one
 * - `P/leases/_c_<uuid>-lease-N` semaphore leases (InterProcessSemaphoreV2)
 *
 * `_c_<uuid>-` is Curator's "protected mode" prefix: after a create whose reply was lost,
 * the client finds its node again by the uuid instead of leaking it.
 */
import type { LockKind } from '../kit.js';

/** Curator's mutex node name (`InterProcessMutex`, and the semaphore's internal mutex). */
export const LOCK_NAME = 'lock-';
/** Curator's read-lock node name (`InterProcessReadWriteLock`). */
export const READ_NAME = '__READ__';
/** Curator's write-lock node name (`InterProcessReadWriteLock`). */
export const WRITE_NAME = '__WRIT__';
/** Curator's semaphore lease node name (`InterProcessSemaphoreV2`). */
export const LEASE_NAME = 'lease-';
/**
 * A read hold's node in the gate. It ends in `lock-`, so Curator's sorter orders it by its
 * sequence and a Curator semaphore waits behind it like behind any holder of the gate.
 */
export const READ_GATE_NAME = 'read-lock-';
/** The gate (the semaphore's internal mutex) under a lock's node. */
export const GATE_DIR = 'locks';
/** The semaphore's lease folder under a lock's node. */
export const LEASES_DIR = 'leases';
/** The node names of a lock's queue. */
export const QUEUE_NAMES: readonly string[] = [LOCK_NAME, READ_NAME, WRITE_NAME];
/** The node names of the gate. */
export const GATE_NAMES: readonly string[] = [LOCK_NAME, READ_GATE_NAME];

const PROTECTED = /^_c_([0-9a-fA-F-]{36})-/;
const NODE_RE = /^(?:_c_[0-9a-fA-F-]{36}-)?(read-lock-|lock-|__READ__|__WRIT__|lease-)(-?\d{10})$/;

/** The znodes of one lock id. */
export interface LockPaths {
  /** `<chroot>/<encoded id>`: the queue of mutex, read and write holds. */
  readonly base: string;
  /** `<base>/locks`: the gate. */
  readonly gate: string;
  /** `<base>/leases`: the semaphore's leases. */
  readonly leases: string;
}

/** The paths of `lockId` under `chroot` ('' or `/a/b`). */
export function lockPaths(chroot: string, lockId: string): LockPaths {
  const base = lockPath(chroot, lockId);
  return { base, gate: `${base}/${GATE_DIR}`, leases: `${base}/${LEASES_DIR}` };
}

/** The node of `lockId` under `chroot`: the path a Curator user passes to its recipes. */
export function lockPath(chroot: string, lockId: string): string {
  return `${chroot}/${encodeLockId(lockId)}`;
}

/**
 * A lock id as one znode name: its UTF-8 bytes, with every byte that is not printable
 * ASCII (`!`…`~`) and every `/` and `%` written `%XX` (uppercase hex). The names ZooKeeper
 * refuses or reserves are escaped further: `.` → `%2E`, `..` → `%2E%2E`,
 * `zookeeper` → `%7Aookeeper`. Percent-decoding gives the id back, so the mapping is
 * one-to-one, and no encoded id contains `/`.
 */
export function encodeLockId(lockId: string): string {
  let out = '';
  for (const byte of Buffer.from(lockId, 'utf8')) {
    out += byte > 0x20 && byte < 0x7f && byte !== 0x2f && byte !== 0x25 ? String.fromCharCode(byte) : hex(byte);
  }
  if (out === '.' || out === '..') return out.replaceAll('.', '%2E');
  if (out === 'zookeeper') return '%7Aookeeper';
  return out;
}

/** The lock id of an encoded name (the inverse of {@link encodeLockId}). */
export function decodeLockId(name: string): string {
  const bytes: number[] = [];
  for (let i = 0; i < name.length; i++) {
    if (name[i] === '%' && /^[0-9A-F]{2}$/.test(name.slice(i + 1, i + 3))) {
      bytes.push(parseInt(name.slice(i + 1, i + 3), 16));
      i += 2;
    } else {
      bytes.push(name.charCodeAt(i));
    }
  }
  return Buffer.from(bytes).toString('utf8');
}

function hex(byte: number): string {
  return `%${byte.toString(16).toUpperCase().padStart(2, '0')}`;
}

/** The protected prefix of a node created with `uuid` (Curator's `_c_<uuid>-`). */
export function protectedPrefix(uuid: string): string {
  return `_c_${uuid}-`;
}

/** The uuid of a protected node name, if it has one. */
export function uuidOf(name: string): string | undefined {
  return PROTECTED.exec(name)?.[1];
}

/** One queue node, parsed. */
export interface QueueNode {
  readonly name: string;
  /** `lock-`, `read-lock-`, `__READ__`, `__WRIT__` or `lease-`. */
  readonly lockName: string;
  readonly sequence: number;
}

/** Parse and sort (by sequence, as Curator's `fixForSorting`) the nodes named `names` among `children`. */
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

/** The Curator node name a kind creates in the lock's queue (before the sequence suffix). */
export function queueNameFor(kind: LockKind): string {
  if (kind === 'read') return READ_NAME;
  if (kind === 'write') return WRITE_NAME;
  return LOCK_NAME;
}

/** The node name a kind creates in the gate. */
export function gateNameFor(kind: LockKind): string {
  return kind === 'read' ? READ_GATE_NAME : LOCK_NAME;
}

/** Result of a "do I hold it?" check (Curator's `PredicateResults`). */
export interface Predicate {
  readonly holds: boolean;
  /** The node to watch when not holding (the one that blocks us). */
  readonly watch?: string;
}

/**
 * Exclusive (no `shared` name): hold when first; otherwise watch the immediate predecessor
 * only. Shared: hold when no node of another name is ahead; otherwise watch the nearest such
 * node ahead (a reader never waits for other readers). Undefined when our node is missing.
 */
export function predicate(queue: readonly QueueNode[], ours: string, shared?: string): Predicate | undefined {
  const i = queue.findIndex((n) => n.name === ours);
  if (i < 0) return undefined;
  if (shared === undefined || queue[i]?.lockName !== shared) {
    if (i === 0) return { holds: true };
    return { holds: false, ...(queue[i - 1] ? { watch: queue[i - 1]?.name } : {}) };
  }
  for (let j = i - 1; j >= 0; j--) {
    const n = queue[j];
    if (n && n.lockName !== shared) return { holds: false, watch: n.name };
  }
  return { holds: true };
}

/** The nodes at the head of `queue` that hold together (one exclusive node, or leading shared ones). */
export function holdingGroup(queue: readonly QueueNode[], shared: string): QueueNode[] {
  const first = queue[0];
  if (!first) return [];
  if (first.lockName !== shared) return [first];
  const out: QueueNode[] = [];
  for (const n of queue) {
    if (n.lockName !== shared) break;
    out.push(n);
  }
  return out;
}

/** The shared name of `kind` in the lock's queue (undefined: exclusive). */
export function queueShared(kind: LockKind): string | undefined {
  return kind === 'read' ? READ_NAME : undefined;
}

/** The shared name of `kind` in the gate (undefined: exclusive). */
export function gateShared(kind: LockKind): string | undefined {
  return kind === 'read' ? READ_GATE_NAME : undefined;
}

const LEASE_MAGIC = 'locksmith-lease/1\n';
/**
 * Ends the owner id in a node's data; the locker's identity follows. An owner id never holds
 * a NUL (the core refuses it) and the identity is compact JSON, which escapes it, so the
 * split is exact. Readers that take the whole data for the owner (locksmith before
 * identities) still find the owner first; Curator never reads lock data.
 * docs/backends/zookeeper.md, "Node data".
 */
const IDENTITY_SEP = '\0';

/** What a holder or waiter wrote into its node. */
export interface NodeData {
  readonly ownerId: string;
  /** The locker's identity, verbatim; absent in nodes of older writers and of Curator. */
  readonly identity?: string;
}

/** The data of a queue or gate node: the owner, then the identity. */
export function nodeData(ownerId: string, identity: string): Buffer {
  return Buffer.from(identity === '' ? ownerId : `${ownerId}${IDENTITY_SEP}${identity}`, 'utf8');
}

/** Owner and identity of a queue or gate node's data (a Curator node: its IP as the owner). */
export function parseNodeData(data: Buffer | null): NodeData {
  return splitOwner(data ? data.toString('utf8') : '');
}

function splitOwner(text: string): NodeData {
  const at = text.indexOf(IDENTITY_SEP);
  return at < 0 ? { ownerId: text } : { ownerId: text.slice(0, at), identity: text.slice(at + 1) };
}

/**
 * A semaphore lease's data: the holder, its token (the czxid of its gate node, which is
 * gone once the permit is held), so that `inspect` reports the token the holder has, the
 * semaphore's size after it (so that another size is refused), and its identity after the
 * owner as in {@link nodeData}.
 */
export function leaseData(ownerId: string, token: bigint, identity = '', permits?: number): Buffer {
  const size = permits === undefined ? '' : ` ${permits}`;
  return Buffer.concat([Buffer.from(`${LEASE_MAGIC}${token}${size}\n`, 'utf8'), nodeData(ownerId, identity)]);
}

/** Owner, token and identity of a lease's (or any lock node's) data; undefined token for a node locksmith's semaphore did not write. */
export function parseLeaseData(data: Buffer | null): NodeData & { token: bigint | undefined; permits?: number } {
  const text = data ? data.toString('utf8') : '';
  if (!text.startsWith(LEASE_MAGIC)) return { ...splitOwner(text), token: undefined };
  const rest = text.slice(LEASE_MAGIC.length);
  const nl = rest.indexOf('\n');
  // `<token>` or `<token> <permits>` (leases of older versions carry no size).
  const m = /^(\d+)(?: (\d+))?$/.exec(nl < 0 ? '' : rest.slice(0, nl));
  if (!m?.[1]) return { ...splitOwner(text), token: undefined };
  const size = m[2] === undefined ? {} : { permits: Number(m[2]) };
  return { ...splitOwner(rest.slice(nl + 1)), token: BigInt(m[1]), ...size };
}

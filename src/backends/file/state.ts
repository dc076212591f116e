/**
 * One lock's state file: holders, the queue of waiters and the last fencing token, as JSON,
 * and the pure rules that read and change it. The same rules as the memory reference
 * backend (docs/architecture.md), applied to a copy read from disk inside the lock's
 * critical section (docs/backends/file.md).
 */
import {
  exclusiveKind as exclusive,
  kindsCompatible as compatible,
  permitsInUse,
  queueAllows,
  type AcquireRequest,
  type LockKind,
  type Weighed,
} from '../kit.js';
import { pidNamespace } from './layout.js';

/** What the rules read of an acquisition. */
type Ask = Pick<AcquireRequest, 'kind' | 'permits' | 'weight' | 'fair' | 'ownerId' | 'identity' | 'ttlMs' | 'lockDelayMs'>;

/** One hold (re-entered holds of one owner share it, with a count). Times: system-wide monotonic ms. */
export interface FileHolder {
  readonly ownerId: string;
  readonly kind: LockKind;
  readonly token: bigint;
  /** Semaphore holds: the semaphore's size (absent for other kinds and in older files). */
  readonly permits?: number;
  /** Semaphore holds: the permits it takes, when more than 1. */
  readonly weight?: number;
  count: number;
  /** After this the lease is over: extend fails. */
  expiresAt: number;
  /** Until this the holder still blocks others (expiresAt + lockDelay); release clears it. */
  blocksUntil: number;
  readonly lockDelayMs: number;
  /** The holder's identity, stored verbatim as the core encoded it (absent in older files). */
  readonly identity?: string;
  /** When the hold began (monotonic ms; absent in older files). */
  readonly acquiredAt?: number;
}

/** A queued acquisition of some process. */
export interface FileWaiter {
  readonly id: string;
  /** The acquisition's owner ('' in older files). */
  readonly ownerId: string;
  readonly kind: LockKind;
  readonly fair: boolean;
  readonly permits: number;
  /** The permits it asks for, when more than 1. */
  readonly weight?: number;
  /** Dropped after this unless its process attempts again (each attempt moves it on). */
  expiresAt: number;
  /** The waiting process: a waiter whose process is gone is dropped at once. */
  readonly pid: number;
  /** The PID namespace `pid` belongs to (layout.ts). */
  readonly ns: string;
  /** The waiter's identity, stored verbatim (absent in older files). */
  readonly identity?: string;
  /** When it joined the queue (monotonic ms; absent in older files). */
  readonly since?: number;
}

/** The state of one lock id. */
export interface FileState {
  readonly lockId: string;
  /** The boot the times belong to: times of another boot mean nothing. */
  readonly boot: string;
  /** The last fencing token issued for this id (kept when the lock is idle). */
  last: bigint;
  holders: FileHolder[];
  queue: FileWaiter[];
}

const KINDS: readonly LockKind[] = ['mutex', 'read', 'write', 'semaphore'];

/** A fresh state (no token issued yet). */
export function emptyState(lockId: string, boot: string): FileState {
  return { lockId, boot, last: 0n, holders: [], queue: [] };
}

/** The file's text for `s`. */
export function serialize(s: FileState): string {
  return JSON.stringify({
    v: 1,
    id: s.lockId,
    boot: s.boot,
    last: s.last.toString(),
    holders: s.holders.map((h) => ({ ...h, token: h.token.toString() })),
    queue: s.queue,
  });
}

/** Thrown when a state file is not what this version wrote (or belongs to another id). */
export class CorruptStateError extends Error {}

/**
 * Parse a state file of `lockId` (of whatever id it stores when `lockId` is undefined, as a
 * listing reads files it knows only by name). Holders and waiters of another boot are
 * dropped (their monotonic times restarted with the machine); the last token is kept, so
 * tokens still grow. Fields added later (identity, times) are optional, so files written by
 * an older version still read, and the version stays 1.
 */
export function parseState(text: string, lockId: string | undefined, boot: string): FileState {
  const raw = JSON.parse(text) as Record<string, unknown>;
  const id = raw.id;
  if (raw.v !== 1 || typeof id !== 'string' || (lockId !== undefined && id !== lockId) || typeof raw.last !== 'string') {
    throw new CorruptStateError(`state file of '${lockId ?? String(id)}' is not a version 1 state of this id`);
  }
  const last = BigInt(raw.last);
  if (raw.boot !== boot) return { lockId: id, boot, last, holders: [], queue: [] };
  const holders = (Array.isArray(raw.holders) ? (raw.holders as Record<string, unknown>[]) : []).map((h): FileHolder => ({
    ownerId: String(h.ownerId),
    kind: kindOf(h.kind),
    token: BigInt(String(h.token)),
    count: Number(h.count),
    ...(isTime(h.permits) ? { permits: h.permits } : {}),
    ...(isTime(h.weight) ? { weight: h.weight } : {}),
    expiresAt: Number(h.expiresAt),
    blocksUntil: Number(h.blocksUntil),
    lockDelayMs: Number(h.lockDelayMs),
    ...(typeof h.identity === 'string' ? { identity: h.identity } : {}),
    ...(isTime(h.acquiredAt) ? { acquiredAt: h.acquiredAt } : {}),
  }));
  const queue = (Array.isArray(raw.queue) ? (raw.queue as Record<string, unknown>[]) : []).map((w): FileWaiter => ({
    id: String(w.id),
    ownerId: typeof w.ownerId === 'string' ? w.ownerId : '',
    kind: kindOf(w.kind),
    fair: w.fair === true,
    permits: Number(w.permits),
    ...(isTime(w.weight) ? { weight: w.weight } : {}),
    expiresAt: Number(w.expiresAt),
    pid: Number(w.pid),
    ns: String(w.ns),
    ...(typeof w.identity === 'string' ? { identity: w.identity } : {}),
    ...(isTime(w.since) ? { since: w.since } : {}),
  }));
  return { lockId: id, boot, last, holders, queue };
}

function isTime(v: unknown): v is number {
  return typeof v === 'number' && Number.isFinite(v);
}

function kindOf(v: unknown): LockKind {
  const k = KINDS.find((x) => x === v);
  if (!k) throw new CorruptStateError(`unknown lock kind '${String(v)}' in a state file`);
  return k;
}

/**
 * Drop holders whose lease (and lock delay) ended and waiters that stopped attempting or
 * whose process is gone. Returns whether anything was dropped.
 */
export function purge(s: FileState, now: number, alive: (pid: number, ns: string) => boolean): boolean {
  const before = s.holders.length + s.queue.length;
  s.holders = s.holders.filter((h) => h.blocksUntil > now);
  s.queue = s.queue.filter((w) => w.expiresAt > now && alive(w.pid, w.ns));
  return s.holders.length + s.queue.length !== before;
}

/**
 * The waiters a grant could go to now, in queue order, as if each took its grant: the
 * memory backend's wake-up rule (a woken waiter that cannot be granted is a wasted attempt).
 */
export function grantable(s: Pick<FileState, 'holders' | 'queue'>): Set<string> {
  const out = new Set<string>();
  if (s.holders.some((h) => exclusive(h.kind))) return out;
  const granted: Weighed[] = [...s.holders];
  const passed: FileWaiter[] = [];
  for (const w of s.queue) {
    if (compatible(granted, w) && queueAllows(w, passed, permitsInUse(granted))) {
      granted.push(w);
      out.add(w.id);
      if (exclusive(w.kind)) return out;
    } else {
      passed.push(w);
      // Nobody behind a blocked exclusive waiter gets in: not in fair order, not a reader.
      if (exclusive(w.kind) && (granted.length > 0 || w.fair)) return out;
      // A full semaphore blocks every later permit, and every other kind beside it; a fair
      // waiter for several permits blocks everyone behind it until they are free together.
      const full = w.kind === 'semaphore' && granted.length > 0 && granted.every((h) => h.kind === 'semaphore');
      if (full && (w.fair || (w.weight ?? 1) === 1)) return out;
    }
  }
  return out;
}

/** The next moment the state changes by itself (a lease or a waiter ends). */
export function nextExpiry(s: Pick<FileState, 'holders' | 'queue'>): number {
  let at = Number.POSITIVE_INFINITY;
  for (const h of s.holders) at = Math.min(at, h.blocksUntil);
  for (const w of s.queue) at = Math.min(at, w.expiresAt);
  return at;
}

/** A lease only ever grows: one client's short renewal must not cut another's re-entered hold. */
export function stretch(h: FileHolder, expiresAt: number): void {
  h.expiresAt = Math.max(h.expiresAt, expiresAt);
  h.blocksUntil = h.expiresAt + h.lockDelayMs;
}

/** A new hold granted at `now` with `token`. */
export function newHolder(req: Ask, token: bigint, now: number): FileHolder {
  const expiresAt = now + req.ttlMs;
  const { ownerId, kind, lockDelayMs, identity } = req;
  const sized = kind === 'semaphore' ? { permits: req.permits, ...((req.weight ?? 1) > 1 ? { weight: req.weight } : {}) } : {};
  return {
    ownerId,
    kind,
    token,
    ...sized,
    count: 1,
    expiresAt,
    blocksUntil: expiresAt + lockDelayMs,
    lockDelayMs,
    identity,
    acquiredAt: now,
  };
}

/**
 * Server-side reentrancy: the same owner holding the same kind re-enters with a count. The
 * hold's lease is stretched to cover the new grant's ttl.
 */
export function reenter(s: FileState, req: Ask, now: number): FileHolder | undefined {
  if (req.kind === 'semaphore') return undefined;
  const mine = s.holders.find((h) => h.ownerId === req.ownerId && h.kind === req.kind && h.expiresAt > now);
  if (!mine) return undefined;
  mine.count += 1;
  stretch(mine, now + req.ttlMs);
  return mine;
}

/** The queue entry of a waiting acquisition, written by its own process. */
export function queued(req: Ask, id: string, expiresAt: number, now: number): FileWaiter {
  const { kind, fair, permits, ownerId, identity } = req;
  const weight = (req.weight ?? 1) > 1 ? { weight: req.weight } : {};
  return { id, ownerId, kind, fair, permits, ...weight, expiresAt, pid: process.pid, ns: pidNamespace(), identity, since: now };
}

/**
 * `locker.list()` and `locker.inspect()`: what a backend reports of its locks, with the
 * stored identities decoded and the lock's kind named, and the cursor of the backend
 * wrapped so that a cursor from another backend (or a hand-made one) is a typed error,
 * never a silent empty page. docs/observability.md, "Listing".
 */
import type { Backend, HolderState, ListPage, LockState, WaiterState } from '../backend.js';
import { MAX_LOCK_ID_BYTES } from '../backend.js';
import { InvalidArgumentError, UnsupportedError } from '../errors.js';
import { unavailable } from '../util/cause.js';
import { decodeIdentity, type Identity } from './identity.js';

/** What a listed lock is: the kind of its holds, or an election's leadership lock. */
export type LockFamily = 'mutex' | 'rw' | 'semaphore' | 'election';

/** One holder, decoded. */
export interface HolderInfo extends Omit<HolderState, 'identity' | 'count'> {
  /** Who holds it (host, pid, name, meta); absent when the writer stored none. */
  readonly identity?: Identity;
  /** Re-entry count (1 when not re-entered or not kept by the backend). */
  readonly count: number;
}

/** One queued waiter, decoded. */
export interface WaiterInfo extends Omit<WaiterState, 'identity'> {
  /** Who waits; absent when the writer stored none. */
  readonly identity?: Identity;
}

/** A lock as `list()` and `inspect()` show it. */
export interface LockInfo {
  readonly lockId: string;
  readonly kind: LockFamily;
  /** The last fencing token issued for this lock, when the backend knows it. */
  readonly lastToken?: bigint;
  readonly holders: readonly HolderInfo[];
  /** How many wait (may exceed `queue.length` where the engine cannot read its queue). */
  readonly waiters: number;
  /** The waiters in queue order, as far as the engine can read them. */
  readonly queue: readonly WaiterInfo[];
}

/** Options of `locker.list()`. */
export interface ListOptions {
  /** Only lock ids that start with this. @default '' */
  readonly prefix?: string;
  /** At most this many locks per page, 1..1000. @default 100 */
  readonly limit?: number;
  /** The `cursor` of the previous page (same locker backend, same prefix). */
  readonly cursor?: string;
  /** Stops the listing. */
  readonly signal?: AbortSignal;
}

/** One page of `locker.list()`. */
export interface ListResult {
  readonly locks: readonly LockInfo[];
  /** Pass it back for the next page; undefined after the last page. */
  readonly cursor: string | undefined;
}

/** Largest page a caller may ask for (every engine can answer this much in one bounded read). */
export const MAX_LIST_LIMIT = 1000;
/** Page size when none is given. */
export const DEFAULT_LIST_LIMIT = 100;
const MAX_CURSOR_CHARS = 8192;
const CURSOR_TAG = 'lsc1.';

/**
 * The owner id an election campaign writes: `participant#` and 12 random base64url chars
 * (election.ts). Owner ids the locker draws contain no `#`, so only an explicit `owner`
 * of exactly this shape could be mistaken for a candidate.
 */
const ELECTION_OWNER = /^[^#]+#[A-Za-z0-9_-]{12}$/;

/** The request a page needs, checked before anything is sent. */
export interface CheckedList {
  readonly prefix: string;
  readonly limit: number;
  /** The caller's (wrapped) cursor. */
  readonly cursor: string | undefined;
}

/** Validate `list()` options (InvalidArgumentError before anything is sent). */
export function checkListOptions(options: ListOptions | undefined): CheckedList {
  if (options !== undefined && (typeof options !== 'object' || options === null)) {
    throw new InvalidArgumentError('options', 'list options must be an object');
  }
  const prefix = checkPrefix(options?.prefix);
  const limit = options?.limit ?? DEFAULT_LIST_LIMIT;
  if (typeof limit !== 'number' || !Number.isInteger(limit) || limit < 1 || limit > MAX_LIST_LIMIT) {
    throw new InvalidArgumentError('limit', `limit must be a whole number in [1, ${MAX_LIST_LIMIT}], got ${String(limit)}`);
  }
  const wrapped = options?.cursor;
  if (wrapped !== undefined && (typeof wrapped !== 'string' || wrapped === '' || wrapped.length > MAX_CURSOR_CHARS)) {
    throw new InvalidArgumentError('cursor', 'cursor must be the non-empty string a previous page returned');
  }
  return { prefix, limit, cursor: wrapped };
}

/** A prefix: a string of at most MAX_LOCK_ID_BYTES UTF-8 bytes (empty: every lock). */
export function checkPrefix(prefix: unknown): string {
  if (prefix === undefined) return '';
  if (typeof prefix !== 'string') throw new InvalidArgumentError('prefix', 'prefix must be a string');
  if (Buffer.byteLength(prefix) > MAX_LOCK_ID_BYTES) {
    throw new InvalidArgumentError('prefix', `prefix must be at most ${MAX_LOCK_ID_BYTES} bytes`);
  }
  return prefix;
}

/** The cursor handed to callers: the backend's own, tagged with the backend and the prefix. */
export function wrapCursor(backend: string, prefix: string, cursor: string | undefined): string | undefined {
  if (cursor === undefined) return undefined;
  return CURSOR_TAG + Buffer.from(JSON.stringify({ b: backend, p: prefix, c: cursor })).toString('base64url');
}

/** The backend's own cursor inside `wrapped`; InvalidArgumentError when it is not one of this backend's for this prefix. */
export function unwrapCursor(backend: string, prefix: string, wrapped: string | undefined): string | undefined {
  if (wrapped === undefined) return undefined;
  let parsed: { b?: unknown; p?: unknown; c?: unknown } | undefined;
  if (wrapped.startsWith(CURSOR_TAG)) {
    try {
      parsed = JSON.parse(Buffer.from(wrapped.slice(CURSOR_TAG.length), 'base64url').toString('utf8')) as typeof parsed;
    } catch {
      parsed = undefined;
    }
  }
  if (!parsed || typeof parsed !== 'object' || typeof parsed.c !== 'string' || typeof parsed.b !== 'string') {
    throw new InvalidArgumentError('cursor', 'not a cursor of locker.list(): pass back the cursor a previous page returned');
  }
  if (parsed.b !== backend) {
    throw new InvalidArgumentError('cursor', `this cursor is from the ${parsed.b} backend, not ${backend}`, {
      context: { from: parsed.b },
    });
  }
  if (parsed.p !== prefix) throw new InvalidArgumentError('cursor', 'this cursor was made for another prefix');
  return parsed.c;
}

/** One page from `backend`, decoded, its cursor wrapped. */
export async function listPage(backend: Backend, checked: CheckedList, signal: AbortSignal): Promise<ListResult> {
  if (!backend.list) throw new UnsupportedError(backend.name, 'listing locks');
  const cursor = unwrapCursor(backend.name, checked.prefix, checked.cursor);
  let page: ListPage;
  try {
    page = await backend.list({ prefix: checked.prefix, limit: checked.limit, cursor, signal });
  } catch (err) {
    throw unavailable(backend.name, `listing locks under '${checked.prefix}'`, err);
  }
  return { locks: page.locks.map(decodeState), cursor: wrapCursor(backend.name, checked.prefix, page.cursor) };
}

/** A backend's lock state with identities decoded and the lock's family named. */
export function decodeState(state: LockState): LockInfo {
  const holders = state.holders.map(decodeHolder);
  const queue = (state.queue ?? []).map(decodeWaiter);
  return {
    lockId: state.lockId,
    kind: familyOf(state),
    ...(state.lastToken === undefined ? {} : { lastToken: state.lastToken }),
    holders,
    waiters: Math.max(state.waiters, queue.length),
    queue,
  };
}

function decodeHolder(h: HolderState): HolderInfo {
  const { identity, count, ...rest } = h;
  const who = decodeIdentity(identity);
  return { ...rest, count: count ?? 1, ...(who ? { identity: who } : {}) };
}

function decodeWaiter(w: WaiterState): WaiterInfo {
  const { identity, ...rest } = w;
  const who = decodeIdentity(identity);
  return { ...rest, ...(who ? { identity: who } : {}) };
}

/** rw when a read or write hold or wait is seen, semaphore likewise; mutex holds of an election's owner ids are an election. */
export function familyOf(state: LockState): LockFamily {
  const all: { kind: string; ownerId: string }[] = [...state.holders, ...(state.queue ?? [])];
  if (all.some((x) => x.kind === 'read' || x.kind === 'write')) return 'rw';
  if (all.some((x) => x.kind === 'semaphore')) return 'semaphore';
  if (all.length > 0 && all.every((x) => ELECTION_OWNER.test(x.ownerId))) return 'election';
  return 'mutex';
}

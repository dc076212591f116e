/**
 * Sessions of the service, kept in the backend (docs/serve.md, "Design"): a session is the
 * record `locksmith-serve/s/<id>` whose lease is the session's ttl, and each of its holds
 * has a marker `locksmith-serve/h/<id>/<hash>` that says what the hold is (lock id, kind,
 * token, the backend's grant data). A keepalive, served by any replica, renews the record
 * and extends every hold by the ttl: a session that stops keeping alive loses its holds
 * when their leases end, with no timer in any replica.
 */
import { createHash } from 'node:crypto';
import type { Backend, Grant } from '../backend.js';
import { LocksmithError, isLocksmithError } from '../errors.js';
import type { HolderInfo } from '../observe/list.js';
import type { JsonValue } from '../observe/identity.js';
import type { Locker } from '../locker.js';
import { encodeIdentity, randomId, Records, RESERVED_PREFIX } from './records.js';

/** How long a hold's marker lives before a keepalive rolls it (it is rolled at half). */
export const MARKER_TTL_MS = 3_600_000;

/** A session as read back from its record. */
export interface SessionInfo {
  readonly id: string;
  readonly name: string;
  readonly ttlMs: number;
  /** Who created it (the bearer token's name), when the service has tokens. */
  readonly client?: string;
  readonly meta?: { readonly [key: string]: JsonValue };
  /** The record's current holders (rolled away by the next keepalive). */
  readonly owners: readonly string[];
}

/** One hold a session made, as its marker remembers it. */
export interface HoldInfo {
  readonly lockId: string;
  readonly token: bigint;
  readonly grant: Grant;
  readonly requestId?: string;
  readonly markerId: string;
  readonly markerOwners: readonly string[];
  readonly markerLeftMs: number | undefined;
}

/** An HTTP-level error: a status and a stable code (docs/serve.md, "Errors"). */
export class ServeError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

/** The unknown-or-expired session error. */
export function noSession(id: string): ServeError {
  return new ServeError(404, 'SESSION_NOT_FOUND', `session '${id}' does not exist or has expired`);
}

const sessionLock = (id: string): string => `${RESERVED_PREFIX}s/${id}`;
const markerPrefix = (id: string): string => `${RESERVED_PREFIX}h/${id}/`;
const INDEX_PREFIX = `${RESERVED_PREFIX}i/`;
/**
 * On backends with semaphores a session's holds are the holders of ONE record, its index
 * (a semaphore of this many permits): a keepalive reads them with one `inspect` instead of
 * a listing by prefix, which on Redis is a SCAN of the whole keyspace (docs/serve.md, "Design").
 */
const INDEX_PERMITS = 100_000;
const indexLock = (id: string): string => `${INDEX_PREFIX}${id}`;
const permitsOf = (record: string): number => (record.startsWith(INDEX_PREFIX) ? INDEX_PERMITS : 2);

/** The marker id of the hold (session, lock, token): found again without a listing. */
export function markerId(session: string, lockId: string, token: bigint): string {
  const h = createHash('sha256').update(`${lockId}\u0000${token}`).digest('base64url').slice(0, 22);
  return `${markerPrefix(session)}${h}`;
}

const live = (h: HolderInfo): boolean => h.expiresInMs === undefined || h.expiresInMs > 0;
/** The live holders, the one whose lease ends first first (the one a full record's roll removes). */
const liveByEnd = (holders: readonly HolderInfo[]): HolderInfo[] =>
  holders.filter(live).sort((a, b) => (a.expiresInMs ?? Infinity) - (b.expiresInMs ?? Infinity));

/** Sessions and hold markers over one locker's backend. */
export class Sessions {
  readonly #locker: Locker;
  readonly #backend: Backend;
  readonly #records: Records;
  /** Holds are kept in one index record per session (else one marker per hold, listed by prefix). */
  readonly #indexed: boolean;

  constructor(locker: Locker, backend: Backend) {
    this.#locker = locker;
    this.#backend = backend;
    this.#records = new Records(backend);
    this.#indexed = backend.capabilities.permits;
  }

  /** Create a session record; its id is random. */
  async create(ttlMs: number, name: string | undefined, meta: SessionInfo['meta'], client: string | undefined): Promise<SessionInfo> {
    const id = randomId();
    const info = { id, name: name ?? 'session', ttlMs, owners: [], ...(meta ? { meta } : {}), ...(client ? { client } : {}) };
    await this.#records.write(sessionLock(id), id, ttlMs, sessionIdentity(info));
    return info;
  }

  /** The session, or SESSION_NOT_FOUND once it expired or was deleted. */
  async get(id: string): Promise<SessionInfo> {
    const state = await this.#locker.inspect(sessionLock(id));
    const holders = liveByEnd(state.holders);
    const m = holders[0]?.identity?.meta;
    if (!m || typeof m.t !== 'number') throw noSession(id);
    return {
      id,
      name: holders[0]?.identity?.name ?? 'session',
      ttlMs: m.t,
      owners: holders.map((h) => h.ownerId),
      ...(typeof m.c === 'string' ? { client: m.c } : {}),
      ...(isObject(m.u) ? { meta: m.u } : {}),
    };
  }

  /** How many live sessions `client` has (a listing of every session record). */
  async count(client: string): Promise<number> {
    let n = 0;
    let cursor: string | undefined;
    do {
      const page = await this.#locker.list({ prefix: `${RESERVED_PREFIX}s/`, limit: 1000, ...(cursor ? { cursor } : {}) });
      n += page.locks.filter((l) => l.holders.some((h) => live(h) && h.identity?.meta?.c === client)).length;
      cursor = page.cursor;
    } while (cursor !== undefined);
    return n;
  }

  /**
   * Renew the record and extend every hold by the ttl; reports the holds that were gone.
   * `known`: the session as the route just read it (not read again).
   */
  async keepalive(id: string, known?: SessionInfo): Promise<{ session: SessionInfo; holds: number; lost: HoldInfo[] }> {
    // The holds are read with the session: a hold made after this read has a whole ttl anyway.
    const [session, current] = await Promise.all([known ?? this.get(id), this.holds(id)]);
    await this.#records.roll(sessionLock(id), id, session.ttlMs, sessionIdentity(session), session.owners);
    const lost: HoldInfo[] = [];
    let holds = 0;
    for (const hold of current) {
      try {
        await this.#backend.extend(hold.grant, session.ttlMs);
        holds += 1;
        if (hold.markerLeftMs !== undefined && hold.markerLeftMs < MARKER_TTL_MS / 2) await this.#rollMarker(hold);
      } catch (err) {
        if (!isLocksmithError(err, 'LOCK_LOST')) throw err;
        lost.push(hold);
        await this.#records.removeOwners(hold.markerId, hold.markerOwners, permitsOf(hold.markerId));
      }
    }
    return { session, holds, lost };
  }

  /** Release every hold, then remove the record. */
  async remove(id: string): Promise<number> {
    const session = await this.get(id);
    let released = 0;
    for (const hold of await this.holds(id)) {
      if (await this.#backend.release(hold.grant)) released += 1;
      await this.#records.removeOwners(hold.markerId, hold.markerOwners, permitsOf(hold.markerId));
    }
    await this.#records.removeOwners(sessionLock(id), session.owners);
    return released;
  }

  /** Remember a hold the session obtained (its marker). */
  async remember(session: SessionInfo, grant: Grant, requestId: string | undefined): Promise<void> {
    const id = this.#indexed ? indexLock(session.id) : markerId(session.id, grant.lockId, grant.token);
    const ok = await this.#records.write(id, grant.ownerId, MARKER_TTL_MS, holdIdentity(grant, requestId), permitsOf(id));
    if (!ok) throw new LocksmithError('BACKEND_UNAVAILABLE', `could not record the hold of '${grant.lockId}'`);
  }

  /** Forget a hold (its marker), after its release or loss. */
  async forget(hold: HoldInfo): Promise<void> {
    await this.#records.removeOwners(hold.markerId, hold.markerOwners, permitsOf(hold.markerId));
  }

  /** One hold of the session by lock and token, or undefined. */
  async hold(session: string, lockId: string, token: bigint): Promise<HoldInfo | undefined> {
    if (this.#indexed) return (await this.holds(session)).find((h) => h.lockId === lockId && h.token === token);
    const id = markerId(session, lockId, token);
    const state = await this.#locker.inspect(id);
    return readMarker(id, state.holders);
  }

  /** Every hold of the session, read from its markers (all pages). */
  async holds(session: string): Promise<HoldInfo[]> {
    if (this.#indexed) return readIndex(indexLock(session), (await this.#locker.inspect(indexLock(session))).holders);
    const out: HoldInfo[] = [];
    let cursor: string | undefined;
    do {
      const page = await this.#locker.list({ prefix: markerPrefix(session), limit: 1000, ...(cursor ? { cursor } : {}) });
      for (const l of page.locks) {
        const hold = readMarker(l.lockId, l.holders);
        if (hold) out.push(hold);
      }
      cursor = page.cursor;
    } while (cursor !== undefined);
    return out;
  }

  async #rollMarker(hold: HoldInfo): Promise<void> {
    const identity = holdIdentity(hold.grant, hold.requestId);
    await this.#records.roll(hold.markerId, hold.grant.ownerId, MARKER_TTL_MS, identity, hold.markerOwners, permitsOf(hold.markerId));
  }
}

function sessionIdentity(s: Omit<SessionInfo, 'owners'>): string {
  return encodeIdentity(s.name, { t: s.ttlMs, ...(s.client ? { c: s.client } : {}), ...(s.meta ? { u: s.meta } : {}) });
}

function holdIdentity(g: Grant, requestId: string | undefined): string {
  const meta: { [key: string]: JsonValue } = { l: g.lockId, k: g.kind, t: g.token.toString(), o: g.ownerId };
  if (g.data !== undefined) meta.d = g.data as JsonValue;
  if (requestId !== undefined) meta.r = requestId;
  return encodeIdentity('hold', meta);
}

/** The hold a marker describes; undefined when the marker is gone or unreadable. */
function readMarker(id: string, holders: readonly HolderInfo[]): HoldInfo | undefined {
  const alive = liveByEnd(holders);
  const m = alive[0]?.identity?.meta;
  if (!m || typeof m.l !== 'string' || typeof m.t !== 'string' || typeof m.o !== 'string' || typeof m.k !== 'string') return undefined;
  const token = BigInt(m.t);
  const kind = m.k as Grant['kind'];
  const grant: Grant = { lockId: m.l, kind, ownerId: m.o, token, ttlMs: 0, reentered: false, data: m.d };
  const left = alive[alive.length - 1]?.expiresInMs;
  return {
    lockId: m.l,
    token,
    grant,
    markerId: id,
    markerOwners: alive.map((h) => h.ownerId),
    markerLeftMs: left,
    ...(typeof m.r === 'string' ? { requestId: m.r } : {}),
  };
}

/** The holds an index record lists: its holders grouped by hold (a roll leaves two for a moment). */
function readIndex(id: string, holders: readonly HolderInfo[]): HoldInfo[] {
  const byHold = new Map<string, HolderInfo[]>();
  for (const h of holders) {
    const m = h.identity?.meta;
    const key = `${String(m?.l)}\u0000${String(m?.t)}`;
    byHold.set(key, [...(byHold.get(key) ?? []), h]);
  }
  return [...byHold.values()].flatMap((group) => readMarker(id, group) ?? []);
}

function isObject(v: unknown): v is { readonly [key: string]: JsonValue } {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

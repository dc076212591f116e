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
import type { JsonValue } from '../observe/identity.js';
import type { Locker } from '../locker.js';
import { BoundedMap } from '../util/bounded-map.js';
import { Intents, type Lasting } from './intents.js';
import {
  holdIdentity,
  intentIdentity,
  isRecord,
  live,
  liveByEnd,
  readIndex,
  readMarker,
  type HoldInfo,
  type IntentInfo,
} from './markers.js';
import { encodeIdentity, randomId, Records, RESERVED_PREFIX } from './records.js';

/** How long a hold's marker lives by default; a keepalive rolls it in its second half (ms). */
export const MARKER_TTL_MS = 3_600_000;

/** A session as read back from its record. */
export interface SessionInfo {
  readonly id: string;
  readonly name: string;
  readonly ttlMs: number;
  /** Who created it (the bearer token's name), when the service has tokens. */
  readonly client?: string;
  readonly meta?: { readonly [key: string]: JsonValue };
  /** The record's current holders. */
  readonly owners: readonly string[];
  /** The session's holds, when the read that found the session had them (its index): its full markers. */
  readonly holds?: readonly HoldInfo[];
  /** The session's intents (intents.ts), read with `holds`: resolved into holds when needed. */
  readonly intents?: readonly IntentInfo[];
  /** The record holder's grant, as the session's own marker keeps it: renewed in place. */
  readonly own?: HoldInfo;
}

export type { HoldInfo } from './markers.js';

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
 * On backends with semaphores a session is ONE record, its index (a semaphore of this many
 * permits): its holders are the session's record, the record's own marker and one marker
 * per hold, all read with one `inspect` (docs/serve.md, "Design").
 */
const INDEX_PERMITS = 100_000;
const indexLock = (id: string): string => `${INDEX_PREFIX}${id}`;
const permitsOf = (record: string): number => (record.startsWith(INDEX_PREFIX) ? INDEX_PERMITS : 2);
/**
 * A session's record and holds are given leases of its ttl plus this share of it, and a
 * replica that renewed a session answers its keepalives from memory for this share of the
 * ttl: whichever replica answers, the record and every hold then outlive the last keepalive
 * by at least the ttl, and by at most 1.25 ttls (docs/serve.md, "Design").
 */
export const RENEW_SLACK = 0.25;
/** The lease a session's record and holds are given: its ttl and the slack. */
export const leaseOf = (ttlMs: number): number => Math.ceil(ttlMs * (1 + RENEW_SLACK));
/** How many sessions' fixed attributes a replica keeps (Sessions.#known). */
const MAX_KNOWN = 100_000;

/** The marker id of the hold (session, lock, token): found again without a listing. */
export function markerId(session: string, lockId: string, token: bigint): string {
  const h = createHash('sha256').update(`${lockId}\u0000${token}`).digest('base64url').slice(0, 22);
  return `${markerPrefix(session)}${h}`;
}

/** Sessions and hold markers over one locker's backend. */
export class Sessions {
  readonly #locker: Locker;
  readonly #backend: Backend;
  readonly #records: Records;
  /** A session is its index record (else a record plus one marker per hold, listed by prefix). */
  readonly #indexed: boolean;
  /**
   * The fixed attributes (name, ttl, client, meta) of sessions this replica saw alive: what
   * lets an acquire attempt go out beside the session's read (docs/serve.md, "Design").
   */
  readonly #known = new BoundedMap<string, SessionInfo>(MAX_KNOWN);
  /**
   * Sessions this replica wrote or renewed: until when (performance.now()) their record
   * surely outlives a ttl, and their holds' count then (undefined once they changed here).
   */
  readonly #renewed = new BoundedMap<string, { readonly until: number; readonly holds: number | undefined }>(MAX_KNOWN);
  readonly #intents: Intents;
  /** How long a marker lives (a keepalive rolls it once less than half is left). */
  readonly markerTtlMs: number;

  constructor(locker: Locker, backend: Backend, markerTtlMs = MARKER_TTL_MS) {
    this.#locker = locker;
    this.#backend = backend;
    this.markerTtlMs = markerTtlMs;
    this.#records = new Records(backend);
    this.#indexed = backend.capabilities.permits;
    this.#intents = new Intents(
      backend,
      {
        write: async (session, lockId) => {
          const id = indexLock(session);
          const marker = await this.#records.writeGrant(id, session, this.markerTtlMs, intentIdentity(lockId), INDEX_PERMITS);
          if (!marker) throw new LocksmithError('BACKEND_UNAVAILABLE', `could not record the hold of '${lockId}'`);
          return { lockId, markerId: id, markerOwners: [marker.ownerId], markerLeftMs: this.markerTtlMs };
        },
        remove: (intent) => this.forget(intent),
      },
      markerTtlMs,
    );
  }

  /** Stop this replica's background work on intents (the service closes). */
  close(): void {
    this.#intents.close();
  }

  /** Whether a session's one read has its holds (an index record). */
  get indexed(): boolean {
    return this.#indexed;
  }

  #record(id: string): string {
    return this.#indexed ? indexLock(id) : sessionLock(id);
  }

  /** Create a session record (and, in an index, its own marker); its id is random. */
  async create(ttlMs: number, name: string | undefined, meta: SessionInfo['meta'], client: string | undefined): Promise<SessionInfo> {
    const id = randomId();
    const info = { id, name: name ?? 'session', ttlMs, owners: [], ...(meta ? { meta } : {}), ...(client ? { client } : {}) };
    const record = this.#record(id);
    const started = performance.now();
    const grant = await this.#records.writeGrant(record, id, leaseOf(ttlMs), sessionIdentity(info), permitsOf(record));
    if (!grant) throw new LocksmithError('BACKEND_UNAVAILABLE', `could not write the record of session '${id}'`);
    if (this.#indexed) await this.#mark(record, grant, undefined);
    this.#remember(info);
    this.#renewed.set(id, { until: started + ttlMs * RENEW_SLACK, holds: 0 });
    return info;
  }

  /** The session's fixed attributes when this replica saw it alive and `client` is its client. */
  known(id: string, client: string | undefined): SessionInfo | undefined {
    const s = this.#known.get(id);
    return s !== undefined && (client === undefined || s.client === client) ? s : undefined;
  }

  /** The session (with its holds, where one read has them), or SESSION_NOT_FOUND once it expired or was deleted. */
  async get(id: string): Promise<SessionInfo> {
    const record = this.#record(id);
    const holders = liveByEnd((await this.#locker.inspect(record)).holders);
    const records = holders.filter(isRecord);
    const first = records[0];
    if (first === undefined) throw noSession(id);
    const m = first.identity?.meta ?? {};
    const owners = records.map((h) => h.ownerId);
    const info: SessionInfo = {
      id,
      name: first.identity?.name ?? 'session',
      ttlMs: m.t as number,
      owners,
      ...(typeof m.c === 'string' ? { client: m.c } : {}),
      ...(isObject(m.u) ? { meta: m.u } : {}),
    };
    this.#remember(info);
    if (!this.#indexed) return info;
    const { holds, intents } = readIndex(record, holders);
    // The record's own marker, when it names a holder the record has (a fallback roll replaces it).
    const own = holds.find((h) => h.lockId === record && owners.includes(h.grant.ownerId));
    return { ...info, holds: holds.filter((h) => h.lockId !== record), intents, ...(own ? { own } : {}) };
  }

  /**
   * The session's holds as read with it: its full markers and the holds its intents (of
   * `lockId` only, when given) stand for, read from their locks (intents.ts); `stale`: the
   * intents that stand for none.
   */
  async resolve(session: SessionInfo, lockId?: string): Promise<{ held: HoldInfo[]; stale: IntentInfo[] }> {
    const intents = (session.intents ?? []).filter((i) => lockId === undefined || i.lockId === lockId);
    const { held, stale } = intents.length === 0 ? { held: [], stale: [] } : await this.#intents.resolve(session.id, intents);
    // A hold with a full marker (a Redis semaphore permit) is not read back from an intent too.
    const full = new Set((session.holds ?? []).map((h) => h.grant.ownerId));
    return { held: [...(session.holds ?? []), ...held.filter((h) => !full.has(h.grant.ownerId))], stale };
  }

  #remember(info: SessionInfo): void {
    if (this.#known.has(info.id)) return;
    // What a request needs (id, name, ttl, client): the meta, up to a kilobyte, is not kept.
    const { holds: _h, own: _o, meta: _m, ...fixed } = info;
    this.#known.set(info.id, { ...fixed, owners: [] });
  }

  /** How many live sessions `client` has (a listing of every session record). */
  async count(client: string): Promise<number> {
    let n = 0;
    let cursor: string | undefined;
    const prefix = this.#indexed ? INDEX_PREFIX : `${RESERVED_PREFIX}s/`;
    do {
      const page = await this.#locker.list({ prefix, limit: 1000, ...(cursor ? { cursor } : {}) });
      n += page.locks.filter((l) => l.holders.some((h) => live(h) && isRecord(h) && h.identity?.meta?.c === client)).length;
      cursor = page.cursor;
    } while (cursor !== undefined);
    return n;
  }

  /**
   * Renew the record and extend every hold by the ttl, all at once; reports the holds that
   * were gone. `known`: the session as the route just read it (not read again).
   */
  async keepalive(id: string, known?: SessionInfo): Promise<{ session: SessionInfo; holds: number; lost: HoldInfo[] }> {
    const started = performance.now();
    // The holds are read with the session: a hold made after this read has a whole lease anyway.
    const [session, listed] = await Promise.all([known ?? this.get(id), this.#indexed ? undefined : this.holds(id)]);
    const current: HoldInfo[] = listed ?? (await this.resolve(session)).held;
    const [renewed, ...extended] = await Promise.allSettled([
      this.#renew(session),
      ...current.map((h) => this.#backend.extend(h.grant, leaseOf(session.ttlMs))),
    ]);
    if (renewed?.status === 'rejected') {
      if (!isLocksmithError(renewed.reason, 'LOCK_LOST')) throw renewed.reason;
      // The record ended between the read and its renewal: so did the session, and its holds.
      await Promise.all(current.map((h) => this.#backend.release(h.grant).catch(() => false)));
      throw noSession(id);
    }
    const lost: HoldInfo[] = [];
    let holds = 0;
    for (const [i, r] of extended.entries()) {
      const hold = current[i] as HoldInfo;
      if (r.status === 'fulfilled') {
        holds += 1;
        if (this.#rollDue(hold)) await this.#rollMarker(hold);
      } else {
        if (!isLocksmithError(r.reason, 'LOCK_LOST')) throw r.reason;
        lost.push(hold);
        await this.forget(hold);
      }
    }
    this.#renewed.set(id, { until: started + session.ttlMs * RENEW_SLACK, holds });
    return { session, holds, lost };
  }

  /**
   * A keepalive answered from memory: the session's fixed attributes and its holds as of
   * this replica's renewal, when that was less than RENEW_SLACK × ttl ago (the record and
   * the holds then have more than a ttl left); undefined when a renewal is due.
   */
  recent(id: string, client: string | undefined): { session: SessionInfo; holds: number } | undefined {
    const r = this.#renewed.get(id);
    const session = this.alive(id, client);
    return r?.holds !== undefined && session !== undefined ? { session, holds: r.holds } : undefined;
  }

  /**
   * The session's fixed attributes, with no read, when this replica wrote or renewed its
   * record less than RENEW_SLACK × ttl ago (so that it has more than a ttl left, unless it
   * was deleted through another replica meanwhile: docs/serve.md, "Design").
   */
  alive(id: string, client: string | undefined): SessionInfo | undefined {
    const r = this.#renewed.get(id);
    return r !== undefined && performance.now() < r.until ? this.known(id, client) : undefined;
  }

  /** The session's holds changed through this replica: its next keepalive renews (and counts) again. */
  changed(id: string): void {
    const r = this.#renewed.get(id);
    if (r !== undefined && r.holds !== undefined) this.#renewed.set(id, { until: r.until, holds: undefined });
  }

  /** Renew the record: in place by its own marker's grant, else (no marker) by rolling it. */
  async #renew(session: SessionInfo): Promise<void> {
    const own = session.own;
    if (own === undefined) {
      const record = this.#record(session.id);
      const lease = leaseOf(session.ttlMs);
      await this.#records.roll(record, session.id, lease, sessionIdentity(session), session.owners, permitsOf(record));
      return;
    }
    await this.#backend.extend(own.grant, leaseOf(session.ttlMs));
    if (this.#rollDue(own)) await this.#rollMarker(own);
  }

  /** Release every hold, then remove the record. */
  async remove(id: string): Promise<number> {
    const session = await this.get(id);
    const held = this.#indexed ? (await this.resolve(session)).held : await this.holds(id);
    let released = 0;
    for (const hold of held) {
      if (await this.#backend.release(hold.grant)) released += 1;
      await this.forget(hold);
    }
    // The session ends: its intents go too (a hold's forget leaves them, other acquisitions may use them).
    await Promise.all((session.intents ?? []).map((i) => this.forget(i)));
    if (session.own) await this.forget(session.own);
    const record = this.#record(id);
    await this.#records.removeOwners(record, session.owners, permitsOf(record));
    this.#known.delete(id);
    this.#renewed.delete(id);
    return released;
  }

  /** Remember a hold the session obtained (its marker); what it wrote, for a release by this replica. */
  async remember(session: SessionInfo, grant: Grant, requestId: string | undefined): Promise<HoldInfo> {
    const id = this.#indexed ? indexLock(session.id) : markerId(session.id, grant.lockId, grant.token);
    return this.#mark(id, grant, requestId);
  }

  /** Whether an acquire of `kind` writes an intent beside its first attempt (else its marker after the grant). */
  intends(kind: Grant['kind']): boolean {
    return this.#indexed && this.#intents.uses(kind);
  }

  /** The session's intent for `lockId`, for one acquisition (intents.ts); given back by {@link done}. */
  use(session: string, lockId: string): Lasting {
    return this.#intents.use(session, lockId);
  }

  /** An acquisition under `intent` failed, or its hold was released through this replica. */
  done(session: string, lockId: string, intent: Lasting): void {
    this.#intents.done(session, lockId, intent);
  }

  async #mark(id: string, grant: Grant, requestId: string | undefined): Promise<HoldInfo> {
    const marker = await this.#records.writeGrant(id, grant.ownerId, this.markerTtlMs, holdIdentity(grant, requestId), permitsOf(id));
    if (!marker) throw new LocksmithError('BACKEND_UNAVAILABLE', `could not record the hold of '${grant.lockId}'`);
    const hold = {
      lockId: grant.lockId,
      token: grant.token,
      grant,
      markerId: id,
      markerOwners: [marker.ownerId],
      markerLeftMs: this.markerTtlMs,
    };
    return requestId === undefined ? hold : { ...hold, requestId };
  }

  /**
   * Forget a hold (its full marker), after its release or loss, or remove an intent. A hold
   * read back from an intent leaves the intent: other acquisitions of the lock may use it.
   */
  async forget(marker: HoldInfo | IntentInfo): Promise<void> {
    if ('grant' in marker && marker.intent === true) return;
    await this.#records.removeOwners(marker.markerId, marker.markerOwners, permitsOf(marker.markerId));
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
    if (this.#indexed) {
      const record = indexLock(session);
      const { holds, intents } = readIndex(record, liveByEnd((await this.#locker.inspect(record)).holders));
      const info = { id: session, name: '', ttlMs: 0, owners: [], holds: holds.filter((h) => h.lockId !== record), intents };
      return (await this.resolve(info)).held;
    }
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

  /** Whether a keepalive rolls this marker: less than half of its life is left. */
  #rollDue(hold: HoldInfo): boolean {
    return hold.markerLeftMs !== undefined && hold.markerLeftMs < this.markerTtlMs / 2;
  }

  /** Roll a marker as what it is: an intent stays one (left behind, it means nothing). */
  async #rollMarker(hold: HoldInfo): Promise<void> {
    const g = hold.grant;
    const identity = hold.intent ? intentIdentity(g.lockId) : holdIdentity(g, hold.requestId);
    await this.#records.roll(hold.markerId, hold.grant.ownerId, this.markerTtlMs, identity, hold.markerOwners, permitsOf(hold.markerId));
  }
}

function sessionIdentity(s: Omit<SessionInfo, 'owners'>): string {
  return encodeIdentity(s.name, { t: s.ttlMs, ...(s.client ? { c: s.client } : {}), ...(s.meta ? { u: s.meta } : {}) });
}

function isObject(v: unknown): v is { readonly [key: string]: JsonValue } {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/**
 * A session's markers as written and read back (docs/serve.md, "Design"): a marker is a
 * holder of the session's index (or, without semaphores, of its own record) whose identity
 * says what the hold is. A full marker has the token and the backend's grant data; an
 * intent (intents.ts) only the lock, kind and owner id, written before the token is known.
 */
import type { Grant } from '../backend.js';
import type { HolderInfo } from '../observe/list.js';
import type { JsonValue } from '../observe/identity.js';
import { encodeIdentity } from './records.js';

/** One hold a session made, as its marker remembers it. */
export interface HoldInfo {
  readonly lockId: string;
  readonly token: bigint;
  readonly grant: Grant;
  readonly requestId?: string;
  readonly markerId: string;
  readonly markerOwners: readonly string[];
  readonly markerLeftMs: number | undefined;
  /** The marker is an intent (intents.ts): the token was read back, not written down. */
  readonly intent?: true;
}

/** What an intent marker says, as read back from the session's index (every holder of one lock's intent). */
export interface IntentInfo {
  readonly lockId: string;
  readonly markerId: string;
  readonly markerOwners: readonly string[];
  readonly markerLeftMs: number | undefined;
}

/** A holder whose lease has not ended (or has no known end). */
export const live = (h: HolderInfo): boolean => h.expiresInMs === undefined || h.expiresInMs > 0;
/** The live holders, the one whose lease ends first first (the one a full record's roll removes). */
export const liveByEnd = (holders: readonly HolderInfo[]): HolderInfo[] =>
  holders.filter(live).sort((a, b) => (a.expiresInMs ?? Infinity) - (b.expiresInMs ?? Infinity));
/** A session record's holder (its meta has the ttl as a number; a marker's `t` is a token string). */
export const isRecord = (h: HolderInfo): boolean => typeof h.identity?.meta?.t === 'number';

/** The identity of a full marker: lock, kind, token, owner, grant data, request id. */
export function holdIdentity(g: Grant, requestId: string | undefined): string {
  const meta: { [key: string]: JsonValue } = { l: g.lockId, k: g.kind, t: g.token.toString(), o: g.ownerId };
  if (g.data !== undefined) meta.d = g.data as JsonValue;
  if (requestId !== undefined) meta.r = requestId;
  return encodeIdentity('hold', meta);
}

/** The identity of an intent: a marker that names only its lock (intents.ts). */
export function intentIdentity(lockId: string): string {
  return encodeIdentity('hold', { l: lockId });
}

/** A marker read back: a hold (full marker) or an intent. */
type Marker = { readonly hold: HoldInfo } | { readonly intent: IntentInfo };

/** What the live holders of one marker say; undefined when the marker is gone or unreadable. */
function readOne(id: string, holders: readonly HolderInfo[]): Marker | undefined {
  const alive = liveByEnd(holders);
  const m = alive[0]?.identity?.meta;
  if (!m || typeof m.l !== 'string') return undefined;
  const marker = { markerId: id, markerOwners: alive.map((h) => h.ownerId), markerLeftMs: alive[alive.length - 1]?.expiresInMs };
  if (m.t === undefined) return { intent: { lockId: m.l, ...marker } };
  if (typeof m.o !== 'string' || typeof m.k !== 'string' || typeof m.t !== 'string') return undefined;
  const token = BigInt(m.t);
  const grant: Grant = { lockId: m.l, kind: m.k as Grant['kind'], ownerId: m.o, token, ttlMs: 0, reentered: false, data: m.d };
  return { hold: { lockId: m.l, token, grant, ...marker, ...(typeof m.r === 'string' ? { requestId: m.r } : {}) } };
}

/** The hold a (per-hold, full) marker describes; undefined when the marker is gone or unreadable. */
export function readMarker(id: string, holders: readonly HolderInfo[]): HoldInfo | undefined {
  const marker = readOne(id, holders);
  return marker !== undefined && 'hold' in marker ? marker.hold : undefined;
}

/**
 * The markers among an index record's holders (the record's own marker included), grouped
 * by hold (a roll leaves two holders for a moment): full markers, and intents by lock (each
 * replica that acquired the lock for the session may have written its own).
 */
export function readIndex(id: string, holders: readonly HolderInfo[]): { holds: HoldInfo[]; intents: IntentInfo[] } {
  const byHold = new Map<string, HolderInfo[]>();
  for (const h of holders) {
    if (isRecord(h)) continue;
    const m = h.identity?.meta;
    const key = m?.t === undefined ? `${String(m?.l)}\u0000~` : `${String(m.l)}\u0000${String(m.t)}`;
    byHold.set(key, [...(byHold.get(key) ?? []), h]);
  }
  const holds: HoldInfo[] = [];
  const intents: IntentInfo[] = [];
  for (const group of byHold.values()) {
    const marker = readOne(id, group);
    if (marker === undefined) continue;
    if ('hold' in marker) holds.push(marker.hold);
    else intents.push(marker.intent);
  }
  return { holds, intents };
}

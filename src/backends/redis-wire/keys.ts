/**
 * Where one lock lives in Redis: every key of a lock carries the same `{hash tag}`, so a
 * Redis Cluster keeps them in one slot and one script may touch them all. What each key
 * holds: docs/backends/redis.md, "How it works" (Redis) and docs/backends/redlock.md,
 * "The algorithm" (Redlock).
 */
import { createHash } from 'node:crypto';
import { BoundedMap } from '../kit.js';

/** The keys of one lock, in the order every script takes them: h x t q qx qw qs. */
export type LockKeys = readonly [string, string, string, string, string, string, string];

/**
 * The base of every key of `lockId`: `prefix{tag}`. The tag is the lockId itself unless it
 * contains a brace (which would cut the hash tag short, or leave it empty and split a lock's
 * keys over slots); then it is `{` + SHA-1 hex, which no brace-free lockId can equal.
 */
export function keyBase(prefix: string, lockId: string): string {
  const tag = /[{}]/.test(lockId) ? `{${createHash('sha1').update(lockId, 'utf8').digest('hex')}` : lockId;
  return `${prefix}{${tag}}`;
}

/** Every key of `lockId` under `prefix`. */
export function lockKeys(prefix: string, lockId: string): LockKeys {
  const b = keyBase(prefix, lockId);
  return [`${b}:h`, `${b}:x`, `${b}:t`, `${b}:q`, `${b}:qx`, `${b}:qw`, `${b}:qs`];
}

/**
 * The keys of recently used lock ids under one prefix, kept built: building them (a regex
 * test and seven strings) on every attempt and release was a measurable share of an
 * uncontended cycle's client side (docs/benchmarks.md). Bounded: emptied when full.
 */
export class LockKeyCache {
  readonly #prefix: string;
  readonly #keys = new Map<string, LockKeys>();
  readonly #who = new WhoRecords();

  constructor(prefix: string) {
    this.#prefix = prefix;
  }

  /** The keys of `lockId` (h x t q qx qw qs). */
  of(lockId: string): LockKeys {
    let keys = this.#keys.get(lockId);
    if (keys) return keys;
    if (this.#keys.size >= 1_024) this.#keys.clear();
    keys = lockKeys(this.#prefix, lockId);
    this.#keys.set(lockId, keys);
    return keys;
  }

  /** The holder's record ({@link whoRecord}) of `identity` for `lockId`, as this cache's backend sends it. */
  who(lockId: string, identity: string): string {
    return this.#who.of(lockId, identity);
  }
}

/** Every key of the lock whose keys start with `base` (a {@link keyBase}), as found by SCAN. */
export function keysAt(base: string): LockKeys {
  return [`${base}:h`, `${base}:x`, `${base}:t`, `${base}:q`, `${base}:qx`, `${base}:qw`, `${base}:qs`];
}

/**
 * The lockId whose keys start with `base`, read back from the key (`prefix{id}`); undefined
 * when the tag is a SHA-1 (an id with a brace), whose id only the stored record knows
 * ({@link whoRecord}).
 */
export function lockIdAt(prefix: string, base: string): string | undefined {
  if (!base.startsWith(`${prefix}{`) || !base.endsWith('}')) return undefined;
  const tag = base.slice(prefix.length + 1, -1);
  return tag.startsWith('{') ? undefined : tag;
}

/**
 * The record stored beside every hold and queue entry: the locker's identity, preceded by the
 * lockId when the keys cannot give it back (a SHA-1 tag) — `<length>:<lockId><identity>`, else
 * `:<identity>`. The server stores it verbatim; only {@link readWho} reads it.
 */
export function whoRecord(lockId: string, identity: string): string {
  return /[{}]/.test(lockId) ? `${lockId.length}:${lockId}${identity}` : `:${identity}`;
}

/**
 * The {@link whoRecord}s one backend sends, kept built: a locker sends the same record with
 * every attempt, and building (and flattening) it each time was a share of an uncontended
 * cycle (docs/benchmarks.md). One per backend, never per process: lockers of different
 * identities sharing a backend, or each with its own, then never evict each other's record.
 */
export class WhoRecords {
  /** The last identity asked for and its record: one locker per backend costs a comparison. */
  #identity: string | undefined;
  #record = '';
  /** Every identity this backend has sent (one per locker over it), the oldest forgotten past 64. */
  readonly #records = new BoundedMap<string, string>(64);

  /** The record of `identity` for `lockId`. */
  of(lockId: string, identity: string): string {
    if (/[{}]/.test(lockId)) return whoRecord(lockId, identity);
    if (identity === this.#identity) return this.#record;
    let record = this.#records.get(identity);
    if (record === undefined) {
      record = whoRecord(lockId, identity);
      this.#records.set(identity, record);
    }
    this.#identity = identity;
    this.#record = record;
    return record;
  }
}

/** A {@link whoRecord} read back: the lockId it carries (if any) and the identity. */
export function readWho(record: string): { readonly lockId?: string; readonly identity: string } | undefined {
  const m = /^(\d*):/.exec(record);
  if (!m) return undefined;
  const rest = record.slice(m[0].length);
  if (!m[1]) return { identity: rest };
  const n = Number(m[1]);
  return { lockId: rest.slice(0, n), identity: rest.slice(n) };
}

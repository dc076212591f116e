/**
 * Where one lock lives in Redis: every key of a lock carries the same `{hash tag}`, so a
 * Redis Cluster keeps them in one slot and one script may touch them all. What each key
 * holds: docs/backends/redis.md, "How it works" (Redis) and docs/backends/redlock.md,
 * "The algorithm" (Redlock).
 */
import { createHash } from 'node:crypto';

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

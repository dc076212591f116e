/**
 * Fenced values in Redis (docs/recipes/fencing.md): a hash with the value and the newest
 * token that wrote or read it, changed only by a compare-and-set script, so a holder that
 * paused past its lease (token 33) cannot write after the next holder (34) did. Reads are
 * fenced too, as `FencedResource` does: a read raises the fence, so a stale holder's
 * read-modify-write is refused even when the newer holder has only read so far.
 *
 * Tokens are compared as decimal strings (length, then digits): Lua's numbers are doubles
 * and a token may exceed 2^53.
 */
import { InvalidArgumentError, StaleTokenError } from '../errors.js';

/** An ioredis client (or anything with its `eval(script, numKeys, ...args)`). */
export interface RedisEvaluator {
  eval(script: string, numKeys: number, ...args: string[]): Promise<unknown>;
}

// `above(a, b)`: decimal string a > b (no leading zeros, as BigInt#toString writes them).
const PRELUDE = `
local function above(a, b)
  if #a ~= #b then return #a > #b end
  return a > b
end
local f = redis.call('HGET', KEYS[1], 'fence')
if f and above(f, ARGV[1]) then return {0, f} end
`;

/** KEYS: the hash. ARGV: token, value. Returns `{1}` or `{0, newest}`. */
const SET = `${PRELUDE}redis.call('HSET', KEYS[1], 'value', ARGV[2], 'fence', ARGV[1])
return {1}`;

/** KEYS: the hash. ARGV: token. Returns `{1, value or false}` or `{0, newest}`. */
const GET = `${PRELUDE}if not f or above(ARGV[1], f) then redis.call('HSET', KEYS[1], 'fence', ARGV[1]) end
return {1, redis.call('HGET', KEYS[1], 'value')}`;

function tokenArg(token: bigint): string {
  if (typeof token !== 'bigint' || token < 0n) throw new InvalidArgumentError('token', 'a fencing token is a bigint ≥ 0');
  return token.toString();
}

function refused(reply: unknown, token: bigint, operation: string): unknown {
  if (!Array.isArray(reply)) throw new TypeError(`unexpected reply to a fenced ${operation}: ${String(reply)}`);
  const [ok, rest] = reply as [unknown, unknown];
  if (Number(ok) === 1) return rest;
  throw new StaleTokenError(token, BigInt(String(rest)), operation);
}

/**
 * Write `value` to the fenced hash `key` with `token`. Rejects `StaleTokenError` when the
 * hash has seen a newer token (by a write or a fenced read); the same token may write again.
 */
export async function fencedSet(redis: RedisEvaluator, key: string, token: bigint, value: string): Promise<void> {
  const reply = await redis.eval(SET, 1, key, tokenArg(token), value);
  refused(reply, token, `write to ${key}`);
}

/**
 * Read the fenced hash `key` with `token`, raising its fence to `token`: a holder with an
 * older token can no longer write. Resolves the value (null when none was written); rejects
 * `StaleTokenError` when the hash has seen a newer token.
 */
export async function fencedGet(redis: RedisEvaluator, key: string, token: bigint): Promise<string | null> {
  const reply = await redis.eval(GET, 1, key, tokenArg(token));
  const value = refused(reply, token, `read of ${key}`);
  return typeof value === 'string' ? value : value instanceof Buffer ? value.toString('utf8') : null;
}

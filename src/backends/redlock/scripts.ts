/**
 * The per-node Lua scripts of Redlock, loaded from `../redis-wire/lua/redlock-*.lua`: much
 * less than the single-node backend needs, and none of its shared helpers. On each
 * master a lock is a compare-and-set lease with a random value (`SET NX PX` plus the
 * compare-and-delete of docs/backends/redlock.md), next to one register of the fencing
 * token max-register.
 *
 * Keys of one lock on one master (all under the same `{hash tag}`, see ../redis-wire/keys.ts):
 *
 * | key  | type   | content |
 * |------|--------|---------|
 * | `rl` | string | the holder's value (its ownerId, or ownerId + NUL + nonce for an explicit owner), `PX` = ttl |
 * | `rt` | string | this master's copy of the token register (kept 10 min past the last hold) |
| `ri` | string | `<acquired at ms>|who`: the holder's record of its locker (`whoRecord` in ../redis-wire/keys.ts), as long as the lease |
 *
 * The register is written only by whoever holds the lease on that master, so while a lock is
 * held the highest register among the masters holding it is the holder's token (`inspect`).
 *
 * A register answers `max(stored, server time in µs)`: the stored value alone is what the
 * majority proof needs; the clock floor keeps tokens increasing when a master forgot
 * everything (restart without persistence), see docs/backends/redlock.md, "Fencing tokens".
 *
 * Numbers the scripts turn into strings go through `string.format('%.0f')`: Lua 5.1 would
 * print a µs value as `1.7e+15`.
 */
import { loadScript } from '../redis-wire/lua.js';

export type { LuaScript } from '../redis-wire/lua.js';

/**
 * Phase 1 on one master: take the lease and read the register in one atomic step.
 * KEYS: rl rt ri. ARGV: value, ttlMs, proposed token, who (stored in `ri` by a new hold).
 * Returns `{1, register, wrote}` (granted; `wrote` = 1 when the proposal was above the
 * register, at most a minute ahead of this master's clock, and is now stored) or `{0, pttl}`
 * (held by another). It runs on every master for
 * every attempt, so it is kept short: no helper functions (their closures cost a measurable share),
 * `SET NX` first (one call when the lock is free), and the register returned as the clock's
 * integer, or as the stored string when that is higher (exact either way; µs values stay
 * below 2^53). This took the script from 5.4 to 3.5 µs of server time per call.
 */
export const ACQUIRE = loadScript('redlock-acquire');

/**
 * Phase 2 (only when the proposal of phase 1 was too low): store `token` in the register,
 * only while this master still holds the lease for `value` — the write must come before any
 * later acquisition of this master. KEYS: rl rt. ARGV: value, token. Returns 1 or 0.
 */
export const FENCE = loadScript('redlock-fence');

/** Renew the lease of `value` (and of its `ri`). KEYS: rl ri. ARGV: value, ttlMs. Returns 1 or 0 (not held). */
export const EXTEND = loadScript('redlock-extend');

/**
 * Compare-and-delete; a deletion publishes the value on `channel` so waiters on any master
 * wake (the value lets a client count one release once, however many masters sent it).
 * KEYS: rl ri. ARGV: value, channel. Returns 1 (deleted) or 0.
 */
export const RELEASE = loadScript('redlock-release');

/**
 * What one master knows. KEYS: rl rt ri. Returns `{value, pttl, register, record, nowMs}`
 * ('' when absent).
 */
export const INSPECT = loadScript('redlock-inspect');

/**
 * INSPECT for many locks at once, for `list`: KEYS: rl rt ri of each lock in turn (keys of
 * many slots in one script: a Redlock master is a standalone Redis, never a Cluster). Returns
 * one INSPECT reply per lock, in order. A page sends at most its limit of locks.
 */
export const INSPECT_MANY = loadScript('redlock-inspect-many');

/**
 * Break the lock on one master: delete the lease (announcing it as a release does) and raise
 * the register one past `max(stored, clock)`, so that a majority of masters broken this way
 * makes every later token exceed the broken holder's by at least two (docs/backends/redlock.md).
 * KEYS: rl rt ri. ARGV: channel. Returns the value deleted, or ''.
 */
export const FORCE = loadScript('redlock-force');

/**
 * The Lua scripts of the Redis backend: one script per operation, each atomic on the server,
 * loaded from `../redis-wire/lua/<name>.lua` (the helpers every script shares are in
 * `prelude.lua` and `prelude-handoff.lua`).
 *
 * Data of one lock (every key carries the same `{hash tag}`, so a Redis Cluster keeps them
 * in one slot and a script may touch them all):
 *
 * | key  | type | content |
 * |------|------|---------|
 * | `h`  | hash | holder field → `kind|count|token|expiresAt|lockDelay|mark|acquiredAt|who` (field = ownerId; `ownerId\0token` for a semaphore permit; mark = the waiter id a hand-off is for, or `~<attempt id>` of an explicit owner's attempt, or ''; who = the client's record of the locker, see `whoRecord` in ../redis-wire/keys.ts) |
 * | `x`  | zset | holder field → the server time (ms) until which it blocks others (`expiresAt + lockDelay`); only once two holders held at once (see below) |
 * | `t`  | string | the last fencing token (kept 10 min past the last hold) |
 * | `q`  | zset | waiter id → arrival number (the queue order) |
 * | `qx` | zset | waiter id → the server time (ms) at which the entry expires unless its waiter re-attempts |
 * | `qw` | hash | waiter id → `<kind letter><1 fair / 0>|ttl|lockDelay|secret|ownerId` (what a hand-off needs; the secret of the waiter's last attempt); `\0<waiter id>` → `<since ms>|who` |
 * | `qs` | string | the arrival counter |
 *
 * All expiry is decided by the server's clock (`TIME`), never the clients': a holder
 * blocks others while `expiresAt + lockDelay` of its record is in the future. That gives
 * `SET NX PX` semantics to every kind of lock (mutex, read, write, semaphore permit) and lets
 * one hash carry Redisson's owner → count reentrancy. The keys themselves get `PEXPIREAT`
 * just after their last entry, so an abandoned lock leaves nothing behind.
 *
 * The index `x` exists only while it is needed: a sole holder (a mutex, a writer, the first
 * reader or permit, a hand-off) has none, and its hash expires with it, so the short paths
 * write one hash and the counter. `put_hold()` in prelude.lua writes every hold record; when
 * a second field joins a hash without `x`, it indexes the one already there first. Invariant:
 * if `x` exists it indexes every field of `h` (both go together, with the same expiry);
 * if not, `h` has at most one field and the helpers that read `x` (`purge_holders`,
 * `earliest_hold`) read that record instead. An `x` is dropped with its hash (`DEL h x`).
 *
 * A fencing token is `max(last + 1, server time in µs)`: strictly increasing while the
 * counter lives, and still increasing after the counter was lost (restart without
 * persistence, failover to a replica that missed the last writes) as long as the server
 * clock did not step back.
 *
 * Wake-ups: every client subscribes once to its own inbox channel (`<prefix>w:<client id>`),
 * and a waiter id is `<client id>.<n>`. A state change that lets the queue head go
 * publishes the head's id to the head's client only: one release wakes one waiter in one
 * process, never the queue (no herd, not even a fan-out of messages). When the head is a
 * mutex/write waiter (fair or not) and the lock is free, the release grants it on the spot, as a
 * hand-off within a short claim window; the message carries the grant, so the head holds on
 * receipt and claims it in the background (CLAIM, one round trip off the critical path). A
 * head that vanished is skipped when the window ends, not after a whole ttl. The release's
 * reply is the message it sent, so the releasing client delivers it at once to a waiter of
 * its own process.
 *
 * Watchers: every script that writes or removes a hold or a queue entry also publishes the
 * lock's key base on `<prefix>changes` (`changed()` in prelude-handoff.lua; see
 * docs/backends/redis.md, "Watching").
 *
 * Numbers: Lua 5.1 would print a µs timestamp as `1.7e+15` (`tostring`, `..`), so the helpers
 * format them with `string.format('%.0f')`. The short paths (`acquire-free.lua`, the top of
 * `release.lua`) avoid that call, which costs about half a µs of server time: they pass
 * numbers to `redis.call` as numbers (Redis prints those with `%.17g`, exact below 2^53),
 * concatenate ms times as they are (13 digits: `%.14g` is exact) and splice the µs token
 * from `TIME`'s two strings.
 */
import { loadScript, luaFile } from '../redis-wire/lua.js';

export type { LuaScript } from '../redis-wire/lua.js';

/**
 * How long a hand-off waits for its head to claim it (at most the head's ttl): the
 * `CLAIM_MS` of `prelude-handoff.lua`, read from there so the two cannot disagree.
 */
export const CLAIM_MS = claimMs(luaFile('prelude-handoff'));

function claimMs(lua: string): number {
  const m = /^local CLAIM_MS = (\d+)$/m.exec(lua);
  if (!m?.[1]) throw new Error('prelude-handoff.lua defines no CLAIM_MS');
  return Number(m[1]);
}

/**
 * One acquisition attempt.
 * KEYS: h x t q qx qw qs.
 * ARGV: kind letter, permits, ownerId, ttlMs, lockDelayMs, fair, wait, waiterId, waiterTtlMs,
 * inbox prefix, secret (of a waiter that may be handed the lock, else ''), stamp (`~<attempt
 * id>` for an explicit owner, kept in the hold for UNDO, else ''), who (kept verbatim with the
 * new hold or queue entry).
 * Returns `{1, token, field}` (new hold), `{2, token, field}` (re-entered) or
 * `{0, hintMs, serverNowMs, lastToken}` (contended; hintMs = time until the earliest holder or
 * queue entry runs out, -1 if none).
 */
export const ACQUIRE = loadScript('acquire');

/**
 * The first attempt of an acquisition (not a semaphore) at a lock this client has not seen
 * contended lately: ACQUIRE's fast path alone, on the keys and arguments it reads (a shorter
 * command to build and send, a bare reply to parse).
 * KEYS: h q x t. ARGV: kind letter, ownerId, ttlMs, lockDelayMs, stamp, who, inbox prefix.
 * Returns the token (a new hold, field = ownerId), or 0 when anybody holds or waits, or an
 * index is left: then ACQUIRE decides.
 */
export const ACQUIRE_SOLO = loadScript('acquire-solo');

/**
 * Renew a hold: compare (field, token, not expired) and move its expiry.
 * KEYS: h x t. ARGV: field, kind letter, token, ttlMs. Returns 1, or 0 when not held.
 */
export const EXTEND = loadScript('extend');

/**
 * Claim a hand-off already held on receipt of its message: the lease starts now, for the
 * claimer's ttl and lockDelay. Never queues or grants anything else.
 * KEYS: h x t. ARGV: field, kind letter, token, waiterId, ttlMs, lockDelayMs.
 * Returns 1, or 0 when the hand-off is gone (its window ended, or it was given back).
 */
export const CLAIM = loadScript('claim');

/**
 * Release one hold (one level of re-entry): compare-and-delete, then hand the lock to the
 * mutex/write head waiter or wake the head. KEYS: h x t q qx qw qs. ARGV: field, kind letter, token, inbox prefix.
 * Returns 1 when it was held, the message sent to the waiter it messaged (handed the lock or
 * woken; the waiter id first, `|token|expiresAt|secret` after it for a hand-off) when it was
 * held and a waiter was messaged, 0 when not (expired, taken over, already released).
 */
export const RELEASE = loadScript('release');

/**
 * Abandon an acquisition. KEYS: h x t q qx qw qs. ARGV: waiterId, inbox prefix, ownerId,
 * fresh ('1' when the owner was made for this acquisition).
 * Leaves the queue; gives back a hand-off made to this waiter; and for a fresh owner drops
 * any hold of that owner (an attempt whose reply was lost may have been granted: no other
 * acquisition can carry a fresh owner). Wakes the new head when the head left, and the next
 * waiter when an exclusive waiter left (a reader behind it may pass now).
 * Returns 1 when there was something to undo.
 */
export const CANCEL = loadScript('cancel');

/**
 * Undo an attempt whose reply never came, for an explicit owner (whose other holds, re-entered
 * from elsewhere, must stay): drops the hold, or the one level of re-entry, stamped with the
 * attempt's id, and the attempt's queue entry; hands the lock on when that freed it.
 * KEYS: h x t q qx qw qs. ARGV: ownerId, stamp (`~<attempt id>`), waiterId, inbox prefix.
 * Returns 1 when there was something to undo.
 */
export const UNDO = loadScript('undo');

/**
 * Read-only view for `inspect` and `list`. KEYS: h x t q qx qw.
 * Returns `{lastToken or '', serverNowMs, 1 when the hold hash exists else 0, n, field1, value1,
 * … fieldn, valuen, entry1, record1, …}`: the n holders that still block others (their hold
 * records as stored), then the live queue entries in queue order (`qw` value and `\0` record).
 */
export const INSPECT = loadScript('inspect');

/**
 * Break the lock: end every hold (lockDelay included), step the counter up by one, and hand
 * the lock to (or wake) the queue head as a release would. KEYS: h x t q qx qw qs.
 * ARGV: inbox prefix. Returns the number of holds whose lease had not run out.
 */
export const FORCE = loadScript('force');

/**
 * The Lua scripts of the Redis backend: one script per operation, each atomic on the server.
 *
 * Data of one lock (every key carries the same `{hash tag}`, so a Redis Cluster keeps them
 * in one slot and a script may touch them all):
 *
 * | key  | type | content |
 * |------|------|---------|
 * | `h`  | hash | holder field → `kind|count|token|expiresAt|lockDelay|handedToWaiterId` (field = ownerId; `ownerId\0token` for a semaphore permit) |
 * | `x`  | zset | holder field → the server time (ms) until which it blocks others (`expiresAt + lockDelay`) |
 * | `t`  | string | the last fencing token (kept 10 min past the last hold) |
 * | `q`  | zset | waiter id → arrival number (the queue order) |
 * | `qx` | zset | waiter id → the server time (ms) at which the entry expires unless its waiter re-attempts |
 * | `qw` | hash | waiter id → `<kind letter><1 fair / 0>|ttl|lockDelay|ownerId` (what a hand-off needs) |
 * | `qs` | string | the arrival counter |
 *
 * All expiry is decided by the server's clock (`TIME`), never the clients': a holder is
 * alive while its `x` score is in the future. That gives `SET NX PX` semantics to every
 * kind of lock (mutex, read, write, semaphore permit) and lets one hash carry Redisson's
 * owner → count reentrancy. The keys themselves get `PEXPIREAT` just after their last
 * entry, so an abandoned lock leaves nothing behind.
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
 * fair mutex/write waiter and the lock is free, the release grants it on the spot, as a
 * hand-off within a short claim window; the message carries the grant, so the head holds on
 * receipt and claims it in the background (CLAIM, one round trip off the critical path). A
 * head that vanished is skipped when the window ends, not after a whole ttl.
 *
 * Numbers are passed to `redis.call` through `string.format('%.0f')`: Lua 5.1 would print
 * a µs timestamp as `1.7e+15`.
 */
import { script, type LuaScript } from './prelude.js';

export type { LuaScript } from './prelude.js';

/**
 * One acquisition attempt.
 * KEYS: h x t q qx qw qs.
 * ARGV: kind letter, permits, ownerId, ttlMs, lockDelayMs, fair, wait, waiterId, waiterTtlMs, inbox prefix.
 * Returns `{1, token, field}` (new hold), `{2, token, field}` (re-entered) or
 * `{0, hintMs, serverNowMs}` (contended; hintMs = time until the earliest holder or queue
 * entry runs out, -1 if none).
 */
export const ACQUIRE = script(
  'acquire',
  `
local h, x, t, q, qx, qw, qs = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7]
local kind, permits, owner = ARGV[1], tonumber(ARGV[2]), ARGV[3]
local ttl, delay = tonumber(ARGV[4]), tonumber(ARGV[5])
local fair, wait, wid = ARGV[6] == '1', ARGV[7] == '1', ARGV[8]
local wttl, inbox = tonumber(ARGV[9]), ARGV[10]
local now, now_us = clock()

-- A new hold with the next fencing token (among other holders or waiters).
local function grant(rank)
  local tok = next_token(t, now_us)
  local field = owner
  if kind == 's' then field = owner .. '\\0' .. tok end
  redis.call('HSET', h, field, pack(kind, 1, tok, now + ttl, delay, ''))
  redis.call('ZADD', x, fmt(now + ttl + delay), field)
  redis.call('SET', t, tok)
  touch_holders(h, x, t)
  if rank then dequeue(q, qx, qw, wid); touch_queue(q, qx, qw, qs) end
  -- A shared grant may leave room for the next in line: wake it (it re-checks).
  if kind == 'r' or kind == 's' then
    local nxt = head(q)
    if nxt then notify(inbox, nxt, nxt) end
  end
  return {1, tok, field}
end

purge_holders(h, x, now)
purge_queue(q, qx, qw, now)

-- Re-entry (Redisson's owner -> count hash): the same owner holding the same kind.
if kind ~= 's' then
  local v = redis.call('HGET', h, owner)
  if v then
    local hk, count, token, exp, dl, hw = parse(v)
    if hk == kind and exp > now then
      -- Handed to this very acquisition by a release: claim it, the lease starts now.
      if wid ~= '' and hw == wid then
        take_handoff(h, x, t, owner, hk, count, token, exp, ttl, delay, now)
        return {1, token, owner}
      end
      -- The hold lasts as long as its longest lease: each client vouches for its own ttl.
      if now + ttl > exp then
        exp = now + ttl
        redis.call('ZADD', x, fmt(exp + dl), owner)
        touch_holders(h, x, t)
      end
      redis.call('HSET', h, owner, pack(hk, count + 1, token, exp, dl, hw))
      dequeue(q, qx, qw, wid)
      touch_queue(q, qx, qw, qs)
      return {2, token, owner}
    end
  end
end

-- Can this kind hold together with the current holders?
local holders = redis.call('HVALS', h)
local ok
if kind == 'm' or kind == 'w' then
  ok = #holders == 0
else
  ok = true
  for _, v in ipairs(holders) do
    if string.sub(v, 1, 1) ~= kind then ok = false; break end
  end
  if ok and kind == 's' and #holders >= permits then ok = false end
end

-- Does the queue let it through? (Readers never pass a waiting writer, fair or not.)
local rank = false
if wid ~= '' then rank = redis.call('ZRANK', q, wid) end
if ok then
  local ahead = rank
  if not ahead then ahead = redis.call('ZCARD', q) end
  if kind == 'r' then
    if ahead > 0 then
      local ids = redis.call('ZRANGE', q, 0, ahead - 1)
      local kinds = redis.call('HMGET', qw, unpack(ids))
      for _, k in ipairs(kinds) do
        if k then
          local c = string.sub(k, 1, 1)
          if c == 'm' or c == 'w' then ok = false; break end
        end
      end
    end
  elseif fair then
    if kind == 's' then ok = ahead < permits - #holders else ok = ahead == 0 end
  end
end

if ok then return grant(rank) end

if wait and wid ~= '' then
  if not rank then
    redis.call('ZADD', q, redis.call('INCR', qs), wid)
    local f = '0'
    if fair then f = '1' end
    redis.call('HSET', qw, wid, kind .. f .. '|' .. fmt(ttl) .. '|' .. fmt(delay) .. '|' .. owner)
  end
  redis.call('ZADD', qx, fmt(now + wttl), wid)
  touch_queue(q, qx, qw, qs)
end

local best = false
local a = redis.call('ZRANGE', x, 0, 0, 'WITHSCORES')
if a[2] then best = tonumber(a[2]) end
local b = redis.call('ZRANGE', qx, 0, 0, 'WITHSCORES')
if b[2] and b[1] ~= wid then
  local v = tonumber(b[2])
  if not best or v < best then best = v end
end
if not best then return {0, -1, fmt(now)} end
local hint = best - now
if hint < 1 then hint = 1 end
return {0, hint, fmt(now)}
`,
  `
-- Nobody holds and nobody waits (the SET NX PX case): grant inline. Same fields as grant()
-- below; the keys expire with this hold, the counter 10 min later (a quick re-acquire
-- continues the sequence).
if redis.call('EXISTS', KEYS[1], KEYS[4]) == 0 then
  local tm = redis.call('TIME')
  local s, us = tonumber(tm[1]), tonumber(tm[2])
  local now, tok = s * 1000 + math.floor(us / 1000), s * 1000000 + us
  local next_ = tonumber(redis.call('GET', KEYS[3]) or '0') + 1
  if next_ > tok then tok = next_ end
  tok = string.format('%.0f', tok)
  local kind, ttl, delay = ARGV[1], tonumber(ARGV[4]), tonumber(ARGV[5])
  local field = ARGV[3]
  if kind == 's' then field = field .. '\\0' .. tok end
  local at = now + ttl + delay
  redis.call('HSET', KEYS[1], field, kind .. '|1|' .. tok .. '|' .. string.format('%.0f', now + ttl) .. '|' .. string.format('%.0f', delay) .. '|')
  redis.call('ZADD', KEYS[2], string.format('%.0f', at), field)
  redis.call('SET', KEYS[3], tok, 'PXAT', string.format('%.0f', at + 601000))
  redis.call('PEXPIREAT', KEYS[1], string.format('%.0f', at + 1000))
  redis.call('PEXPIREAT', KEYS[2], string.format('%.0f', at + 1000))
  return {1, tok, field}
end
`,
);

/**
 * Renew a hold: compare (field, token, not expired) and move its expiry.
 * KEYS: h x t. ARGV: field, kind letter, token, ttlMs. Returns 1, or 0 when not held.
 */
export const EXTEND = script(
  'extend',
  `
local h, x, t = KEYS[1], KEYS[2], KEYS[3]
local field, kind, token, ttl = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4])
local now = clock()
local v = redis.call('HGET', h, field)
if not v then return 0 end
local hk, count, tok, exp, dl, hw = parse(v)
if hk ~= kind or tok ~= token or exp <= now then return 0 end
-- Never shorten: a re-entered hold may carry another client's longer lease.
if now + ttl > exp then
  redis.call('HSET', h, field, pack(hk, count, tok, now + ttl, dl, hw))
  redis.call('ZADD', x, fmt(now + ttl + dl), field)
  touch_holders(h, x, t)
end
return 1
`,
);

/**
 * Claim a hand-off already held on receipt of its message: the lease starts now, for the
 * claimer's ttl and lockDelay. Never queues or grants anything else.
 * KEYS: h x t. ARGV: field, kind letter, token, waiterId, ttlMs, lockDelayMs.
 * Returns 1, or 0 when the hand-off is gone (its window ended, or it was given back).
 */
export const CLAIM = script(
  'claim',
  `
local h, x, t = KEYS[1], KEYS[2], KEYS[3]
local field, kind, token, wid = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local ttl, delay = tonumber(ARGV[5]), tonumber(ARGV[6])
local now = clock()
local v = redis.call('HGET', h, field)
if not v then return 0 end
local hk, count, tok, exp, dl, hw = parse(v)
if hk ~= kind or tok ~= token or hw ~= wid or exp <= now then return 0 end
take_handoff(h, x, t, field, hk, count, tok, exp, ttl, delay, now)
return 1
`,
);

/**
 * Release one hold (one level of re-entry): compare-and-delete, then hand the lock to the
 * fair head waiter or wake the head. KEYS: h x t q qx qw qs. ARGV: field, kind letter, token, inbox prefix.
 * Returns 1 when it was held, the waiter id when it was held and that waiter was messaged
 * (handed the lock or woken), 0 when not (expired, taken over, already released).
 */
export const RELEASE = script(
  'release',
  `
local h, x, t, q, qx, qw, qs = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7]
local field, kind, token, inbox = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local hk, count, tok, exp, dl, hw = parse(v)
-- A lease that ran out is not ours any more, even while lockDelay still keeps others out.
if hk ~= kind or tok ~= token or exp <= now then
  purge_holders(h, x, now)
  return 0
end
if count > 1 then
  redis.call('HSET', h, field, pack(hk, count - 1, tok, exp, dl, hw))
  return 1
end
drop(h, x, t, field)
if queued then
  local woke = after_release(h, x, t, q, qx, qw, qs, inbox, now, now_us)
  if woke then return woke end
end
return 1
`,
  `
local tm = redis.call('TIME')
local now = tonumber(tm[1]) * 1000 + math.floor(tonumber(tm[2]) / 1000)
local now_us = tonumber(tm[1]) * 1000000 + tonumber(tm[2])
local v = redis.call('HGET', KEYS[1], ARGV[1])
if not v then return 0 end
local queued = redis.call('EXISTS', KEYS[4]) == 1
-- The only holder, not re-entered, nobody queued: delete inline (what drop() does then).
if not queued and redis.call('HLEN', KEYS[1]) == 1 then
  local hk, count, tok, exp = string.match(v, '^(%a)|(%d+)|(%d+)|(%d+)|')
  if hk == ARGV[2] and count == '1' and tok == ARGV[3] and tonumber(exp) > now then
    redis.call('DEL', KEYS[1], KEYS[2])
    return 1
  end
end
`,
);

/**
 * Abandon an acquisition. KEYS: h x t q qx qw qs. ARGV: waiterId, inbox prefix, ownerId,
 * fresh ('1' when the owner was made for this acquisition).
 * Leaves the queue; gives back a hand-off made to this waiter; and for a fresh owner drops
 * any hold of that owner (an attempt whose reply was lost may have been granted: no other
 * acquisition can carry a fresh owner). Wakes the new head when the head left, and the next
 * waiter when an exclusive waiter left (a reader behind it may pass now).
 * Returns 1 when there was something to undo.
 */
export const CANCEL = script(
  'cancel',
  `
local h, x, t, q, qx, qw, qs = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7]
local wid, inbox, owner, fresh = ARGV[1], ARGV[2], ARGV[3], ARGV[4] == '1'
local now, now_us = clock()
local info = redis.call('HGET', qw, wid)
local rank = dequeue(q, qx, qw, wid)
local dropped = false
for _, f in ipairs(redis.call('HKEYS', h)) do
  local mine = f == owner or (fresh and string.sub(f, 1, #owner + 1) == owner .. '\\0')
  if mine then
    local hk, count, tok, exp, dl, hw = parse(redis.call('HGET', h, f))
    if not fresh and wid ~= '' and hw == wid and count > 1 then
      redis.call('HSET', h, f, pack(hk, count - 1, tok, exp, dl, hw))
      return 1
    end
    if fresh or (wid ~= '' and hw == wid) then
      drop(h, x, t, f)
      dropped = true
    end
  end
end
if dropped then
  if redis.call('EXISTS', q) == 1 then after_release(h, x, t, q, qx, qw, qs, inbox, now, now_us) end
  return 1
end
if not rank then return 0 end
touch_queue(q, qx, qw, qs)
-- The new head may go now; so may a reader that waited only behind this writer.
local c = ''
if info then c = string.sub(info, 1, 1) end
if rank == 0 or c == 'm' or c == 'w' then
  local nxt = redis.call('ZRANGE', q, rank, rank)[1]
  if nxt then notify(inbox, nxt, nxt) end
end
return 1
`,
);

/**
 * Read-only view for `inspect`. KEYS: h x t qx.
 * Returns `{lastToken or '', waiters, field1, value1, blocksUntilMs1 - now, …}` of the live holders
 * (each value is `kind|count|token|expiresAt|lockDelay`, followed by `expiresAt - now`).
 */
export const INSPECT = script(
  'inspect',
  `
local h, x, t, qx = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local now = clock()
local out = {redis.call('GET', t) or '', redis.call('ZCOUNT', qx, '(' .. fmt(now), '+inf')}
local all = redis.call('HGETALL', h)
for i = 1, #all, 2 do
  local until_ = redis.call('ZSCORE', x, all[i])
  if until_ and tonumber(until_) > now then
    local hk, count, tok, exp = parse(all[i + 1])
    local left = exp - now
    if left < 0 then left = 0 end
    table.insert(out, all[i])
    table.insert(out, hk .. '|' .. fmt(count) .. '|' .. tok)
    table.insert(out, fmt(left))
  end
end
return out
`,
);

/** Every script, for preloading with SCRIPT LOAD. */
export const ALL_SCRIPTS: readonly LuaScript[] = [ACQUIRE, CLAIM, EXTEND, RELEASE, CANCEL, INSPECT];

-- Helpers every Redis backend script shares: clock, hold records, tokens, expiry upkeep.
-- The data layout is described in src/backends/redis/scripts.ts.
local function fmt(n) return string.format('%.0f', n) end
local function clock()
  local t = redis.call('TIME')
  local s, us = tonumber(t[1]), tonumber(t[2])
  return s * 1000 + math.floor(us / 1000), s * 1000000 + us
end
-- rest: '' or '|<acquired at ms>|<who>' (who: the opaque record the client sent, never read here).
local function parse(v)
  local kind, count, token, exp, delay, wid, rest = string.match(v, '^(%a)|(%d+)|(%d+)|(%d+)|(%d+)|([^|]*)(.*)$')
  return kind, tonumber(count), token, tonumber(exp), tonumber(delay), wid, rest
end
local function pack(kind, count, token, exp, delay, wid, rest)
  return kind .. '|' .. fmt(count) .. '|' .. token .. '|' .. fmt(exp) .. '|' .. fmt(delay) .. '|' .. wid .. (rest or '')
end
-- The next fencing token, max(last + 1, now in µs), read and written by one SET … GET (the
-- options after it, e.g. PXAT, go with the write).
local function take_token(t, now_us, ...)
  local tok = fmt(now_us)
  local last = redis.call('SET', t, tok, 'GET', ...)
  if last and tonumber(last) >= now_us then
    tok = fmt(tonumber(last) + 1)
    redis.call('SET', t, tok, ...)
  end
  return tok
end
local function next_token(t, now_us)
  local last = tonumber(redis.call('GET', t) or '0')
  local token = last + 1
  if now_us > token then token = now_us end
  return fmt(token)
end
-- The index `x` (holder -> the end of its block) exists only once two holders held at once;
-- until then the sole holder's record is the only place its expiry is (docs/backends/redis.md,
-- "Lua scripts"). Every hold's block ends at expiresAt + lockDelay, as `x` would say.
local function until_of(v)
  local exp, delay = string.match(v, '^%a|%d+|%d+|(%d+)|(%d+)|')
  return tonumber(exp) + tonumber(delay)
end
-- ix: whether `x` exists, when the caller knows (nil: look). Without `x`, returns the hash's
-- fields and values left (HGETALL's list), for the reads that follow.
local function purge_holders(h, x, now, ix)
  if ix == nil then ix = redis.call('EXISTS', x) == 1 end
  if not ix then
    local all, live = redis.call('HGETALL', h), {}
    for i = 1, #all, 2 do
      if until_of(all[i + 1]) <= now then
        redis.call('HDEL', h, all[i])
      else
        table.insert(live, all[i]); table.insert(live, all[i + 1])
      end
    end
    return live
  end
  local dead = redis.call('ZRANGEBYSCORE', x, '-inf', fmt(now))
  if #dead > 0 then
    redis.call('HDEL', h, unpack(dead))
    redis.call('ZREMRANGEBYSCORE', x, '-inf', fmt(now))
  end
end
local function purge_queue(q, qx, qw, now)
  local dead = redis.call('ZRANGEBYSCORE', qx, '-inf', fmt(now))
  if #dead > 0 then
    redis.call('ZREM', q, unpack(dead))
    redis.call('HDEL', qw, unpack(dead))
    -- Each entry's '\0<id>' field: '<since ms>|<who>'.
    for i = 1, #dead do dead[i] = '\0' .. dead[i] end
    redis.call('HDEL', qw, unpack(dead))
    redis.call('ZREMRANGEBYSCORE', qx, '-inf', fmt(now))
  end
end
local function touch_holders(h, x, t)
  local last = redis.call('ZRANGE', x, -1, -1, 'WITHSCORES')
  if last[2] then
    local at = tonumber(last[2]) + 1000
    redis.call('PEXPIREAT', h, fmt(at))
    redis.call('PEXPIREAT', x, fmt(at))
    -- The counter outlives the holders so a quick re-acquire continues the sequence.
    redis.call('PEXPIREAT', t, fmt(at + 600000))
  end
end
-- Write one hold record whose block ends at `untl`, and keep the keys' expiries. Alone (no
-- index, no other field) the hash expires with it; a second holder indexes the first in `x`.
-- live: the hash's fields and values when `x` does not exist (purge_holders), else nil.
local function put_hold(h, x, t, field, rec, untl, live)
  if live or redis.call('EXISTS', x) == 0 then
    local all = live or redis.call('HGETALL', h)
    if #all == 0 or (#all == 2 and all[1] == field) then
      redis.call('HSET', h, field, rec)
      redis.call('PEXPIREAT', h, untl + 1000)
      redis.call('PEXPIREAT', t, untl + 601000)
      return
    end
    for i = 1, #all, 2 do
      if all[i] ~= field then redis.call('ZADD', x, until_of(all[i + 1]), all[i]) end
    end
  end
  redis.call('HSET', h, field, rec)
  redis.call('ZADD', x, untl, field)
  touch_holders(h, x, t)
end
local function touch_queue(q, qx, qw, qs)
  local last = redis.call('ZRANGE', qx, -1, -1, 'WITHSCORES')
  if last[2] then
    local at = fmt(tonumber(last[2]) + 1000)
    redis.call('PEXPIREAT', q, at)
    redis.call('PEXPIREAT', qx, at)
    redis.call('PEXPIREAT', qw, at)
    redis.call('PEXPIREAT', qs, at)
  end
end
local function head(q)
  return redis.call('ZRANGE', q, 0, 0)[1]
end

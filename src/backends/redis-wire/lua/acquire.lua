-- One acquisition attempt (the contract: ACQUIRE in src/backends/redis/scripts.ts).
local h, x, t, q, qx, qw, qs = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7]
-- stamp: '' or '~<attempt id>', kept in the hold so that UNDO finds what this attempt did.
-- who: the client's opaque record of the locker (identity), kept with the hold / queue entry.
local kind, owner, inbox, stamp, who = ARGV[1], ARGV[3], ARGV[10], ARGV[12], ARGV[13]
local ttl_arg, delay_arg, solo = ARGV[4], ARGV[5], false
local sem = kind == 's' and '\0' .. ARGV[2] .. '\0' .. (ARGV[14] or '1')
--@include acquire-free
--@include prelude
--@include prelude-handoff
--@include prelude-permits
local permits = tonumber(ARGV[2])
local ttl, delay = tonumber(ttl_arg), tonumber(delay_arg)
local fair, wait, wid = ARGV[6] == '1', ARGV[7] == '1', ARGV[8]
local wttl, secret = tonumber(ARGV[9]), ARGV[11]
-- weight: the permits a semaphore hold takes (1 from clients that do not send it).
local weight = tonumber(ARGV[14] or '1') or 1
local now, now_us = clock()


-- A new hold with the next fencing token (among other holders or waiters).
-- live: the unindexed hash as purged (put_hold() in prelude.lua); rank: this waiter's, if queued.
local function grant(rank, live)
  local tok = take_token(t, now_us)
  local field = owner
  if kind == 's' then field = owner .. '\0' .. tok .. '\0' .. fmt(permits) .. '\0' .. fmt(weight) end
  put_hold(h, x, t, field, pack(kind, 1, tok, now + ttl, delay, stamp, '|' .. fmt(now) .. '|' .. who), now + ttl + delay, live)
  if rank then unqueue(q, qx, qw, wid) end
  changed(inbox, h)
  -- A shared grant may leave room for the next in line: wake it (it re-checks).
  if kind == 'r' or kind == 's' then
    local nxt = head(q)
    if nxt then notify(inbox, nxt, nxt) end
  end
  return {1, tok, field}
end

-- Whether the holders are indexed in `x` (put_hold() in prelude.lua; e0: acquire-free.lua).
local ix = e0 >= 3
local live = purge_holders(h, x, now, ix)
purge_queue(q, qx, qw, now)

-- Re-entry (Redisson's owner -> count hash): the same owner holding the same kind.
if kind ~= 's' then
  local v = hold_of(h, owner, live)
  if v then
    local hk, count, token, exp, dl, hw, rest = parse(v)
    if hk == kind and exp > now then
      -- Handed to this very acquisition by a release: claim it, the lease starts now.
      if wid ~= '' and hw == wid then
        take_handoff(h, x, t, owner, hk, count, token, exp, ttl, delay, now, rest)
        return {1, token, owner}
      end
      if stamp ~= '' and (hw == '' or string.sub(hw, 1, 1) == '~') then hw = stamp end
      -- The hold lasts as long as its longest lease: each client vouches for its own ttl.
      if now + ttl > exp then
        put_hold(h, x, t, owner, pack(hk, count + 1, token, now + ttl, dl, hw, rest), now + ttl + dl)
      else
        redis.call('HSET', h, owner, pack(hk, count + 1, token, exp, dl, hw, rest))
      end
      dequeue(q, qx, qw, wid); changed(inbox, h)
      return {2, token, owner}
    end
  end
end

-- Can this kind hold together with the current holders? (A semaphore counts their weights.)
local ok, used, size = holders_allow(h, kind, live)
-- One id cannot be counted against two sizes: the caller gets PermitsMismatchError.
if ok and size and size ~= permits then return {3, fmt(size)} end
if ok and kind == 's' and used + weight > permits then ok = false end

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
    -- A semaphore: only when the free permits cover every waiter ahead and this one together.
    if kind == 's' then ok = weight_ahead(q, qw, ahead) + weight <= permits - used else ok = ahead == 0 end
  end
end

if ok then return grant(rank, live) end

if wait and wid ~= '' then
  if not rank then
    redis.call('ZADD', q, redis.call('INCR', qs), wid)
    redis.call('HSET', qw, '\0' .. wid, fmt(now) .. '|' .. who)
    changed(inbox, h)
  end
  local f = fair and '1' or '0'
  if weight > 1 then f = f .. fmt(weight) end
  -- Rewritten by every attempt: a hand-off message carries this attempt's secret only.
  redis.call('HSET', qw, wid, kind .. f .. '|' .. fmt(ttl) .. '|' .. fmt(delay) .. '|' .. secret .. '|' .. owner)
  redis.call('ZADD', qx, fmt(now + wttl), wid)
  touch_queue(q, qx, qw, qs)
end

local best = earliest_hold(h, x, ix, live)
local b = redis.call('ZRANGE', qx, 0, 0, 'WITHSCORES')
if b[2] and b[1] ~= wid then
  local v = tonumber(b[2])
  if not best or v < best then best = v end
end
local last = redis.call('GET', t) or '0'
if not best then return {0, -1, fmt(now), last} end
return {0, math.max(best - now, 1), fmt(now), last}

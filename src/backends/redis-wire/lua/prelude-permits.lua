-- Helpers of ACQUIRE's full path (src/backends/redis/scripts.ts): reading the holders, and
-- semaphore holds of several permits.
-- The record of `field`, from `live` (see purge_holders) when given.
local function hold_of(h, field, live)
  if not live then return redis.call('HGET', h, field) end
  for i = 1, #live, 2 do
    if live[i] == field then return live[i + 1] end
  end
  return false
end
-- The earliest end of a block among the holders, or nil (live: what purge_holders returned).
local function earliest_hold(h, x, ix, live)
  if ix == nil then ix = redis.call('EXISTS', x) == 1 end
  if ix then
    local a = redis.call('ZRANGE', x, 0, 0, 'WITHSCORES')
    return a[2] and tonumber(a[2])
  end
  local best, all = nil, live or redis.call('HGETALL', h)
  for i = 2, #all, 2 do
    local u = until_of(all[i])
    if not best or u < best then best = u end
  end
  return best
end
-- A semaphore hold's field ends '\0<permits>\0<weight>' (older holds carry neither: weight 1,
-- size unknown); a queue entry's weight follows its kind letter and fair flag ('s13|…'; none: 1).
local function sized(field)
  local p, w = string.match(field, '%z(%d+)%z(%d+)$')
  if p then return tonumber(p), tonumber(w) end
  return nil, 1
end
-- May a hold of `kind` join the current holders? Also the permits they take (semaphores) and
-- the size they were taken under (nil when none says). live: what purge_holders returned.
local function holders_allow(h, kind, live)
  local holders = live or redis.call('HGETALL', h)
  if kind == 'm' or kind == 'w' then return #holders == 0, 0, nil end
  local used, size = 0, nil
  for i = 1, #holders, 2 do
    if string.sub(holders[i + 1], 1, 1) ~= kind then return false, used, size end
    if kind == 's' then
      local p, w = sized(holders[i])
      size = size or p
      used = used + w
    end
  end
  return true, used, size
end
-- The permits the first `ahead` waiters of the queue ask for together.
local function weight_ahead(q, qw, ahead)
  if ahead == 0 then return 0 end
  local sum = 0
  local ids = redis.call('ZRANGE', q, 0, ahead - 1)
  for _, rec in ipairs(redis.call('HMGET', qw, unpack(ids))) do
    if rec then
      local w = string.match(rec, '^%a%d(%d*)|')
      if w and w ~= '' then sum = sum + tonumber(w) else sum = sum + 1 end
    end
  end
  return sum
end

-- Read-only view for inspect and list (the contract: INSPECT in src/backends/redis/scripts.ts).
--@include prelude
local h, x, t, q, qx, qw = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local now = clock()
local all = redis.call('HGETALL', h)
local holders, queue = {}, {}
-- A holder blocks others until expiresAt + lockDelay of its record (what `x` indexes, when it exists).
for i = 1, #all, 2 do
  if until_of(all[i + 1]) > now then
    table.insert(holders, all[i])
    table.insert(holders, all[i + 1])
  end
end
for _, wid in ipairs(redis.call('ZRANGE', q, 0, -1)) do
  local e = redis.call('ZSCORE', qx, wid)
  if e and tonumber(e) > now then
    table.insert(queue, redis.call('HGET', qw, wid) or '')
    table.insert(queue, redis.call('HGET', qw, '\0' .. wid) or '')
  end
end
local out = {redis.call('GET', t) or '', fmt(now), #all > 0 and 1 or 0, #holders / 2}
for _, v in ipairs(holders) do table.insert(out, v) end
for _, v in ipairs(queue) do table.insert(out, v) end
return out

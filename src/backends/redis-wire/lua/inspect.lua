-- Read-only view for inspect (the contract: INSPECT in src/backends/redis/scripts.ts).
--@include prelude
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

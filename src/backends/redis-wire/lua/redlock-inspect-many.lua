-- What one master knows of many locks, for list (the contract: INSPECT_MANY in src/backends/redlock/scripts.ts).
local tm = redis.call('TIME')
local now = tm[1] .. string.format('%03d', tm[2] / 1000)
local out = {}
for i = 1, #KEYS, 3 do
  local v = redis.call('GET', KEYS[i]) or ''
  local t = redis.call('GET', KEYS[i + 1]) or ''
  if v == '' then
    table.insert(out, {'', -2, t, '', now})
  else
    table.insert(out, {v, redis.call('PTTL', KEYS[i]), t, redis.call('GET', KEYS[i + 2]) or '', now})
  end
end
return out

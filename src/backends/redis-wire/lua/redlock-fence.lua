-- Redlock phase 2 on one master (the contract: FENCE in src/backends/redlock/scripts.ts).
local function raise(t, token, ttl)
  -- The register outlives the lease by 10 min (600000 ms), as in redlock-acquire.lua.
  local last = tonumber(redis.call('GET', t) or '0')
  if tonumber(token) > last then
    redis.call('SET', t, token, 'PX', ttl + 600000)
  else
    redis.call('PEXPIRE', t, ttl + 600000)
  end
end
local l, t = KEYS[1], KEYS[2]
local value, token = ARGV[1], ARGV[2]
if redis.call('GET', l) ~= value then return 0 end
local ttl = redis.call('PTTL', l)
if ttl <= 0 then return 0 end
raise(t, token, ttl)
return 1

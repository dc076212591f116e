-- Break the lock on one master (the contract: FORCE in src/backends/redlock/scripts.ts).
local l, t = KEYS[1], KEYS[2]
local v = redis.call('GET', l)
local tm = redis.call('TIME')
local here = tm[1] * 1000000 + tm[2]
local last = tonumber(redis.call('GET', t) or '0')
if last > here then here = last end
-- One step past every token this master vouched for: the broken holder's is below the next.
redis.call('SET', t, string.format('%.0f', here + 1), 'PX', 600000)
if not v then return '' end
redis.call('DEL', l, KEYS[3])
redis.call('PUBLISH', ARGV[1], v)
return v

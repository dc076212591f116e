-- What one master knows (the contract: INSPECT in src/backends/redlock/scripts.ts).
local v = redis.call('GET', KEYS[1]) or ''
local tm = redis.call('TIME')
local now = tm[1] .. string.format('%03d', tm[2] / 1000)
return {v, redis.call('PTTL', KEYS[1]), redis.call('GET', KEYS[2]) or '', redis.call('GET', KEYS[3]) or '', now}

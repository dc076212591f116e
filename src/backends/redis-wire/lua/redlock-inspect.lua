-- What one master knows (the contract: INSPECT in src/backends/redlock/scripts.ts).
local v = redis.call('GET', KEYS[1]) or ''
return {v, redis.call('PTTL', KEYS[1]), redis.call('GET', KEYS[2]) or ''}

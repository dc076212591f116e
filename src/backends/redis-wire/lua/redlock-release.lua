-- Compare-and-delete, then announce (the contract: RELEASE in src/backends/redlock/scripts.ts).
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('DEL', unpack(KEYS))
redis.call('PUBLISH', ARGV[2], ARGV[1])
return 1

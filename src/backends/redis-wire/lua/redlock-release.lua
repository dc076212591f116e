-- Compare-and-delete, then announce (the contract: RELEASE in src/backends/redlock/scripts.ts).
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
-- A holder released with a lock-delay (ARGV[3] = '1'): a lease that ran out (its record `ri`
-- gone, the key kept only for the delay) is not ours to release any more.
if ARGV[3] == '1' and redis.call('EXISTS', KEYS[2]) == 0 then return 0 end
redis.call('DEL', unpack(KEYS))
redis.call('PUBLISH', ARGV[2], ARGV[1])
return 1

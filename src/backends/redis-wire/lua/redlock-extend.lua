-- Renew one master's lease (the contract: EXTEND in src/backends/redlock/scripts.ts).
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
-- With a lock-delay (ARGV[3], ms) the lease key outlives the lease: a lease that ran out
-- (its record `ri` gone) is not renewed, as if the key had gone.
local delay = tonumber(ARGV[3]) or 0
if delay > 0 and redis.call('EXISTS', KEYS[2]) == 0 then return 0 end
redis.call('PEXPIRE', KEYS[1], ARGV[2] + delay)
-- The holder's record lives as long as the lease (absent when an older client acquired).
if KEYS[2] then redis.call('PEXPIRE', KEYS[2], ARGV[2]) end
return 1

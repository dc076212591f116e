-- Renew one master's lease (the contract: EXTEND in src/backends/redlock/scripts.ts).
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
-- The holder's record lives as long as the lease (absent when an older client acquired).
if KEYS[2] then redis.call('PEXPIRE', KEYS[2], ARGV[2]) end
return 1

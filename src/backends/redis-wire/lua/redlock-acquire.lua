-- Redlock phase 1 on one master (the contract: ACQUIRE in src/backends/redlock/scripts.ts).
local l, t = KEYS[1], KEYS[2]
local value = ARGV[1]
-- The lease key outlives the lease by the lock-delay (ARGV[5], ms); `ri` lives exactly as
-- long as the lease, so a lease key without it is a holder that vanished (docs/backends/redlock.md).
local keep = ARGV[2] + (tonumber(ARGV[5]) or 0)
local fresh = redis.call('SET', l, value, 'NX', 'PX', keep)
if not fresh then
  if redis.call('GET', l) ~= value then return {0, redis.call('PTTL', l)} end
  redis.call('SET', l, value, 'PX', keep)
  redis.call('PEXPIRE', KEYS[3], ARGV[2])
end
local tm = redis.call('TIME')
-- A new hold: who holds (the client's opaque record) and since when, for inspect and list.
if fresh then redis.call('SET', KEYS[3], tm[1] .. string.format('%03d', tm[2] / 1000) .. '|' .. ARGV[4], 'PX', ARGV[2]) end
local here = tm[1] * 1000000 + tm[2]
local last = redis.call('GET', t)
if last and tonumber(last) > here then here = last end
-- A proposal more than a minute (60,000,000 µs) ahead of this master's clock comes from a
-- client clock running ahead: stored, it would outlive the register's expiry and put a later
-- holder's token below it. It is refused, and phase 2 writes `max + 1` of the registers.
if tonumber(ARGV[3]) > tonumber(here) and tonumber(ARGV[3]) <= tm[1] * 1000000 + tm[2] + 60000000 then
  -- The register outlives the lease by 10 min (600000 ms), as in redlock-fence.lua.
  redis.call('SET', t, ARGV[3], 'PX', ARGV[2] + 600000)
  return {1, here, 1}
end
return {1, here, 0}

-- Break a lock on purpose (the contract: FORCE in src/backends/redis/scripts.ts).
--@include prelude
--@include prelude-handoff
local h, x, t, q, qx, qw, qs = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7]
local inbox = ARGV[1]
local now, now_us = clock()
local ended = 0
for _, v in ipairs(redis.call('HVALS', h)) do
  local _, _, _, exp = parse(v)
  if exp and exp > now then ended = ended + 1 end
end
-- Every hold goes at once, lockDelay included: a broken holder's token is fenced off below.
redis.call('DEL', h, x)
changed(inbox, h)
-- One step up the counter: every broken token is now below the last one and the next grant.
redis.call('SET', t, next_token(t, now_us), 'PX', 601000)
-- The next in line takes over now, as after a release (handed the lock or woken).
if redis.call('EXISTS', q) == 1 then after_release(h, x, t, q, qx, qw, qs, inbox, now, now_us, true) end
return ended

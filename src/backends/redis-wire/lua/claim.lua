-- Claim a hand-off held on receipt (the contract: CLAIM in src/backends/redis/scripts.ts).
--@include prelude
--@include prelude-handoff
local h, x, t = KEYS[1], KEYS[2], KEYS[3]
local field, kind, token, wid = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local ttl, delay = tonumber(ARGV[5]), tonumber(ARGV[6])
local now = clock()
local v = redis.call('HGET', h, field)
if not v then return 0 end
local hk, count, tok, exp, dl, hw, rest = parse(v)
if hk ~= kind or tok ~= token or hw ~= wid or exp <= now then return 0 end
-- Without an index `x` the hash holds at most one field (the invariant in
-- src/backends/redis/scripts.ts): this one, so put_hold needs no HGETALL to know it is alone.
local live = nil
if redis.call('EXISTS', x) == 0 then live = {field, v} end
take_handoff(h, x, t, field, hk, count, tok, exp, ttl, delay, now, rest, live)
return 1

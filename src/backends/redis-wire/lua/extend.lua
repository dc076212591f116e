-- Renew a hold (the contract: EXTEND in src/backends/redis/scripts.ts).
--@include prelude
local h, x, t = KEYS[1], KEYS[2], KEYS[3]
local field, kind, token, ttl = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4])
local now = clock()
local v = redis.call('HGET', h, field)
if not v then return 0 end
local hk, count, tok, exp, dl, hw, rest = parse(v)
if hk ~= kind or tok ~= token or exp <= now then return 0 end
-- Never shorten: a re-entered hold may carry another client's longer lease.
if now + ttl > exp then
  put_hold(h, x, t, field, pack(hk, count, tok, now + ttl, dl, hw, rest), now + ttl + dl)
end
return 1

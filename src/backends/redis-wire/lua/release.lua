-- Release one hold (the contract: RELEASE in src/backends/redis/scripts.ts).
-- Not held (expired and purged, taken over, released): nothing to read the clock for.
local v = redis.call('HGET', KEYS[1], ARGV[1])
if not v then return 0 end
local tm = redis.call('TIME')
local now = tm[1] * 1000 + math.floor(tm[2] / 1000)
-- EXISTS counts a key named twice twice: 2 × (queue exists) + (index `x` exists), one call.
local e = redis.call('EXISTS', KEYS[4], KEYS[4], KEYS[2])
local queued = e >= 2
-- No queue, no index of several holders (so the hash holds this one field): the sole holder,
-- if not re-entered, goes inline (what drop() does then). The record must start with
-- '<kind>|1|<token>|' and its lease must not have run out (lean, as in acquire-free.lua: a
-- prefix compare, not a full parse).
if e == 0 then
  local p = ARGV[2] .. '|1|' .. ARGV[3] .. '|'
  if string.sub(v, 1, #p) == p and tonumber(string.match(v, '^%d+', #p + 1)) > now then
    redis.call('DEL', KEYS[1])
    redis.call('PUBLISH', string.sub(ARGV[4], 1, -3) .. 'changes', string.sub(KEYS[1], 1, -3))
    return 1
  end
end
--@include prelude
--@include prelude-handoff
local h, x, t, q, qx, qw, qs = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7]
local field, kind, token, inbox = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local hk, count, tok, exp, dl, hw, rest = parse(v)
-- A lease that ran out is not ours any more, even while lockDelay still keeps others out.
if hk ~= kind or tok ~= token or exp <= now then
  purge_holders(h, x, now)
  return 0
end
changed(inbox, h)
if count > 1 then
  redis.call('HSET', h, field, pack(hk, count - 1, tok, exp, dl, hw, rest))
  return 1
end
-- A queue and no index (e == 2): this was the only holder, as drop() would find. Its record
-- goes in after_release (with the queue keys, when it can: one DEL).
local free = e == 2
if not free then free = drop(h, x, t, field) end
if queued then
  local woke = after_release(h, x, t, q, qx, qw, qs, inbox, now, tm[1] * 1000000 + tm[2], free, e == 2)
  if woke then return woke end
end
return 1

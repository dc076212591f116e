-- Abandon an acquisition (the contract: CANCEL in src/backends/redis/scripts.ts).
--@include prelude
--@include prelude-handoff
local h, x, t, q, qx, qw, qs = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7]
local wid, inbox, owner, fresh = ARGV[1], ARGV[2], ARGV[3], ARGV[4] == '1'
local now, now_us = clock()
local info = redis.call('HGET', qw, wid)
local rank = dequeue(q, qx, qw, wid)
if rank then changed(inbox, h) end
local dropped = false
for _, f in ipairs(redis.call('HKEYS', h)) do
  local mine = f == owner or (fresh and string.sub(f, 1, #owner + 1) == owner .. '\0')
  if mine then
    local hk, count, tok, exp, dl, hw, rest = parse(redis.call('HGET', h, f))
    if not fresh and wid ~= '' and hw == wid and count > 1 then
      redis.call('HSET', h, f, pack(hk, count - 1, tok, exp, dl, hw, rest))
      return 1
    end
    if fresh or (wid ~= '' and hw == wid) then
      drop(h, x, t, f)
      dropped = true
      changed(inbox, h)
    end
  end
end
if dropped then
  if redis.call('EXISTS', q) == 1 then after_release(h, x, t, q, qx, qw, qs, inbox, now, now_us) end
  return 1
end
if not rank then return 0 end
touch_queue(q, qx, qw, qs)
-- The new head may go now; so may a reader that waited only behind this writer.
local c = ''
if info then c = string.sub(info, 1, 1) end
if rank == 0 or c == 'm' or c == 'w' then
  local nxt = redis.call('ZRANGE', q, rank, rank)[1]
  if nxt then notify(inbox, nxt, nxt) end
end
return 1

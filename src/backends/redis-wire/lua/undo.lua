-- Undo an attempt whose reply never came (the contract: UNDO in src/backends/redis/scripts.ts).
--@include prelude
--@include prelude-handoff
local h, x, t, q, qx, qw, qs = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7]
local owner, stamp, wid, inbox = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local now, now_us = clock()
local undone = 0
-- The hold (or the one level of re-entry) that this attempt made, if it made one: nobody was
-- told of it, so it goes without lockDelay.
for _, f in ipairs(redis.call('HKEYS', h)) do
  if f == owner or string.sub(f, 1, #owner + 1) == owner .. '\0' then
    local hk, count, tok, exp, dl, hw, rest = parse(redis.call('HGET', h, f))
    if hw == stamp then
      undone = 1
      if count > 1 then
        redis.call('HSET', h, f, pack(hk, count - 1, tok, exp, dl, '', rest))
      else
        drop(h, x, t, f)
      end
    end
  end
end
-- Its queue entry, if it made one.
local rank = dequeue(q, qx, qw, wid)
if rank then undone = 1 end
if undone == 1 then changed(inbox, h) end
if undone == 1 and redis.call('EXISTS', q) == 1 and (rank == 0 or redis.call('EXISTS', h) == 0) then
  after_release(h, x, t, q, qx, qw, qs, inbox, now, now_us)
end
return undone

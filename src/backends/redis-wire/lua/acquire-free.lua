-- ACQUIRE's fast path, run before the helpers exist (they cost a measurable share of a short
-- script). Nobody holds and nobody waits (the SET NX PX case): grant inline. Same fields as
-- grant() in acquire.lua; the keys expire with this hold, the counter 10 min later (a quick
-- re-acquire continues the sequence).
if redis.call('EXISTS', KEYS[1], KEYS[4]) == 0 then
  local tm = redis.call('TIME')
  local s, us = tonumber(tm[1]), tonumber(tm[2])
  local now, tok = s * 1000 + math.floor(us / 1000), s * 1000000 + us
  local next_ = tonumber(redis.call('GET', KEYS[3]) or '0') + 1
  if next_ > tok then tok = next_ end
  tok = string.format('%.0f', tok)
  local kind, ttl, delay = ARGV[1], tonumber(ARGV[4]), tonumber(ARGV[5])
  local field = ARGV[3]
  if kind == 's' then field = field .. '\0' .. tok .. '\0' .. ARGV[2] .. '\0' .. (ARGV[14] or '1') end
  local at = now + ttl + delay
  redis.call('HSET', KEYS[1], field, kind .. '|1|' .. tok .. '|' .. string.format('%.0f', now + ttl) .. '|' .. string.format('%.0f', delay) .. '|' .. ARGV[12] .. '|' .. string.format('%.0f', now) .. '|' .. ARGV[13])
  redis.call('ZADD', KEYS[2], string.format('%.0f', at), field)
  redis.call('SET', KEYS[3], tok, 'PXAT', string.format('%.0f', at + 601000))
  redis.call('PEXPIREAT', KEYS[1], string.format('%.0f', at + 1000))
  redis.call('PEXPIREAT', KEYS[2], string.format('%.0f', at + 1000))
  -- Watchers hear of the new hold (changed() in prelude-handoff.lua; its helpers do not exist yet).
  redis.call('PUBLISH', string.sub(ARGV[10], 1, -3) .. 'changes', string.sub(KEYS[1], 1, -3))
  return {1, tok, field}
end

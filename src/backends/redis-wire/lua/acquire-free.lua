-- An acquisition's fast path, included first by acquire.lua and acquire-solo.lua (before the
-- helpers exist: they cost a measurable share of a short script). The including script names
-- what it reads: keys h q x t; kind, owner, ttl_arg and delay_arg (ms, as sent), stamp, who,
-- inbox; sem (a semaphore hold's '\0<permits>\0<weight>' field suffix, else false); solo (reply
-- with the bare token, as ACQUIRE_SOLO does, instead of ACQUIRE's {1, token, field}).
-- Nobody holds and nobody waits (the SET NX PX case): grant inline. Same fields as grant() in
-- acquire.lua; the hash expires with this hold, the counter 10 min later (a quick re-acquire
-- continues the sequence). A sole holder has no index `x`: its expiry is in its record
-- (put_hold() in prelude.lua; an `x` left without a hash sends this to the full path).
-- Lean on purpose (docs/backends/redis.md, "Lua scripts"): every redis.call and every
-- string.format costs about half a µs of the server's single thread. So numbers go to
-- redis.call as Lua numbers (Redis prints them with %.17g: exact below 2^53), ms times are
-- concatenated as they are (%.14g prints 13 digits exactly), the µs token is spliced from
-- TIME's two strings, and the counter is read and written by one SET … GET.
-- EXISTS counts a key named n times n times: e0 = h + q + 3 × x, so the full path knows
-- whether `x` exists without asking again (e0 >= 3).
local e0 = redis.call('EXISTS', h, q, x, x, x)
if e0 == 0 then
  local tm = redis.call('TIME')
  local now = tm[1] * 1000 + math.floor(tm[2] / 1000)
  local ttl = tonumber(ttl_arg)
  local at = now + ttl + tonumber(delay_arg)
  local tok = tm[1] .. string.sub('00000' .. tm[2], -6)
  local last = redis.call('SET', t, tok, 'PXAT', at + 601000, 'GET')
  -- The token is max(last + 1, server time in µs): the counter was ahead (the clock stepped back).
  if last and tonumber(last) >= tonumber(tok) then
    tok = string.format('%.0f', tonumber(last) + 1)
    redis.call('SET', t, tok, 'PXAT', at + 601000)
  end
  local field = owner
  if sem then field = field .. '\0' .. tok .. sem end
  redis.call('HSET', h, field, kind .. '|1|' .. tok .. '|' .. (now + ttl) .. '|' .. delay_arg .. '|' .. stamp .. '|' .. now .. '|' .. who)
  redis.call('PEXPIREAT', h, at + 1000)
  -- Watchers hear of the new hold (changed() in prelude-handoff.lua; its helpers do not exist yet).
  redis.call('PUBLISH', string.sub(inbox, 1, -3) .. 'changes', string.sub(h, 1, -3))
  if solo then return tok end
  return {1, tok, field}
end

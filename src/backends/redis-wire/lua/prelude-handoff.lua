-- Helpers for queue entries, dropping a hold and the fair hand-off after a release.
-- A waiter id is '<client inbox id>.<n>': the message goes to that client's inbox only.
local function notify(inbox, wid, payload)
  redis.call('PUBLISH', inbox .. string.match(wid, '^([^.]*)'), payload)
end
-- Tell watchers (channel '<prefix>changes', from the inbox prefix '<prefix>w:') that the holds
-- or queue of the lock at h changed: the message is the key base '<prefix>{tag}'.
local function changed(inbox, h)
  redis.call('PUBLISH', string.sub(inbox, 1, -3) .. 'changes', string.sub(h, 1, -3))
end
-- Remove a queue entry. No touch_queue: removing one never moves the latest expiry of the
-- rest later, and the keys already expire after that.
local function unqueue(q, qx, qw, wid)
  redis.call('ZREM', q, wid)
  redis.call('ZREM', qx, wid)
  redis.call('HDEL', qw, wid, '\0' .. wid)
end
local function dequeue(q, qx, qw, wid)
  if wid == '' then return false end
  local rank = redis.call('ZRANK', q, wid)
  if not rank then return false end
  unqueue(q, qx, qw, wid)
  return rank
end
-- Remove one hold entirely. Returns true when nobody holds any more.
local function drop(h, x, t, field)
  if redis.call('HLEN', h) == 1 then
    redis.call('DEL', h, x)
    return true
  end
  redis.call('HDEL', h, field)
  redis.call('ZREM', x, field)
  touch_holders(h, x, t)
  return false
end
-- Claim a hand-off made to this waiter: the lease starts now, for the claimer's ttl and
-- lockDelay, never shorter than the hold already is (its owner may have re-entered it from
-- elsewhere meanwhile, vouching for a longer ttl).
-- live: the hash's fields and values when the caller knows `x` does not exist (put_hold).
local function take_handoff(h, x, t, field, kind, count, token, exp, ttl, delay, now, rest, live)
  if now + ttl > exp then exp = now + ttl end
  put_hold(h, x, t, field, pack(kind, count, token, exp, delay, '', rest), exp + delay, live)
end
-- After a hold ended: hand the lock to an exclusive (mutex/write) head waiter that sent a
-- secret (fair or not) when nobody else holds, else wake the head. A hand-off is a hold the head must claim (CLAIM, or its next attempt)
-- within CLAIM_MS: a head that vanished is skipped within that bound (plus its lockDelay, as
-- it may have held on receipt), not a whole ttl. Its message carries the token, the end of
-- that window and the secret of the head's last attempt (read here, never sent by anyone
-- else), so the head may hold on receipt. The next in line is told when to re-check.
-- Call it only when the queue key exists. free: nobody holds any more (no need to look).
-- stale: the hash `h` still holds only the record just released, for this function to delete:
-- with the queue keys when the head it hands the lock to was the only entry (q, qx and qw hold
-- the same waiter ids: docs/backends/redis.md, "How it works"), one DEL for the four (the
-- counter qs stays). Returns the message it sent the waiter it woke or handed the lock to
-- (its id first), or false: the releaser's client delivers it at once to a waiter of its own
-- process (docs/backends/redis.md, "Waiting by notification").
local CLAIM_MS = 2000
local function after_release(h, x, t, q, qx, qw, qs, inbox, now, now_us, free, stale)
  purge_queue(q, qx, qw, now)
  -- The head and the one behind it (told when the head's claim window ends).
  local two = redis.call('ZRANGE', q, 0, 1)
  local nxt = two[1]
  local rec = nxt and redis.call('HMGET', qw, nxt, '\0' .. nxt)
  local info = rec and rec[1]
  if info and (free or redis.call('EXISTS', h) == 0) then
    -- The fair flag (and a semaphore's weight) after the kind letter do not matter here.
    local k, ttl, dl, secret, owner = string.match(info, '^(%a)%d+|(%d+)|(%d+)|([^|]*)|(.*)$')
    if (k == 'm' or k == 'w') and secret ~= '' then
      local claim = tonumber(ttl)
      if claim > CLAIM_MS then claim = CLAIM_MS end
      local delay = tonumber(dl)
      local at, free_at = now + claim, now + claim + delay
      local tok = take_token(t, now_us, 'PXAT', free_at + 601000)
      local second = two[2]
      if second then
        if stale then redis.call('DEL', h) end
        unqueue(q, qx, qw, nxt)
      elseif stale then
        redis.call('DEL', h, q, qx, qw)
      else
        redis.call('DEL', q, qx, qw)
      end
      -- The hold keeps the waiter's record, acquired now. Nobody else holds: no index `x`.
      local who = rec[2]
      if who then who = '|' .. fmt(now) .. string.match(who, '^%d*(|.*)$') end
      redis.call('HSET', h, owner, pack(k, 1, tok, at, delay, nxt, who))
      redis.call('PEXPIREAT', h, free_at + 1000)
      -- Redis writes the last reply queued first: the head's message goes out before the notice.
      if second then notify(inbox, second, second .. '|next|' .. fmt(free_at - now)) end
      local msg = nxt .. '|' .. tok .. '|' .. fmt(at) .. '|' .. secret
      notify(inbox, nxt, msg)
      return msg
    end
  end
  if stale then redis.call('DEL', h) end
  if not nxt then return false end
  notify(inbox, nxt, nxt)
  return nxt
end

/**
 * The Lua helpers every Redis script shares (clock, hold records, queue upkeep, the
 * hand-off after a release), and how a script is built from them. The data layout they work
 * on is described in scripts.ts.
 */
import { createHash } from 'node:crypto';

/** A script with its SHA-1, for EVALSHA. */
export interface LuaScript {
  readonly name: string;
  readonly source: string;
  readonly sha: string;
}

/**
 * `head` runs before the shared helpers are defined: a script that returns there (the common,
 * uncontended case) does not pay for creating the helpers' closures, a measurable share of a
 * short script's time. It may leave locals for `body`.
 */
export function script(name: string, body: string, head = ''): LuaScript {
  const source = head + PRELUDE + body;
  return { name, source, sha: createHash('sha1').update(source).digest('hex') };
}

/** How long a fair hand-off waits for its head to claim it (at most the head's ttl). */
export const CLAIM_MS = 2_000;

export const PRELUDE = `
local function fmt(n) return string.format('%.0f', n) end
local function clock()
  local t = redis.call('TIME')
  local s, us = tonumber(t[1]), tonumber(t[2])
  return s * 1000 + math.floor(us / 1000), s * 1000000 + us
end
local function parse(v)
  local kind, count, token, exp, delay, wid = string.match(v, '^(%a)|(%d+)|(%d+)|(%d+)|(%d+)|(.*)$')
  return kind, tonumber(count), token, tonumber(exp), tonumber(delay), wid
end
local function pack(kind, count, token, exp, delay, wid)
  return kind .. '|' .. fmt(count) .. '|' .. token .. '|' .. fmt(exp) .. '|' .. fmt(delay) .. '|' .. wid
end
local function next_token(t, now_us)
  local last = tonumber(redis.call('GET', t) or '0')
  local token = last + 1
  if now_us > token then token = now_us end
  return fmt(token)
end
local function purge_holders(h, x, now)
  local dead = redis.call('ZRANGEBYSCORE', x, '-inf', fmt(now))
  if #dead > 0 then
    redis.call('HDEL', h, unpack(dead))
    redis.call('ZREMRANGEBYSCORE', x, '-inf', fmt(now))
  end
end
local function purge_queue(q, qx, qw, now)
  local dead = redis.call('ZRANGEBYSCORE', qx, '-inf', fmt(now))
  if #dead > 0 then
    redis.call('ZREM', q, unpack(dead))
    redis.call('HDEL', qw, unpack(dead))
    redis.call('ZREMRANGEBYSCORE', qx, '-inf', fmt(now))
  end
end
local function touch_holders(h, x, t)
  local last = redis.call('ZRANGE', x, -1, -1, 'WITHSCORES')
  if last[2] then
    local at = tonumber(last[2]) + 1000
    redis.call('PEXPIREAT', h, fmt(at))
    redis.call('PEXPIREAT', x, fmt(at))
    -- The counter outlives the holders so a quick re-acquire continues the sequence.
    redis.call('PEXPIREAT', t, fmt(at + 600000))
  end
end
local function touch_queue(q, qx, qw, qs)
  local last = redis.call('ZRANGE', qx, -1, -1, 'WITHSCORES')
  if last[2] then
    local at = fmt(tonumber(last[2]) + 1000)
    redis.call('PEXPIREAT', q, at)
    redis.call('PEXPIREAT', qx, at)
    redis.call('PEXPIREAT', qw, at)
    redis.call('PEXPIREAT', qs, at)
  end
end
local function head(q)
  return redis.call('ZRANGE', q, 0, 0)[1]
end
-- A waiter id is '<client inbox id>.<n>': the message goes to that client's inbox only.
local function notify(inbox, wid, payload)
  redis.call('PUBLISH', inbox .. string.match(wid, '^([^.]*)'), payload)
end
local function dequeue(q, qx, qw, wid)
  if wid == '' then return false end
  local rank = redis.call('ZRANK', q, wid)
  if not rank then return false end
  redis.call('ZREM', q, wid)
  redis.call('ZREM', qx, wid)
  redis.call('HDEL', qw, wid)
  return rank
end
-- Remove one hold entirely.
local function drop(h, x, t, field)
  if redis.call('HLEN', h) == 1 then
    redis.call('DEL', h, x)
  else
    redis.call('HDEL', h, field)
    redis.call('ZREM', x, field)
    touch_holders(h, x, t)
  end
end
-- Claim a hand-off made to this waiter: the lease starts now, for the claimer's ttl and
-- lockDelay, never shorter than the hold already is (its owner may have re-entered it from
-- elsewhere meanwhile, vouching for a longer ttl).
local function take_handoff(h, x, t, field, kind, count, token, exp, ttl, delay, now)
  if now + ttl > exp then exp = now + ttl end
  redis.call('HSET', h, field, pack(kind, count, token, exp, delay, ''))
  redis.call('ZADD', x, fmt(exp + delay), field)
  touch_holders(h, x, t)
end
-- After a hold ended: hand the lock to a fair exclusive head waiter when nobody else holds,
-- else wake the head. A hand-off is a hold the head must claim (CLAIM, or its next attempt)
-- within CLAIM_MS, with no lockDelay until then: a head that vanished is skipped within that
-- bound, not a whole ttl. Its message carries the token and the end of that window, so the
-- head may hold on receipt. The next in line is told the window, to re-check when it ends.
-- Call it only when the queue key exists. Returns the id of the waiter it woke or handed the
-- lock to, or false.
local CLAIM_MS = ${CLAIM_MS}
local function after_release(h, x, t, q, qx, qw, qs, inbox, now, now_us)
  purge_queue(q, qx, qw, now)
  local nxt = head(q)
  if not nxt then return false end
  local info = redis.call('HGET', qw, nxt)
  if info and redis.call('EXISTS', h) == 0 then
    local k, f, ttl, owner = string.match(info, '^(%a)(%d)|(%d+)|%d+|(.*)$')
    if f == '1' and (k == 'm' or k == 'w') then
      local claim = tonumber(ttl)
      if claim > CLAIM_MS then claim = CLAIM_MS end
      local tok = next_token(t, now_us)
      local at = now + claim
      redis.call('HSET', h, owner, pack(k, 1, tok, at, 0, nxt))
      redis.call('ZADD', x, fmt(at), owner)
      redis.call('SET', t, tok, 'PXAT', fmt(at + 601000))
      redis.call('PEXPIREAT', h, fmt(at + 1000))
      redis.call('PEXPIREAT', x, fmt(at + 1000))
      -- No touch_queue: removing an entry never moves the latest expiry of the rest later.
      dequeue(q, qx, qw, nxt)
      -- Redis writes the last reply queued first: the head's message goes out before the notice.
      local second = head(q)
      if second then notify(inbox, second, second .. '|next|' .. fmt(claim)) end
      notify(inbox, nxt, nxt .. '|' .. tok .. '|' .. fmt(at))
      return nxt
    end
  end
  notify(inbox, nxt, nxt)
  return nxt
end
`;

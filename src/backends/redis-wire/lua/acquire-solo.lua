-- An acquisition's first attempt at a lock this client has not seen contended lately (the
-- contract: ACQUIRE_SOLO in src/backends/redis/scripts.ts): the fast path of acquire.lua on
-- only the keys and arguments it reads, so that the client builds, sends and parses about half
-- as much (docs/backends/redis.md, "Lua scripts"). Never a semaphore.
local h, q, x, t = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local kind, owner, ttl_arg, delay_arg, stamp, who, inbox = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6], ARGV[7]
local sem, solo = false, true
--@include acquire-free
-- Held, queued, or an index left: the full ACQUIRE decides (purges, re-entry, queue).
return 0

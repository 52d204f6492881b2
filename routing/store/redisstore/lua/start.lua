-- StartAttempt (behaviour §3.1, §3.2): count the attempt in flight until it finishes or expires,
-- and count it in the current minute's requests.
--
-- KEYS[1] inflight  sorted set: attempt id scored by its expiry (µs)
-- KEYS[2] state     the deployment's state record (common.lua)
-- ARGV[1] attempt id   ARGV[2] now (µs)   ARGV[3] expires (µs)   ARGV[4] minute (Unix minutes)
-- ARGV[5] state TTL (ms)   ARGV[6] in-flight grace (µs)
-- ARGV[7] reserved: '1' when reserve.lua already counted the request (only in flight here)
--
-- Invariants: an entry counts while now < its expiry, whoever wrote it, so a crashed
-- replica's entries stop counting one by one; expired entries are pruned on every write and
-- the summary (count, earliest expiry) is recomputed from the set in the same script; the set
-- outlives its latest entry by the grace period and vanishes with its last member, and the
-- state record (which carries the summary) lives at least as long.
local K_INFLIGHT, K_STATE = KEYS[1], KEYS[2]
local now = tonumber(ARGV[2])

local st = load_state(K_STATE)
prune(K_INFLIGHT, now)
redis.call('ZADD', K_INFLIGHT, ARGV[3], ARGV[1])
local last = redis.call('ZRANGE', K_INFLIGHT, -1, -1, 'WITHSCORES')
local keep = ms(tonumber(last[2]) - now) + ms(tonumber(ARGV[6]))
redis.call('PEXPIRE', K_INFLIGHT, istr(keep))
summarize(K_INFLIGHT, st)

if ARGV[7] ~= '1' and roll_minute(st, tonumber(ARGV[4])) then
  st.rpm = st.rpm + 1
end
save_state(K_STATE, st, math.max(tonumber(ARGV[5]), keep))
return 1

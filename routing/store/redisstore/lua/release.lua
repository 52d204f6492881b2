-- Release in-flight entries of one deployment without an outcome: Resilient replays the
-- releases of attempts that started in Redis and ended while it was unreachable.
--
-- KEYS[1] inflight   KEYS[2] state
-- ARGV[1] now (µs, the latest end among the released attempts)   ARGV[2] state TTL (ms)
-- ARGV[3…] attempt ids
--
-- Invariant: the summary in the state record is recomputed from the set, as by every other
-- writer; a deployment without state and without entries gets no record.
local K_INFLIGHT, K_STATE = KEYS[1], KEYS[2]

local st = load_state(K_STATE)
local inf, infx = st.inf, st.infx
redis.call('ZREM', K_INFLIGHT, unpack(ARGV, 3))
prune(K_INFLIGHT, tonumber(ARGV[1]))
summarize(K_INFLIGHT, st)
if st.inf ~= inf or st.infx ~= infx then
  save_state(K_STATE, st, tonumber(ARGV[2]))
end
return 1

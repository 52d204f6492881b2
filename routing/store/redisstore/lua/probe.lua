-- AcquireProbe (behaviour §5.4), exactly store.AcquireProbe: the first request to ask at a
-- half-open circuit owns the recovery probe for the probe TTL; the owner asking again keeps
-- it; everyone else is refused until the owner's TTL runs out.
--
-- KEYS[1] state
-- ARGV[1] request id   ARGV[2] now (µs)   ARGV[3] probe TTL (µs)
-- ARGV[4] failure window (µs)   ARGV[5] circuit grace (µs)   ARGV[6] state TTL (ms)
--
-- Invariant: one script run is one atomic read-modify-write of the circuit, so of any number
-- of concurrent callers on any number of replicas exactly one sees HALFOPEN and wins.
local key = KEYS[1]
local req, now = ARGV[1], tonumber(ARGV[2])

local st = load_state(key)
local c = st.c
local state = circuit_state(c, now)
if state == HALFOPEN then
  c.po = req
  c.pu = now + tonumber(ARGV[3])
  save_state(key, st, math.max(tonumber(ARGV[6]), circuit_ttl(c, now, tonumber(ARGV[4]), tonumber(ARGV[5]))))
  return 1
end
if state == PROBING and c.po == req then
  return 1
end
return 0

-- Unreserve: give back a reservation (reserve.lua) whose attempt never started, if its
-- minute is still the record's.
--
-- KEYS[1] state
-- ARGV[1] minute of the reservation (Unix minutes)   ARGV[2] tokens   ARGV[3] state TTL (ms)
local K_STATE = KEYS[1]

local st = load_state(K_STATE)
if st.m ~= tonumber(ARGV[1]) then return 0 end
st.rpm = math.max(st.rpm - 1, 0)
st.tpm = math.max(st.tpm - math.max(tonumber(ARGV[2]), 0), 0)
save_state(K_STATE, st, tonumber(ARGV[3]))
return 1

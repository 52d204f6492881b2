-- Reserve (behaviour §4.1, hard limits): count one request and a token estimate in the
-- deployment's minute if it is below its limits, in one atomic step, so concurrent
-- decisions on every replica never pass a limit together.
--
-- KEYS[1] state   the deployment's state record (common.lua)
-- ARGV[1] minute (Unix minutes)   ARGV[2] rpm limit (0 none)   ARGV[3] tpm limit (0 none)
-- ARGV[4] tokens (the estimate)   ARGV[5] state TTL (ms)
--
-- Reply: 1 reserved, 0 at or over a limit (nothing written).
--
-- A replica whose clock lags (its minute older than the record's) is checked against, and
-- counted in, the newest minute: a limit must hold whoever asks.
local K_STATE = KEYS[1]
local rpm_limit, tpm_limit = tonumber(ARGV[2]), tonumber(ARGV[3])

local st = load_state(K_STATE)
roll_minute(st, tonumber(ARGV[1]))
if (rpm_limit > 0 and st.rpm >= rpm_limit) or (tpm_limit > 0 and st.tpm >= tpm_limit) then
  return 0
end
st.rpm = st.rpm + 1
local tokens = tonumber(ARGV[4])
if tokens > 0 then st.tpm = st.tpm + tokens end
save_state(K_STATE, st, tonumber(ARGV[5]))
return 1

-- Shared helpers, prepended to every routing-state script (see scripts.go).
--
-- Times and durations are integer microseconds: Unix µs of this century are far below 2^53,
-- so a Lua double holds them exactly. 0 stands for the zero time.Time (no timestamp).
-- Nothing here reads a clock: `now` always comes from the caller.

local AVAILABLE, COOLDOWN, HALFOPEN, PROBING = 0, 1, 2, 3
local CAUSE_TRANSIENT, CAUSE_CONFIGURATION = 1, 2

local function num(v)
  if not v or v == '' then return 0 end
  return tonumber(v) or 0
end

-- istr formats an integral number without exponent or fraction.
local function istr(x) return string.format('%d', x) end

-- zstr is istr with 0 written as '' (read back as 0), which keeps the state record short.
local function zstr(x)
  if x == 0 then return '' end
  return istr(x)
end

-- fstr formats a float so that it parses back to the same double.
local function fstr(x) return string.format('%.17g', x) end

-- ms converts a µs duration to whole milliseconds for PEXPIRE/PX, rounding up.
local function ms(us)
  if us < 0 then return 0 end
  return math.ceil(us / 1000)
end

-- The state record of one deployment is ONE string, so a routing read is one GET (or one
-- MGET for every candidate) and a single bulk reply per deployment. Fields, '|'-separated:
--
--   m|rpm|tpm|lat|tp|inf|infx|health|open|cause|fails|ws|oa|ou|reo|pu|ca|po
--
--   m, rpm, tpm   the minute (Unix minutes) of the RPM/TPM counters, and the counters
--   lat, tp       latency (s) and throughput (tokens/s) EWMAs, '' before the first sample
--   inf, infx     in-flight summary: live entries of the inflight set and their earliest
--                 expiry (µs), rewritten by every script that touches the set
--   health        store.HealthBuckets ','-separated slots "minute:successes:failures",
--                 slot = store.HealthSlot(minute) (finish.lua gets the count from Go)
--   open … ca     the circuit (store.Circuit): open, cause, failures, window start, opened
--                 at, open until, reopens, probe until, closed at
--   po            the probe owner, last because it is free text (it may contain '|')
--
-- Integers use zstr ('' is 0). states.go parses the same format: keep the two in step.
local STATE_SEPARATORS = 17

local function load_state(key)
  local v = redis.call('GET', key)
  local f = {}
  if v then
    local pos = 1
    for i = 1, STATE_SEPARATORS do
      local j = string.find(v, '|', pos, true)
      if not j then break end
      f[i] = string.sub(v, pos, j - 1)
      pos = j + 1
    end
    if #f == STATE_SEPARATORS then f[STATE_SEPARATORS + 1] = string.sub(v, pos) end
  end
  return {
    m = num(f[1]), rpm = num(f[2]), tpm = num(f[3]), lat = f[4] or '', tp = f[5] or '',
    inf = num(f[6]), infx = num(f[7]), h = f[8] or '',
    c = {
      open = num(f[9]), cause = num(f[10]), fails = num(f[11]), ws = num(f[12]),
      oa = num(f[13]), ou = num(f[14]), reo = num(f[15]), pu = num(f[16]), ca = num(f[17]),
      po = f[18] or '',
    },
  }
end

-- save_state writes st back with a TTL of at least `ttl` ms and never shorter than the key
-- already had: each script knows only the horizons it touched (the stats' day, the circuit's
-- cooldown/probe/window end, the latest in-flight expiry), and the longest one written by
-- any of them must survive. The TTL is garbage collection only.
local function save_state(key, st, ttl)
  local c = st.c
  local v = table.concat({
    zstr(st.m), zstr(st.rpm), zstr(st.tpm), st.lat, st.tp, zstr(st.inf), zstr(st.infx), st.h,
    zstr(c.open), zstr(c.cause), zstr(c.fails), zstr(c.ws), zstr(c.oa), zstr(c.ou), zstr(c.reo),
    zstr(c.pu), zstr(c.ca), c.po,
  }, '|')
  local left = redis.call('PTTL', key)
  if left > ttl then ttl = left end
  redis.call('SET', key, v, 'PX', istr(ttl))
end

-- circuit_state is store.Circuit.State: half-open is derived from OpenUntil, never stored.
local function circuit_state(c, now)
  if c.open ~= 1 then return AVAILABLE end
  if now < c.ou then return COOLDOWN end
  if c.po ~= '' and now < c.pu then return PROBING end
  return HALFOPEN
end

-- started_before is store.Circuit.StartedBefore: whether an attempt that started at
-- `started` (0: unknown, never before) began before the circuit's last transition as of now
-- (store.Circuit.LastTransition: the close, the opening, or the end of the cooldown).
local function started_before(c, started, now)
  if started == 0 then return false end
  local last = c.ca
  if c.open == 1 then
    if now < c.ou then last = c.oa else last = c.ou end
  end
  return started < last
end

-- circuit_ttl is how long (ms) a circuit just written must be kept: past every stored
-- timestamp that can still matter (cooldown end, probe end, failure window end) by `grace`,
-- so an idle half-open circuit is forgotten (read as closed) only after a long silence.
local function circuit_ttl(c, now, window, grace)
  return ms(math.max(c.ou, c.pu, c.ws + window) - now) + ms(grace)
end

local function circuit_reply(c)
  return { c.open, c.cause, c.fails, c.ws, c.oa, c.ou, c.reo, c.po, c.pu, c.ca }
end

-- prune drops the in-flight entries that expired by now (an entry counts while now < its
-- expiry, behaviour §3.1), so a crashed replica's entries leave the set with the next write.
local function prune(inflight, now)
  redis.call('ZREMRANGEBYSCORE', inflight, '-inf', istr(now))
end

-- summarize refreshes st's in-flight summary from the set, the source of truth: the number
-- of entries and the earliest expiry among them. A reader whose now is before that expiry
-- can trust the count without reading the set (every entry is still live).
local function summarize(inflight, st)
  st.inf = redis.call('ZCARD', inflight)
  st.infx = 0
  if st.inf > 0 then
    st.infx = tonumber(redis.call('ZRANGE', inflight, 0, 0, 'WITHSCORES')[2])
  end
end

-- roll_minute moves the RPM/TPM counters to `minute` and reports whether a write for
-- `minute` may count. Counters only move forward: a replica whose clock lags writes into a
-- minute nobody reads any more, so its count is dropped rather than reset the current one.
local function roll_minute(st, minute)
  if st.m < minute then
    st.m, st.rpm, st.tpm = minute, 0, 0
    return true
  end
  return st.m == minute
end

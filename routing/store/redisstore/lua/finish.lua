-- FinishAttempt for one deployment: release the in-flight entry and apply the outcome to the
-- deployment's circuit and metrics in one atomic step. It implements exactly
-- store.ApplyFailure, store.ApplySuccess and store.ApplyConfigurationFailure plus the metric
-- updates of memstore (behaviour §3, §5). A throttle's effect on the failure domain is
-- capacity.lua, sent in the same pipeline: the domain lives on another slot.
--
-- KEYS[1] state   KEYS[2] inflight   KEYS[3] counted:<request>
-- ARGV[1]  attempt id          ARGV[2]  request id        ARGV[3]  now (µs)
-- ARGV[4]  effect (store.Effect: 0 neutral, 1 success, 2 transient, 3 throttle, 4 quota,
--          5 configuration)
-- ARGV[5]  allowedFails        ARGV[6]  cooldown (µs)     ARGV[7]  failure window (µs)
-- ARGV[8]  max cooldown (µs)   ARGV[9]  configuration cooldown (µs)
-- ARGV[10] jitter in [0,1]     ARGV[11] latency (s, '' on failures)
-- ARGV[12] throughput (tokens/s, '' when unknown)   ARGV[13] total tokens
-- ARGV[14] dedupe TTL (µs)     ARGV[15] minute (Unix minutes)
-- ARGV[16] circuit grace (µs)  ARGV[17] state TTL (ms)    ARGV[18] dedupe grace (µs)
-- ARGV[19] attempt start (µs, 0 unknown)   ARGV[20] health buckets (store.HealthBuckets)
-- ARGV[21] reserved tokens (reserve.lua's estimate, 0 none)   ARGV[22] their minute
--
-- Reply: { flags, open, cause, fails, ws, oa, ou, reo, po, pu, ca } with flags bits
-- 1 counted, 2 opened, 4 reopened, 8 closed, 16 cleared, 32 quarantined, 64 probe released.
--
-- Invariants kept (one script run is atomic across every replica):
--   * at most one counted failure per logical request and deployment (the counted key holds
--     the dedupe expiry, compared with `now`; its TTL is only garbage collection);
--   * the circuit opens exactly once when the window's count first exceeds allowedFails;
--   * an open circuit is never extended by a late failure: only the probe owner's failure
--     reopens it, with the exponential cooldown computed from the stored reopen count and
--     the cause that opened it, which a reopen keeps;
--   * a failure of an attempt that started before the circuit's last transition (close,
--     opening, end of cooldown) changes nothing of the circuit;
--   * only the probe owner's success closes a half-open circuit; its ending without a
--     verdict (neutral, throttle, quota) frees the probe;
--   * the in-flight summary is recomputed from the set after the release and the prune.
local K_STATE, K_INFLIGHT, K_COUNTED = KEYS[1], KEYS[2], KEYS[3]
local attempt, req, now, effect = ARGV[1], ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4])
local s = {
  allowed_fails = tonumber(ARGV[5]),
  cooldown = tonumber(ARGV[6]),
  window = tonumber(ARGV[7]),
  max_cooldown = tonumber(ARGV[8]),
  config_cooldown = tonumber(ARGV[9]),
}
local jitter = tonumber(ARGV[10])
local minute = tonumber(ARGV[15])
local circuit_grace = tonumber(ARGV[16])
local started = tonumber(ARGV[19])
local health_buckets = tonumber(ARGV[20])

local COUNTED, OPENED, REOPENED, CLOSED, CLEARED, QUARANTINED, RELEASED = 1, 2, 4, 8, 16, 32, 64

-- store.ReopenCooldown: base × 2^n × (1 + jitter/4), capped at MaxCooldown.
local function reopen_cooldown(cause, n)
  local base = s.cooldown
  if cause == CAUSE_CONFIGURATION then base = s.config_cooldown end
  if base <= 0 then base = 1000000 end
  local d = base * 2 ^ math.min(n, 30) * (1 + jitter / 4)
  if s.max_cooldown > 0 and d > s.max_cooldown then return s.max_cooldown end
  return math.floor(d)
end

-- reopen: a failed probe (behaviour §5.4), store.reopen. The cause that opened the circuit stays,
-- and with it the cooldown base (a quarantine keeps configurationCooldown).
local function reopen(c)
  c.reo = c.reo + 1
  c.oa = now
  c.ou = now + reopen_cooldown(c.cause, c.reo)
  c.po, c.pu = '', 0
  return REOPENED, true
end

-- store.ApplyFailure. Returns flags and whether c changed.
local function apply_failure(c, first)
  if started_before(c, started, now) then return 0, false end
  local st = circuit_state(c, now)
  if st == COOLDOWN or st == PROBING then
    if st == PROBING and c.po == req then return reopen(c) end
    return 0, false
  end
  if st == HALFOPEN then
    if c.po == req then return reopen(c) end
    return 0, false
  end
  if not first then return 0, false end
  if c.ws == 0 or not (now < c.ws + s.window) then
    c.ws = now
    c.fails = 0
  end
  c.fails = c.fails + 1
  local flags = COUNTED
  if c.fails > s.allowed_fails and s.cooldown > 0 then
    c.open, c.cause = 1, CAUSE_TRANSIENT
    c.oa, c.ou = now, now + s.cooldown
    c.reo = 0
    c.po, c.pu = '', 0
    c.ca = 0
    flags = flags + OPENED
  end
  return flags, true
end

-- store.ApplySuccess.
local function apply_success(c)
  local st = circuit_state(c, now)
  if st == AVAILABLE then
    local flags = 0
    if c.fails > 0 or c.ws ~= 0 then flags = CLEARED end
    local changed = c.fails ~= 0 or c.ws ~= 0
    c.fails, c.ws = 0, 0
    return flags, changed
  end
  if (st == HALFOPEN or st == PROBING) and c.po == req then
    c.open, c.cause, c.fails, c.ws, c.oa, c.ou, c.reo, c.pu = 0, 0, 0, 0, 0, 0, 0, 0
    c.po = ''
    c.ca = now
    return CLOSED, true
  end
  return 0, false
end

-- store.ApplyConfigurationFailure: quarantine at once, never shortening a longer cooldown,
-- unless the attempt started before the circuit's last transition.
local function apply_configuration(c)
  if s.config_cooldown <= 0 or started_before(c, started, now) then return 0, false end
  local untl = now + s.config_cooldown
  if circuit_state(c, now) == COOLDOWN and c.ou > untl then return 0, false end
  c.open, c.cause = 1, CAUSE_CONFIGURATION
  c.oa, c.ou = now, untl
  c.fails, c.ws = 0, 0
  c.po, c.pu = '', 0
  c.ca = 0
  return QUARANTINED, true
end

-- store.ReleaseProbe: the owner's attempt ended without a verdict; the probe is free.
local function release_probe(c)
  if circuit_state(c, now) == PROBING and c.po == req then
    c.po, c.pu = '', 0
    return RELEASED, true
  end
  return 0, false
end

-- Health is store.HealthBuckets one-minute buckets (behaviour §3.5): slot store.HealthSlot(minute)
-- (minute mod the count, 1-based here) of st.h holds "minute:successes:failures" for the
-- latest minute written there: store.HealthBucket.Record (a newer minute resets the slot; a
-- write for an older minute than the slot holds belongs outside the window and is dropped).
local function record_health(st, success)
  local slots, pos = {}, 1
  for i = 1, health_buckets do
    local j = string.find(st.h, ',', pos, true)
    if j then
      slots[i] = string.sub(st.h, pos, j - 1)
      pos = j + 1
    else
      slots[i] = string.sub(st.h, pos)
      pos = #st.h + 2
    end
  end
  local i = minute % health_buckets + 1
  local successes, failures = 0, 0
  local m, hs, hf = string.match(slots[i], '^(-?%d+):(%d+):(%d+)$')
  if m then
    m = tonumber(m)
    if m > minute then return end
    if m == minute then successes, failures = tonumber(hs), tonumber(hf) end
  end
  if success then successes = successes + 1 else failures = failures + 1 end
  slots[i] = istr(minute) .. ':' .. istr(successes) .. ':' .. istr(failures)
  st.h = table.concat(slots, ',')
end

-- store.EWMA with α = 0.2; the first sample is taken as is.
local function fold_ewma(prev, x)
  if prev == '' then return fstr(x) end
  return fstr(0.2 * x + 0.8 * tonumber(prev))
end

local st = load_state(K_STATE)
local c = st.c
local inf, infx = st.inf, st.infx
local live = redis.call('ZSCORE', K_INFLIGHT, attempt)
redis.call('ZREM', K_INFLIGHT, attempt)
live = live and tonumber(live) > now
prune(K_INFLIGHT, now)
summarize(K_INFLIGHT, st)
local dirty = st.inf ~= inf or st.infx ~= infx
local ttl = tonumber(ARGV[17])
local reserved = tonumber(ARGV[21])
if live and reserved > 0 and st.m == tonumber(ARGV[22]) then
  -- The estimate gives way to the real usage (a success adds it below), once: an attempt
  -- may be finished twice (its attempt role and the trampoline).
  st.tpm = math.max(st.tpm - reserved, 0)
  dirty = true
end
local flags, changed = 0, false

if effect == 1 then -- success
  record_health(st, true)
  flags, changed = apply_success(c)
  st.lat = fold_ewma(st.lat, tonumber(ARGV[11]))
  if ARGV[12] ~= '' then st.tp = fold_ewma(st.tp, tonumber(ARGV[12])) end
  if roll_minute(st, minute) then
    local tokens = tonumber(ARGV[13])
    if tokens > 0 then st.tpm = st.tpm + tokens end
  end
  dirty = true
elseif effect == 2 then -- transient
  record_health(st, false)
  local counted_until = num(redis.call('GET', K_COUNTED))
  local first = not (counted_until ~= 0 and now < counted_until)
  flags, changed = apply_failure(c, first)
  if flags % 2 == COUNTED then
    local dedupe = tonumber(ARGV[14])
    redis.call('SET', K_COUNTED, istr(now + dedupe), 'PX', istr(ms(dedupe) + ms(tonumber(ARGV[18]))))
  end
  dirty = true
elseif effect == 5 then -- configuration
  flags, changed = apply_configuration(c)
else -- neutral, throttle, quota: no verdict on a probe
  flags, changed = release_probe(c)
end

if changed then
  dirty = true
  ttl = math.max(ttl, circuit_ttl(c, now, s.window, circuit_grace))
end
if dirty then save_state(K_STATE, st, ttl) end

local reply = circuit_reply(c)
table.insert(reply, 1, flags)
return reply

-- Shared helpers, prepended to every routing-state script (see scripts.go).
--
-- Times and durations are integer microseconds: Unix µs of this century are far below 2^53,
-- so a Lua double holds them exactly. 0 stands for the zero time.Time (no timestamp).
-- Nothing here reads a clock: `now` always comes from the caller.

local AVAILABLE, COOLDOWN, HALFOPEN, PROBING = 0, 1, 2, 3
local CAUSE_TRANSIENT, CAUSE_CONFIGURATION = 1, 2

local function num(v)
  if not v or v == '' then return 0 end
  return tonumber(v)
end

-- istr formats an integral number without exponent or fraction.
local function istr(x) return string.format('%d', x) end

-- fstr formats a float so that it parses back to the same double.
local function fstr(x) return string.format('%.17g', x) end

-- ms converts a µs duration to whole milliseconds for PEXPIRE, rounding up.
local function ms(us)
  if us < 0 then return 0 end
  return math.ceil(us / 1000)
end

-- The circuit record (store.Circuit) as a hash; field names are short on purpose.
local CIRCUIT_FIELDS = { 'open', 'cause', 'fails', 'ws', 'oa', 'ou', 'reo', 'po', 'pu' }

local function load_circuit(key)
  local f = redis.call('HMGET', key, unpack(CIRCUIT_FIELDS))
  return {
    open = num(f[1]), cause = num(f[2]), fails = num(f[3]), ws = num(f[4]),
    oa = num(f[5]), ou = num(f[6]), reo = num(f[7]), po = f[8] or '', pu = num(f[9]),
  }
end

-- circuit_state is store.Circuit.State: half-open is derived from OpenUntil, never stored.
local function circuit_state(c, now)
  if c.open ~= 1 then return AVAILABLE end
  if now < c.ou then return COOLDOWN end
  if c.po ~= '' and now < c.pu then return PROBING end
  return HALFOPEN
end

-- save_circuit writes c back. A closed circuit without a window is the zero record: the key
-- is deleted. The TTL is garbage collection only: it outlives every stored timestamp that can
-- still matter (cooldown end, probe end, failure window end) by `grace`, so an idle half-open
-- circuit is forgotten (read as closed) only after a long silence.
local function save_circuit(key, c, now, window, grace)
  if c.open ~= 1 and c.cause == 0 and c.fails == 0 and c.ws == 0 and c.oa == 0 and c.ou == 0
      and c.reo == 0 and c.po == '' and c.pu == 0 then
    redis.call('DEL', key)
    return
  end
  redis.call('HSET', key,
    'open', istr(c.open), 'cause', istr(c.cause), 'fails', istr(c.fails), 'ws', istr(c.ws),
    'oa', istr(c.oa), 'ou', istr(c.ou), 'reo', istr(c.reo), 'po', c.po, 'pu', istr(c.pu))
  local horizon = math.max(c.ou, c.pu, c.ws + window)
  redis.call('PEXPIRE', key, ms(horizon - now) + ms(grace))
end

local function circuit_reply(c)
  return { c.open, c.cause, c.fails, c.ws, c.oa, c.ou, c.reo, c.po, c.pu }
end

-- roll_minute moves the RPM/TPM counters to `minute` and reports whether a write for
-- `minute` may count. Counters only move forward: a replica whose clock lags writes into a
-- minute nobody reads any more, so its count is dropped rather than reset the current one.
local function roll_minute(stats, minute)
  local m = num(redis.call('HGET', stats, 'm'))
  if m < minute then
    redis.call('HSET', stats, 'm', istr(minute), 'rpm', '0', 'tpm', '0')
    return true
  end
  return m == minute
end

-- The capacity circuit of one failure domain (behaviour §4.3, §5.7), exactly store.ApplyCapacity:
-- open or extend it until now + d; never shorten it; a quota outage marks it Quota.
--
-- KEYS[1] capacity: a string "until|quota" (µs, 0|1), so ReadStates reads it with the
--         deployments' records in one GET/MGET
-- ARGV[1] now (µs)   ARGV[2] d (µs): max(throttleCooldown, Retry-After), or
--         configurationCooldown for an exhausted quota   ARGV[3] quota (0|1)   ARGV[4] grace (µs)
--
-- Reply: { changed (0|1), until (µs), quota (0|1) }.
-- Invariants: `until` only grows (a late, shorter Retry-After cannot shorten a cooldown); the
-- key lives until `until` plus grace, after which it is irrelevant (a lapsed quota flag is
-- dropped by the next opening anyway).
local key = KEYS[1]
local now, d, quota = tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[3] == '1'

local untl, stored_quota = 0, false
local v = redis.call('GET', key)
if v then
  local u, q = string.match(v, '^(%d*)|(%d*)$')
  untl, stored_quota = num(u), q == '1'
end
local limited = now < untl
local changed = false
local new_until = now + d
if d <= 0 or not (new_until > untl) then
  if quota and limited and not stored_quota then
    stored_quota = true
    changed = true
  end
else
  untl = new_until
  stored_quota = quota or (stored_quota and limited)
  changed = true
end
if changed then
  redis.call('SET', key, istr(untl) .. '|' .. (stored_quota and '1' or '0'),
    'PX', istr(ms(untl - now) + ms(tonumber(ARGV[4]))))
end
return { changed and 1 or 0, untl, stored_quota and 1 or 0 }

-- Shared by the configuration scripts (see scripts.go). Every write bumps the version in the
-- same script as the change and publishes it, so a replica can never see the new version
-- without the change, and a notification can never precede its write.
--
-- KEYS[1] is always the version key; ARGV[1] the pub/sub channel ('' publishes nothing: a
-- test switch that simulates a lost notification).
local function bump()
  local v = redis.call('INCR', KEYS[1])
  if ARGV[1] ~= '' then redis.call('PUBLISH', ARGV[1], v) end
  return v
end

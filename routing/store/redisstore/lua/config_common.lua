-- Shared by the configuration scripts (see scripts.go). Every write bumps the version in the
-- same script as the change and publishes it, so a replica can never see the new version
-- without the change, and a notification can never precede its write.
--
-- KEYS[1] is always the version key; ARGV[1] the pub/sub channel ('' publishes nothing: a
-- test switch that simulates a lost notification).
local function publish(v)
  if ARGV[1] ~= '' then redis.call('PUBLISH', ARGV[1], v) end
  return v
end

local function bump()
  return publish(redis.call('INCR', KEYS[1]))
end

-- replace_all swaps in a whole configuration (config_replace.lua, config_restore.lua).
--
-- KEYS[2] settings   KEYS[3] deployments   KEYS[4] secrets   KEYS[5] chains   KEYS[6] policies
-- ARGV[3] '1' when settings are present   ARGV[4] settings bytes
-- ARGV[5] n deployments, then n × (id, bytes, apiKey)
-- then    m chains, m × (field, bytes)
-- then    p policies, p × (field, bytes)
--
-- Invariant: a deployment sent without an apiKey keeps the secret stored for its id; every
-- other secret, item and setting not in the new configuration is gone.
local function replace_all()
  local old = {}
  local flat = redis.call('HGETALL', KEYS[4])
  for i = 1, #flat, 2 do old[flat[i]] = flat[i + 1] end

  redis.call('DEL', KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6])
  if ARGV[3] == '1' then redis.call('SET', KEYS[2], ARGV[4]) end

  local i = 5
  local n = tonumber(ARGV[i])
  for _ = 1, n do
    local id, bytes, key = ARGV[i + 1], ARGV[i + 2], ARGV[i + 3]
    redis.call('HSET', KEYS[3], id, bytes)
    if key ~= '' then
      redis.call('HSET', KEYS[4], id, key)
    elseif old[id] then
      redis.call('HSET', KEYS[4], id, old[id])
    end
    i = i + 3
  end
  for _, hash in ipairs({ KEYS[5], KEYS[6] }) do
    i = i + 1
    n = tonumber(ARGV[i])
    for _ = 1, n do
      redis.call('HSET', hash, ARGV[i + 1], ARGV[i + 2])
      i = i + 2
    end
  end
end

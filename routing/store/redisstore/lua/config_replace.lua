-- Replace the whole configuration (seeding from a config file) and bump the version.
--
-- KEYS[1] version   KEYS[2] settings   KEYS[3] deployments   KEYS[4] secrets
-- KEYS[5] chains    KEYS[6] policies
-- ARGV[1] channel   ARGV[2] expected version ('' replaces unconditionally)
-- ARGV[3] '1' when settings are present   ARGV[4] settings bytes
-- ARGV[5] n deployments, then n × (id, bytes, apiKey)
-- then    m chains, m × (field, bytes)
-- then    p policies, p × (field, bytes)
--
-- Invariant: a deployment sent without an apiKey keeps the secret stored for its id; every
-- other secret, item and setting not in the new configuration is gone. With an expected
-- version that is not the stored one (absent counts as 0) nothing changes and it returns -2:
-- the compare-and-swap of ReplaceConfigIf, atomic because the check runs in the script.
if ARGV[2] ~= '' and tonumber(redis.call('GET', KEYS[1]) or '0') ~= tonumber(ARGV[2]) then
  return -2
end
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
return bump()

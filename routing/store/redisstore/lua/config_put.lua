-- Create or replace one configuration item and bump the version.
--
-- KEYS[1] version   KEYS[2] the item's home: a hash (deployments, chains, policies) or, when
--                   ARGV[2] is '', the router-settings string
-- KEYS[3] secrets hash
-- ARGV[1] channel   ARGV[2] hash field ('' for the settings string)   ARGV[3] proto bytes
-- ARGV[4] secret ('' keeps the stored one: API keys are write-only and never resent)
--
-- No TTL: configuration is durable state.
if ARGV[2] == '' then
  redis.call('SET', KEYS[2], ARGV[3])
else
  redis.call('HSET', KEYS[2], ARGV[2], ARGV[3])
end
if ARGV[4] ~= '' then redis.call('HSET', KEYS[3], ARGV[2], ARGV[4]) end
return bump()

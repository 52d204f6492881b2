-- Put back a configuration the store lost (RestoreConfig): replace everything and set the
-- version to exactly the restored one, only while the stored version is below it (absent
-- counts as 0: a Redis restarted empty). The check and the write are one script, so of
-- replicas racing to restore, the highest version wins and the others change nothing.
--
-- KEYS[1] version   KEYS[2..6] as replace_all (config_common.lua)
-- ARGV[1] channel   ARGV[2] the version to restore
-- ARGV[3..] the configuration, as replace_all reads it
--
-- Reply: {1, version} when restored, {0, stored version} when the store was not behind.
local cur = tonumber(redis.call('GET', KEYS[1]) or '0')
local want = tonumber(ARGV[2])
if cur >= want then return { 0, cur } end
replace_all()
redis.call('SET', KEYS[1], ARGV[2])
publish(ARGV[2])
return { 1, want }

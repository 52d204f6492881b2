-- Replace the whole configuration (seeding from a config file) and bump the version.
--
-- KEYS[1] version   KEYS[2..6] as replace_all (config_common.lua)
-- ARGV[1] channel   ARGV[2] expected version ('' replaces unconditionally)
-- ARGV[3..] the configuration, as replace_all reads it
--
-- With an expected version that is not the stored one (absent counts as 0) nothing changes
-- and it returns -2: the compare-and-swap of ReplaceConfigIf, atomic because the check runs in
-- the script.
if ARGV[2] ~= '' and tonumber(redis.call('GET', KEYS[1]) or '0') ~= tonumber(ARGV[2]) then
  return -2
end
replace_all()
return bump()

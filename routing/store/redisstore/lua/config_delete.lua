-- Delete one configuration item and bump the version; a missing item changes nothing.
--
-- KEYS[1] version   KEYS[2] the item's hash   KEYS[3] secrets hash
-- ARGV[1] channel   ARGV[2] hash field   ARGV[3] '1' to delete the item's secret too
--
-- Reply: the new version, or -1 when the item did not exist (store.ErrNotFound).
if redis.call('HDEL', KEYS[2], ARGV[2]) == 0 then return -1 end
if ARGV[3] == '1' then redis.call('HDEL', KEYS[3], ARGV[2]) end
return bump()

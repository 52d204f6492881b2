-- StartAttempt (SPEC §3.1, §3.2): count the attempt in flight until it finishes or expires,
-- and count it in the current minute's requests.
--
-- KEYS[1] inflight  sorted set: attempt id scored by its expiry (µs)
-- KEYS[2] stats     hash: per-minute counters, EWMAs, health buckets
-- ARGV[1] attempt id   ARGV[2] now (µs)   ARGV[3] expires (µs)   ARGV[4] minute (Unix minutes)
-- ARGV[5] stats TTL (ms)   ARGV[6] in-flight grace (µs)
--
-- Invariants: an entry counts while now < its expiry, whoever wrote it, so a crashed
-- replica's entries stop counting one by one; expired entries are pruned on every write; the
-- key outlives its latest entry by the grace period and vanishes with its last member.
local inflight, stats = KEYS[1], KEYS[2]
local now = tonumber(ARGV[2])

redis.call('ZREMRANGEBYSCORE', inflight, '-inf', ARGV[2])
redis.call('ZADD', inflight, ARGV[3], ARGV[1])
local last = redis.call('ZRANGE', inflight, -1, -1, 'WITHSCORES')
redis.call('PEXPIRE', inflight, ms(tonumber(last[2]) - now) + ms(tonumber(ARGV[6])))

if roll_minute(stats, tonumber(ARGV[4])) then
  redis.call('HINCRBY', stats, 'rpm', 1)
end
redis.call('PEXPIRE', stats, ARGV[5])
return 1

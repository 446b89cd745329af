-- Reserve the estimated cost of a Message Batch against its run's cost limit, before the batch
-- is sent (judgeq.pipeline.batch_lane, judgeq.store.redis.RedisStore.lane_reserve).
--
-- KEYS[1] the run's counters (cost_usd: what its stored results spent)
-- KEYS[2] the run's state (max_cost_usd: its limit; none or 0: no limit)
-- KEYS[3] the run's reservations (batch token -> USD held by a batch in flight)
-- KEYS[4] the run's batch states (batch token -> state)
-- ARGV[1] the batch token, ARGV[2] the USD to reserve, ARGV[3] the keys' time to live (s)
--
-- Returns 1: reserved (the spend, every reservation held and this one stay within the limit);
-- 0: it would pass the limit, nothing reserved; -1: the batch is no longer 'creating' (another
-- worker gave it up), nothing reserved. A reservation is given back when its batch leaves the
-- states in flight (the lane_set script), so it survives the death of the worker that made it.
if redis.call('HGET', KEYS[4], ARGV[1]) ~= 'creating' then return -1 end
local amount = tonumber(ARGV[2])
local limit = tonumber(redis.call('HGET', KEYS[2], 'max_cost_usd') or '')
if limit and limit > 0 then
  local spent = tonumber(redis.call('HGET', KEYS[1], 'cost_usd') or '0')
  local held = 0
  for _, usd in ipairs(redis.call('HVALS', KEYS[3])) do held = held + tonumber(usd) end
  if spent + held + amount > limit then return 0 end
end
redis.call('HSET', KEYS[3], ARGV[1], ARGV[2])
redis.call('EXPIRE', KEYS[3], tonumber(ARGV[3]))
return 1

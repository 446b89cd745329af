-- Store one result once: its bit in the ``done`` bitmap decides, the packed result goes to
-- the end of its bucket's list; the payload is deleted, the counters bumped (with
-- ``last_done_at``: Redis's ``TIME``; ``last_answer_at`` in the state when the judge answered
-- it, ending a wait for the judge), the done-count returned (-1: it had a result already;
-- -2 - done: this write reached the run's cost limit and paused it).
local index = tonumber(ARGV[1])
if redis.call('SETBIT', KEYS[1], index, 1) == 1 then return -1 end
if redis.call('RPUSH', KEYS[2], ARGV[2]) == 1 then redis.call('EXPIRE', KEYS[2], tonumber(ARGV[3])) end
redis.call('HDEL', KEYS[3], ARGV[1])
local answered = false
for i = 4, #ARGV, 2 do
  redis.call('HINCRBYFLOAT', KEYS[4], ARGV[i], ARGV[i + 1])
  if ARGV[i] == 'answered' then answered = true end
end
-- when, on Redis's clock (the one every worker's stall detection and status compare with)
local now = redis.call('TIME')
local stamp = now[1] .. '.' .. string.format('%06d', tonumber(now[2]))
redis.call('HSET', KEYS[4], 'last_done_at', stamp)
redis.call('HDEL', KEYS[6], 'systemic_streak')
-- the judge answered this job: it is not down; a run waiting for it goes on
if answered then
  redis.call('HSET', KEYS[6], 'last_answer_at', stamp)
  redis.call('HDEL', KEYS[6], 'waiting_since', 'waiting_reason')
end
local done = redis.call('HINCRBY', KEYS[4], 'done', 1)
-- the run's cost limit: the write that reaches it pauses the run (no new judge calls)
local limit = tonumber(redis.call('HGET', KEYS[6], 'max_cost_usd') or '')
local paused = false
if limit and limit > 0 then
  local spent = tonumber(redis.call('HGET', KEYS[4], 'cost_usd') or '0')
  if spent >= limit and redis.call('HGET', KEYS[6], 'state') == 'running' then
    redis.call('HSET', KEYS[6], 'state', 'paused', 'pause_reason', string.format(
      'max_cost: $%.4f spent of the $%.4f allowed (raise it with: judgeq resume RUN --max-cost USD)',
      spent, limit))
    paused = true
  end
end
local ttl = tonumber(ARGV[3])
-- a run that grades for longer than half the retention keeps all its keys alive
if ttl > 0 and redis.call('TTL', KEYS[1]) < ttl / 2 then
  for i = 1, #KEYS do redis.call('EXPIRE', KEYS[i], ttl) end
end
if paused then return -2 - done end
return done

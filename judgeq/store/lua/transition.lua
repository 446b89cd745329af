-- Pause (running -> paused) or resume (paused -> running) atomically, with the reason.
if redis.call('HGET', KEYS[1], 'state') ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], 'state', ARGV[2], 'pause_reason', ARGV[3], 'systemic_streak', 0)
-- a person paused or resumed it: a wait for the judge starts again from the next failure
redis.call('HDEL', KEYS[1], 'waiting_since', 'waiting_reason')
return 1

-- Write a batch record if its state is still one of the expected ones (compare-and-set); a
-- batch no longer in flight gives back its cost reservation.
local current = redis.call('HGET', KEYS[2], ARGV[1])
local allowed = false
for i = 5, #ARGV do
  if current == ARGV[i] then allowed = true end
end
if not allowed then return 0 end
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
redis.call('HSET', KEYS[1], ARGV[1], ARGV[3])
local ttl = tonumber(ARGV[4])
redis.call('EXPIRE', KEYS[1], ttl)
redis.call('EXPIRE', KEYS[2], ttl)
if ARGV[2] ~= 'creating' and ARGV[2] ~= 'in_progress' then redis.call('HDEL', KEYS[3], ARGV[1]) end
return 1

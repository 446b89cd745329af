-- Buffer a job for the batch lane (``index:time`` in the buffer) unless it has a result or
-- is in the lane already.
if redis.call('GETBIT', KEYS[1], tonumber(ARGV[1])) == 1 then return 0 end
if redis.call('HSETNX', KEYS[2], ARGV[1], '') == 0 then return 0 end
redis.call('RPUSH', KEYS[3], ARGV[1] .. ':' .. ARGV[2])
local ttl = tonumber(ARGV[3])
for i = 2, #KEYS do redis.call('EXPIRE', KEYS[i], ttl) end
return 1

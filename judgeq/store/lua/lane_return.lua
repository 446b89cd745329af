-- Put back in the buffer the jobs still in batch ARGV[2] and without a result.
local back = 0
for i = 4, #ARGV do
  local idx = ARGV[i]
  if redis.call('HGET', KEYS[2], idx) == ARGV[2] then
    if redis.call('GETBIT', KEYS[1], tonumber(idx)) == 1 then
      redis.call('HDEL', KEYS[2], idx)
    else
      redis.call('HSET', KEYS[2], idx, '')
      redis.call('RPUSH', KEYS[3], idx .. ':' .. ARGV[1])
      back = back + 1
    end
  end
end
if back > 0 then redis.call('EXPIRE', KEYS[3], tonumber(ARGV[3])) end
return back

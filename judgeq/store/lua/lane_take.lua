-- Move the oldest buffered jobs into a new batch and create its record, in one step.
local entries = redis.call('LPOP', KEYS[2], ARGV[1])
if not entries then return {} end
local taken = {}
for i, entry in ipairs(entries) do
  local idx = string.match(entry, '^[^:]+')
  taken[i] = idx
  redis.call('HSET', KEYS[1], idx, ARGV[2])
end
redis.call('HSET', KEYS[3], ARGV[2], ARGV[4])
redis.call('HSET', KEYS[4], ARGV[2], 'creating')
for i = 1, #taken, 4000 do
  redis.call('RPUSH', KEYS[5], unpack(taken, i, math.min(i + 3999, #taken)))
end
local ttl = tonumber(ARGV[3])
for i = 1, #KEYS do
  if redis.call('EXISTS', KEYS[i]) == 1 then redis.call('EXPIRE', KEYS[i], ttl) end
end
return taken

-- configure: A = {now, clear (1: forget every configured limit first), then per dimension
-- given: name, limit}. The configured limits are kept until reset (no expiry).
if A[2] == '1' then redis.call('DEL', CONFIG) end
local given = {}
for i = 3, #A, 2 do
  given[#given + 1] = A[i]
  given[#given + 1] = A[i + 1]
  if A[i] == 'requests' and tonumber(A[i + 1]) ~= tonumber(redis.call('HGET', CONFIG, 'requests')) then
    -- a new request limit starts afresh; the same one set again (each worker does, as it
    -- starts) keeps what 429s under it taught
    redis.call('HDEL', STATE, 'ada')
  end
end
if #given > 0 then redis.call('HSET', CONFIG, unpack(given)) end
return 1

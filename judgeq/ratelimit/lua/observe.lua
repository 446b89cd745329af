-- observe: A = {now, then per stated dimension: name, limit, remaining ('' = not stated)}
local st, cfg = hgetall(STATE), hgetall(CONFIG)
st['answered'] = '1'
local changed, requests = false, false
for i = 2, #A, 3 do
  if tonumber(st['srv_' .. A[i]]) ~= tonumber(A[i + 1]) then
    changed = true
    if A[i] == 'requests' then requests = true end
  end
  st['srv_' .. A[i]] = A[i + 1]
end
if not changed then
  redis.call('HSET', STATE, 'answered', 1)
  return 0
end
local fields = {'answered', 'srv_requests', 'srv_input-tokens', 'srv_output-tokens', 'srv_tokens', 'ada'}
for _, k in ipairs(LEVELS) do fields[#fields + 1] = k end
if requests then  -- a new stated request limit starts afresh (a cut under the old one is no news of it)
  redis.call('HDEL', STATE, 'ada')
  st['ada'] = nil
end
refill(st, effective(st, cfg))  -- new buckets start small
for i = 2, #A, 3 do
  local v = tonumber(st['lvl_' .. A[i]])
  if A[i + 2] ~= '' and v ~= nil then st['lvl_' .. A[i]] = math.min(v, tonumber(A[i + 2])) end
end
save(STATE, st, fields)
return 1

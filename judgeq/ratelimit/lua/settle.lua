-- settle: A = {now, input refund, output refund, ok (1/0), epoch, share fraction}
refund({['input-tokens'] = tonumber(A[2]), ['output-tokens'] = tonumber(A[3]), ['tokens'] = tonumber(A[2]) + tonumber(A[3])},
  tonumber(A[6]))
redis.call('HSET', STATE, 'answered', 1)
redis.call('EXPIRE', STATE, C.ttl)
if A[4] ~= '1' then return 0 end
count('o')
local st, cfg = hgetall(STATE), hgetall(CONFIG)
if tonumber(A[5]) == num(st['epoch'], 0) then remember(0) end
local ada, changed, peak = num(st['ada'], 0), num(st['changed'], -1e300), num(st['peak'], 1e300)
if ada > 0 and adaptive_applies(st, cfg) and now - changed >= C.clean
    and num(st['bound'], -1e300) >= changed and not congested() then
  local near = ada >= C.near * peak
  if near then ada = ada * C.grow_near else ada = math.min(ada * C.grow, C.near * peak) end
  if ada >= 2 * peak then redis.call('HSET', STATE, 'peak', f(ada)) end
  redis.call('HSET', STATE, 'ada', f(ada), 'changed', f(now))
end
return 1

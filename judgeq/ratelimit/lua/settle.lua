-- settle: A = {now, input reserved, output reserved, input used, output used, ok (1/0), epoch, share fraction,
-- free grant (1/0), the job's first call (1/0)}
local reserved = token_amounts(tonumber(A[2]), tonumber(A[3]))
local used = token_amounts(tonumber(A[4]), tonumber(A[5]))
local ok = A[6] == '1'
local st = hgetall(STATE)
local use = uses(st)
local back, pace = {}, {}
for _, d in ipairs(TOKEN_DIMS) do
  back[d] = reserved[d] - used[d]  -- the reservation, settled to what the call used
  pace[d] = reserved[d] * use[d] - used[d]  -- what it was expected to use, settled the same way
end
if A[9] == '1' then back['requests'] = -1 end  -- a free grant (nothing reserved): its request too
refund(st, back, pace, tonumber(A[8]))
local fields = {'answered', 1}
if ok then  -- a job served ('own': see refused), and what calls use of their reservation
  local q, n = own_share(st, 0)
  for _, v in ipairs({'own', f(q), 'own_n', f(n), 'shut', 0}) do fields[#fields + 1] = v end
  if tonumber(A[7]) == num(st['epoch'], 0) then  -- one of this epoch's calls served
    fields[#fields + 1] = 'eserved'
    fields[#fields + 1] = num(st['eserved'], 0) + 1
  end
  for _, d in ipairs(TOKEN_DIMS) do
    if reserved[d] > 0 then
      local r = used[d] / reserved[d]
      if st['use_' .. d] ~= nil then r = (1 - C.use_weight) * use[d] + C.use_weight * r end
      fields[#fields + 1] = 'use_' .. d
      fields[#fields + 1] = f(r)
    end
  end
end
redis.call('HSET', STATE, unpack(fields))
redis.call('EXPIRE', STATE, C.ttl)
if not ok then
  count('d')
  return 0
end
count('o')
if A[10] == '1' then count('f') end
local cfg
st, cfg = hgetall(STATE), hgetall(CONFIG)
if tonumber(A[7]) == num(st['epoch'], 0) then remember(0) end
local ada, changed, peak = num(st['ada'], 0), num(st['changed'], -1e300), num(st['peak'], 1e300)
if ada > 0 and adaptive_applies(st, cfg) and now - changed >= C.clean
    and num(st['bound'], -1e300) >= changed and not congested(st) then
  local near = ada >= C.near * peak
  if near then ada = ada * C.grow_near else ada = math.min(ada * C.grow, C.near * peak) end
  if ada >= 2 * peak then redis.call('HSET', STATE, 'peak', f(ada)) end
  local known = C.pace * known_limit(st, cfg, 'requests')
  if known > 0 and ada >= known then  -- back at the known limit: it paces again
    redis.call('HDEL', STATE, 'ada')
    redis.call('HSET', STATE, 'changed', f(now))
  else
    redis.call('HSET', STATE, 'ada', f(ada), 'changed', f(now))
  end
end
return 1

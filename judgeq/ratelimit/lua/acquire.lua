-- acquire: A = {now, caller, input tokens, output tokens, share fraction (0: none), the epoch in
-- which the job's last call was refused for itself (-1: none), the epoch of its first refusal
-- when that was its last (-1: none)}
-- returns {wait (string), epoch, 1 when the wait is a pause (a congestion's retry-after) else 0,
-- 1 when granted free else 0}
local caller, fraction = A[2], tonumber(A[5])
local need = {['requests'] = 1, ['input-tokens'] = tonumber(A[3]), ['output-tokens'] = tonumber(A[4]),
  ['tokens'] = tonumber(A[3]) + tonumber(A[4])}
local st, cfg = hgetall(STATE), hgetall(CONFIG)
local epoch = num(st['epoch'], 0)

local function waiting(w, fields, paused)
  if fields ~= nil then save(STATE, st, fields) end
  redis.call('ZREMRANGEBYSCORE', WAITING, '-inf', now)
  redis.call('ZADD', WAITING, now + w, caller)
  redis.call('EXPIRE', WAITING, C.ttl)
  return {f(w), epoch, paused or 0, 0}
end

local pause = num(st['pause'], 0)
if now < pause then return waiting(pause - now, nil, 1) end
-- refused for itself in this epoch, or for the first time under a known request limit: free
-- (charged if served)
if tonumber(A[6]) == epoch or (tonumber(A[7]) == epoch and not adaptive_applies(st, cfg)) then
  count('a')
  redis.call('ZREM', WAITING, caller)
  return {'0', epoch, 0, 1}
end
local lim = effective(st, cfg)
if next(lim) == nil and st['answered'] == nil then  -- one call alone may find the server's limits
  if st['probe'] == nil then
    st['probe'] = now
  elseif now < tonumber(st['probe']) + C.probe then
    return waiting(C.probe_step)
  end
end
refill(st, lim)
local use = uses(st)
local wait = bucket_wait(st, need, lim, use)
local run = nil
local run_lim = {}
if fraction > 0 and next(lim) ~= nil then
  for d, l in pairs(lim) do run_lim[d] = l * fraction end
  run = hgetall(RUN)
  refill(run, run_lim)
  wait = math.max(wait, bucket_wait(run, need, run_lim, use))
end
local fields = {'probe', 'bound', 'began', 'born'}
for _, k in ipairs(LEVELS) do fields[#fields + 1] = k end
if wait > 0 then
  if num(st['ada'], 0) > 0 and adaptive_applies(st, cfg) and st['lvl_requests'] < 1 - 1e-6 then
    st['bound'] = now
  end
  if run ~= nil then save(RUN, run, LEVELS) end
  return waiting(wait, fields)
end
bucket_take(st, need, lim, use)
if run ~= nil then
  bucket_take(run, need, run_lim, use)
  save(RUN, run, LEVELS)
end
if st['began'] == nil or tonumber(st['began']) > now then st['began'] = now end
if st['born'] == nil then st['born'] = now end
save(STATE, st, fields)
count('a')
redis.call('ZREM', WAITING, caller)
return {'0', epoch, 0, 0}

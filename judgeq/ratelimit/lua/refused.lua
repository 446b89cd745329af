-- refused: A = {now, input reserved, output reserved, retry-after ('' = none), epoch, nth (this job's
-- refusals so far), the epoch of its first, share fraction}; returns the pause every caller
-- takes ('0': none)
do  -- the server used none of it
  local reserved = token_amounts(tonumber(A[2]), tonumber(A[3]))
  local st = hgetall(STATE)
  local use = uses(st)
  local pace = {}
  for _, d in ipairs(TOKEN_DIMS) do pace[d] = reserved[d] * use[d] end
  refund(st, reserved, pace, tonumber(A[8]))
end
redis.call('HSET', STATE, 'answered', 1)
redis.call('EXPIRE', STATE, C.ttl)
count('q')
local nth = tonumber(A[6])
if nth == 1 then
  count('r')
elseif tonumber(A[7]) == tonumber(A[5]) then
  count('x')  -- refused again with no congestion in between: for itself
end
local st, cfg = hgetall(STATE), hgetall(CONFIG)
local epoch = num(st['epoch'], 0)
if tonumber(A[5]) ~= epoch then return '0' end  -- sent before the last congestion was acted on
if nth == 1 then
  remember(1)
elseif nth == 2 and tonumber(A[7]) == epoch then
  -- refused again with no congestion in between: refused for itself, not news (its mark
  -- becomes a 0 at the old end, as memory.py does)
  if redis.call('LREM', RECENT, -1, 1) == 1 then redis.call('RPUSH', RECENT, 0) end
end
if not congested() then return '0' end
local pause = C.default_retry_after
if A[4] ~= '' then pause = math.max(0, tonumber(A[4])) end
redis.call('HSET', STATE, 'pause', f(math.max(num(st['pause'], 0), now + pause)), 'epoch', epoch + 1)
redis.call('DEL', RECENT)
if adaptive_applies(st, cfg) then
  -- the rates of this epoch's calls in the last window (whole seconds: the stats')
  local begin = math.max(num(st['began'], now), math.floor(now) - math.ceil(C.window) + 1)
  local span = math.max(now - begin, C.min_span)
  local w = window(math.floor(begin))
  if w.a == 0 and w.o == 0 then  -- slow calls: nothing of this epoch's in the window; the minute
    begin = math.max(num(st['began'], now), math.floor(now) - 59)
    span = math.max(now - begin, C.min_span)
    w = window(math.floor(begin))
  end
  -- (a rate not seen, with nothing granted or served, says nothing)
  local rate = math.huge
  if w.a > 0 then rate = math.min(rate, w.a / span) end
  -- what the server answered (served, or refused a job for itself) in the last window; when
  -- the retry-after is longer than the window (a window full for the rest of its minute says
  -- so), spread over it, or over the last horizon (at most since the budget was born) and the
  -- retry-after, if higher: what a window served in its minute is its limit
  local answered = 0
  if w.o + w.x > 0 then
    answered = (w.o + w.x) / span
    if pause > C.window then answered = (w.o + w.x) / math.max(span, pause) end
  end
  if pause > C.window then
    local born = num(st['born'], now)
    local h = math.max(C.min_span, math.min(C.horizon, now - born))
    local m = window(math.floor(now - h) + 1)
    if m.o + m.x > 0 then answered = math.max(answered, (m.o + m.x) / (h + pause)) end
  end
  if answered > 0 then rate = math.min(rate, answered) end
  local ada = num(st['ada'], 0)
  if ada > 0 then rate = math.min(rate, ada / 60) end
  local fields = {'changed', f(now), 'began', f(now + pause)}
  if rate < math.huge then
    local peak = 60 * rate
    for _, v in ipairs({'peak', f(peak), 'ada', f(math.max(C.floor, C.cut * peak))}) do fields[#fields + 1] = v end
  end
  local level = tonumber(st['lvl_requests'])
  if level ~= nil then
    fields[#fields + 1] = 'lvl_requests'
    fields[#fields + 1] = f(math.min(level, 0))
  end
  redis.call('HSET', STATE, unpack(fields))
end
redis.call('EXPIRE', STATE, C.ttl)
return f(pause)

-- refused: A = {now, input reserved, output reserved, retry-after ('' = none), epoch, nth (this
-- job's refusals so far), the epoch of its previous refusal, share fraction, seconds since its
-- previous refusal, free grant (1/0), requests its earlier refusals were charged}; returns {the
-- pause every caller takes ('0': none), 1 when the job was judged refused for itself else 0}
local nth, epoch_sent, previous_epoch = tonumber(A[6]), tonumber(A[5]), tonumber(A[7])
local free, lent = A[10] == '1', tonumber(A[11])
local st, cfg = hgetall(STATE), hgetall(CONFIG)
local known = not adaptive_applies(st, cfg)
-- Refused for itself: refused again (under the adaptive rate, whose refusals are its measure,
-- twice again, a second or more after the last, with no congestion in between) while the
-- server served at least as many fresh jobs (at their first call) as it refused over the time
-- since the job's previous refusal (at least a window, and a few calls' time at the limit): in
-- a storm fresh jobs are refused too, or none come, every caller held by retries. The server
-- counted none of such a call, its request included: it is given back, and so are the requests
-- the job's earlier refusals were charged. Any other 429's request stays spent (a free call's
-- is charged): a storm must not speed the callers up.
local calm, own, served, others = false, false, -1, 0
if nth >= 2 then
  -- (a window that holds a few calls at the request limit's pace: 10 s at 18 a minute)
  local rpm = effective(st, cfg)['requests'] or 0
  local span = math.max(C.window, tonumber(A[9]), rpm > 0 and 3 * 60 / rpm or 0)
  local w = window(math.floor(now - math.min(span, 60)))
  -- (the window was read before this refusal is counted: others' refusals are the rest, less
  -- those of jobs already judged refused for themselves)
  served, others = w.o, w.q - (nth - 1) - w.x
  calm = w.o > 0 and w.r <= math.max(w.f, (w.a - w.q) / 2)
  own = calm and (known or (nth >= 3 and previous_epoch == epoch_sent and tonumber(A[9]) >= 1))
end
local function answer(pause) return {pause, own and 1 or 0} end
do
  local back = token_amounts(tonumber(A[2]), tonumber(A[3]))  -- (a free grant reserved none)
  local use = uses(st)
  local pace = {}
  for _, d in ipairs(TOKEN_DIMS) do pace[d] = back[d] * use[d] end
  local taken = free and 0 or 1
  if own then back['requests'] = taken + lent else back['requests'] = taken - 1 end
  refund(st, back, pace, tonumber(A[8]))
end
redis.call('HSET', STATE, 'answered', 1)
redis.call('EXPIRE', STATE, C.ttl)
count('q')
if nth == 1 then
  count('r')
elseif own then
  count('x')
end
local first = own and lent > 0  -- judged so for the first time
if first then
  local q, n = own_share(st, 1)
  st['own'] = q
  redis.call('HSET', STATE, 'own', f(q), 'own_n', f(n))
end
local epoch = num(st['epoch'], 0)
if epoch_sent ~= epoch then return answer('0') end  -- sent before the last congestion was acted on
if nth == 1 then
  remember(1)
elseif nth == 2 and calm and previous_epoch == epoch then
  -- refused again while the server serves fresh jobs, with no congestion since its first
  -- refusal (its mark is this epoch's): not news (the mark becomes a 0 at the old end, as
  -- memory.py does)
  if redis.call('LREM', RECENT, -1, 1) == 1 then redis.call('RPUSH', RECENT, 0) end
elseif served == 0 and others >= math.max(C.min_refused, 3 * (nth - 1)) then
  -- refused again while the server served nothing over the time since (a few calls' time at
  -- the pace, at least a window) and refused others' calls too, at least three times as many
  -- as this job's before (several jobs, not one or two): a storm's news, though no fresh job
  -- comes to tell it (every caller is held by its retries). One or two jobs refused for
  -- themselves at a run's end, with nothing else running, are none (a second reviewer's case:
  -- two of them cut the pace to 60/min for the judge's next runs)
  remember(1)
end
if not congested(st) then return answer('0') end
do  -- refusals come back before the answers of the calls sent with them: while most of this
  -- epoch's calls are still out, its first refusals are no evidence yet
  local e = window(math.max(math.floor(num(st['began'], now)), math.floor(now) - 59))
  local answered = e.o + e.q + e.d
  if e.a - answered > answered then return answer('0') end
end
local pause = C.default_retry_after
if A[4] ~= '' then pause = math.max(0, tonumber(A[4])) end
-- the rates of this epoch's calls in the last window (whole seconds: the stats')
local begin = math.max(num(st['began'], now), math.floor(now) - math.ceil(C.window) + 1)
local span = math.max(now - begin, C.min_span)
local w = window(math.floor(begin))
-- Closed: the server served none of this epoch's calls (counted in 'eserved': the recent
-- marks keep only the last few answers, and quick refusals push the served ones out) while it
-- refused them (a window counting a minute is full, or every call is refused: a gateway with
-- no deployment left), whatever its retry-after says. The first time, what it served in the
-- last minute is what its minute allows: the pace is cut to that, and every caller pauses
-- until the oldest of those answers is a minute old (its slot frees), not the retry-after's
-- second. Closed again with nothing served since (an outage): no news of the rate; the pause
-- doubles.
local closed_rate, closed = nil, false
if w.a - w.x > 0 and num(st['eserved'], 0) == 0 then closed = true end
if closed then
  local shut = num(st['shut'], 0)
  if shut > 0 then
    pause = math.max(pause, math.min(C.horizon, 2 * shut))
  else
    -- the last minute's answers, per second: how many, and the oldest second that had one
    local sec, names = math.floor(now), {}
    for s = sec - 59, sec do names[#names + 1] = s .. ':o' end
    local minute, oldest = 0, nil
    for i, v in ipairs(redis.call('HMGET', STATS, unpack(names))) do
      local n = num(v, 0)
      if n > 0 and oldest == nil then oldest = sec - 59 + i - 1 end
      minute = minute + n
    end
    closed = minute >= C.min_evidence  -- (a few answers in a minute tell no minute's limit)
    if closed then
      closed_rate = minute / 60
      pause = math.max(pause, oldest + 60 - now)
    end
  end
  if closed then redis.call('HSET', STATE, 'shut', f(math.max(pause, C.default_retry_after))) end
end
redis.call('HSET', STATE, 'pause', f(math.max(num(st['pause'], 0), now + pause)), 'epoch', epoch + 1, 'eserved', 0)
redis.call('DEL', RECENT)
do  -- the adaptive rate is cut (below a known limit too: a ceiling, never a promise)
  if w.a == 0 and w.o == 0 then  -- slow calls: nothing of this epoch's in the window; the minute
    begin = math.max(num(st['began'], now), math.floor(now) - 59)
    span = math.max(now - begin, C.min_span)
    w = window(math.floor(begin))
  end
  -- (a rate not seen, with nothing granted or served, says nothing)
  local rate = math.huge
  if w.a - w.x > 0 and not closed then rate = math.min(rate, (w.a - w.x) / span) end
  -- what the server answered (served, or refused a job for itself) in the last window; when
  -- the retry-after is longer than the window (a window full for the rest of its minute says
  -- so), spread over it, or over the last horizon (at most since the budget was born) and the
  -- retry-after, if higher: what a window served in its minute is its limit
  local answered = 0
  if w.o > 0 then
    answered = w.o / span
    if pause > C.window then answered = w.o / math.max(span, pause) end
  end
  if pause > C.window then
    local born = num(st['born'], now)
    local h = math.max(C.min_span, math.min(C.horizon, now - born))
    local m = window(math.floor(now - h) + 1)
    if m.o > 0 then answered = math.max(answered, m.o / (h + pause)) end
  end
  if closed then answered = closed_rate or 0 end
  if answered > 0 then rate = math.min(rate, answered) end
  local ada = num(st['ada'], 0)
  local known = C.pace * known_limit(st, cfg, 'requests')
  if not (closed and closed_rate == nil) then  -- (closed again: no news of the rate)
    if ada > 0 then rate = math.min(rate, ada / 60) end
    if known > 0 then rate = math.min(rate, known / 60) end
  end
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
return answer(f(pause))

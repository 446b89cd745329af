-- snapshot: A = {now}; changes nothing. Returns {levels (dimension, level, ...: each limited
-- bucket refilled to now), configured limits (dimension, limit, ...), the server's limits
-- (the same), the adaptive rate ('' when none applies), seconds paused, and the last minute's
-- granted, served and refused counts, callers waiting}
local st, cfg = hgetall(STATE), hgetall(CONFIG)
local lim = effective(st, cfg)
refill(st, lim)
local levels, configured, server = {}, {}, {}
for _, d in ipairs(DIMS) do
  if lim[d] ~= nil then
    levels[#levels + 1] = d
    levels[#levels + 1] = f(st['lvl_' .. d])
  end
  if num(cfg[d], 0) > 0 then
    configured[#configured + 1] = d
    configured[#configured + 1] = cfg[d]
  end
  if num(st['srv_' .. d], 0) > 0 then
    server[#server + 1] = d
    server[#server + 1] = st['srv_' .. d]
  end
end
local ada = ''
if num(st['ada'], 0) > 0 and adaptive_applies(st, cfg) then ada = st['ada'] end
local minute = window(math.floor(now) - 59)
local waiting = redis.call('ZCOUNT', WAITING, '(' .. f(now), '+inf')
return {levels, configured, server, ada, f(math.max(0, num(st['pause'], 0) - now)), minute.a, minute.o, minute.q,
  waiting}

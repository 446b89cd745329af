-- An in-process stand-in for the few Redis commands the budget's scripts call, so that
-- judgeq/ratelimit/memory.py runs the same scripts as Redis does (Lua 5.1, as in Redis).
-- It emulates storage only, never the policy: values are kept as Redis keeps them (strings;
-- a number is written as Lua's tostring writes it, as Redis converts a script's numbers),
-- a collection left empty is deleted, and keys expire on the script's clock (NOW, set by the
-- caller before each script). An unknown command is an error, never a silent no-op.

NOW = 0
local DB, EXP = {}, {}

local function str(x)  -- a number as Redis writes a script's number: integral, else 17 digits
  if type(x) == 'number' then
    if x == math.floor(x) and math.abs(x) < 2 ^ 53 then return string.format('%d', x) end
    return string.format('%.17g', x)
  end
  return x
end

local function live(key)
  local e = EXP[key]
  if e ~= nil and e <= NOW then
    DB[key], EXP[key] = nil, nil
  end
  return DB[key]
end

local function obtain(key, kind)
  local o = live(key)
  if o == nil then
    o = {kind = kind, v = {}}
    DB[key], EXP[key] = o, nil
  elseif o.kind ~= kind then
    error('WRONGTYPE Operation against a key holding the wrong kind of value')
  end
  return o
end

local function tidy(key, o)
  if next(o.v) == nil then DB[key], EXP[key] = nil, nil end
end

local function bound(s)  -- a score bound: '-inf', '+inf', '(x' (exclusive) or x
  s = str(s)
  if s == '-inf' then return -math.huge, false end
  if s == '+inf' then return math.huge, false end
  if string.sub(s, 1, 1) == '(' then return tonumber(string.sub(s, 2)), true end
  return tonumber(s), false
end

local function within(score, lo, lo_ex, hi, hi_ex)
  return (score > lo or (not lo_ex and score == lo)) and (score < hi or (not hi_ex and score == hi))
end

local function index(n, i)  -- a list index as Redis reads it (negative: from the end), 1-based
  i = tonumber(i)
  if i < 0 then i = n + i end
  return i + 1
end

local C = {}

function C.TIME()
  local sec = math.floor(NOW)
  return {tostring(sec), tostring(math.floor((NOW - sec) * 1e6))}
end

function C.DEL(...)
  local n = 0
  for _, k in ipairs({...}) do
    if live(k) ~= nil then n = n + 1 end
    DB[k], EXP[k] = nil, nil
  end
  return n
end

function C.EXISTS(...)
  local n = 0
  for _, k in ipairs({...}) do
    if live(k) ~= nil then n = n + 1 end
  end
  return n
end

function C.EXPIRE(key, seconds)
  if live(key) == nil then return 0 end
  EXP[key] = NOW + tonumber(seconds)
  return 1
end

function C.HGETALL(key)
  local o, out = live(key), {}
  if o ~= nil then
    for k, v in pairs(o.v) do
      out[#out + 1] = k
      out[#out + 1] = v
    end
  end
  return out
end

function C.HSET(key, ...)
  local o, a, n = obtain(key, 'hash'), {...}, 0
  for i = 1, #a, 2 do
    local k = str(a[i])
    if o.v[k] == nil then n = n + 1 end
    o.v[k] = str(a[i + 1])
  end
  return n
end

function C.HGET(key, field)
  local o = live(key)
  if o == nil or o.v[str(field)] == nil then return false end
  return o.v[str(field)]
end

local function some(command, ...)  -- Redis refuses a command given no field at all
  if select('#', ...) == 0 then error("ERR wrong number of arguments for '" .. command .. "' command") end
end

function C.HMGET(key, ...)
  some('hmget', ...)
  local o, out = live(key), {}
  for i, k in ipairs({...}) do
    local v = o ~= nil and o.v[str(k)] or nil
    if v == nil then v = false end
    out[i] = v
  end
  return out
end

function C.HDEL(key, ...)
  some('hdel', ...)
  local o, n = live(key), 0
  if o == nil then return 0 end
  for _, k in ipairs({...}) do
    if o.v[str(k)] ~= nil then
      o.v[str(k)] = nil
      n = n + 1
    end
  end
  tidy(key, o)
  return n
end

function C.HINCRBY(key, field, by)
  local o = obtain(key, 'hash')
  local v = (tonumber(o.v[str(field)]) or 0) + tonumber(by)
  o.v[str(field)] = str(v)
  return v
end

function C.LPUSH(key, ...)
  local o = obtain(key, 'list')
  for _, v in ipairs({...}) do table.insert(o.v, 1, str(v)) end
  return #o.v
end

function C.RPUSH(key, ...)
  local o = obtain(key, 'list')
  for _, v in ipairs({...}) do o.v[#o.v + 1] = str(v) end
  return #o.v
end

function C.LRANGE(key, first, last)
  local o, out = live(key), {}
  if o == nil then return out end
  local n = #o.v
  for i = math.max(1, index(n, first)), math.min(n, index(n, last)) do out[#out + 1] = o.v[i] end
  return out
end

function C.LTRIM(key, first, last)
  local o = live(key)
  if o == nil then return 'OK' end
  local kept = C.LRANGE(key, first, last)
  o.v = kept
  tidy(key, o)
  return 'OK'
end

function C.LREM(key, count, value)
  local o, n = live(key), 0
  if o == nil then return 0 end
  count, value = tonumber(count), str(value)
  local limit = math.abs(count)
  if count < 0 then
    for i = #o.v, 1, -1 do
      if o.v[i] == value and (limit == 0 or n < limit) then
        table.remove(o.v, i)
        n = n + 1
      end
    end
  else
    local i = 1
    while i <= #o.v do
      if o.v[i] == value and (limit == 0 or n < limit) then
        table.remove(o.v, i)
        n = n + 1
      else
        i = i + 1
      end
    end
  end
  tidy(key, o)
  return n
end

function C.ZADD(key, ...)
  local o, a, n = obtain(key, 'zset'), {...}, 0
  for i = 1, #a, 2 do
    local m = str(a[i + 1])
    if o.v[m] == nil then n = n + 1 end
    o.v[m] = tonumber(a[i])
  end
  return n
end

function C.ZREM(key, ...)
  local o, n = live(key), 0
  if o == nil then return 0 end
  for _, m in ipairs({...}) do
    if o.v[str(m)] ~= nil then
      o.v[str(m)] = nil
      n = n + 1
    end
  end
  tidy(key, o)
  return n
end

function C.ZREMRANGEBYSCORE(key, min, max)
  local o, n = live(key), 0
  if o == nil then return 0 end
  local lo, lo_ex = bound(min)
  local hi, hi_ex = bound(max)
  local gone = {}
  for m, s in pairs(o.v) do
    if within(s, lo, lo_ex, hi, hi_ex) then gone[#gone + 1] = m end
  end
  for _, m in ipairs(gone) do o.v[m] = nil end
  tidy(key, o)
  return #gone
end

function C.ZCOUNT(key, min, max)
  local o, n = live(key), 0
  if o == nil then return 0 end
  local lo, lo_ex = bound(min)
  local hi, hi_ex = bound(max)
  for _, s in pairs(o.v) do
    if within(s, lo, lo_ex, hi, hi_ex) then n = n + 1 end
  end
  return n
end

redis = {
  call = function(command, ...)
    local fn = C[string.upper(command)]
    if fn == nil then error('keyspace.lua: the command ' .. command .. ' is not emulated') end
    return fn(...)
  end,
}

-- The judge budget's shared steps (judgeq/ratelimit/policy.py says what they do and why;
-- judgeq/ratelimit/memory.py runs these same scripts in process). Prepended to every operation's
-- script by judgeq/ratelimit/redis.py.
--
-- KEYS (every operation): 1 state hash, 2 configured limits hash (no expiry), 3 per-second
-- stats hash, 4 list of this epoch's recent answers (1 refused, 0 served), 5 zset of waiting
-- callers, 6 the run's share bucket hash (all of one judge share a hash tag: one cluster slot).
-- CONSTANTS: the policy's constants (CONSTANTS in scripts.py, which writes this table before
-- this file). ARGV: 'now' ('' = Redis's clock), then the operation's own arguments.

local C = {}
local NAMES = {'burst', 'window', 'recent', 'min_refused', 'min_evidence', 'min_share', 'min_span', 'cut', 'grow',
  'near', 'grow_near', 'clean', 'floor', 'default_retry_after', 'probe', 'probe_step', 'pace', 'horizon', 'token_hold',
  'use_weight', 'own_weight', 'ttl'}
for i, name in ipairs(NAMES) do C[name] = CONSTANTS[i] end
local A = ARGV

local DIMS = {'requests', 'input-tokens', 'output-tokens', 'tokens'}  -- tokens: input and output together (learned only)
local TOKEN_DIMS = {'input-tokens', 'output-tokens', 'tokens'}
local IS_TOKENS = {['input-tokens'] = true, ['output-tokens'] = true, ['tokens'] = true}
local STATE, CONFIG, STATS, RECENT, WAITING, RUN = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]

local function f(x) return string.format('%.17g', x) end
local function num(v, default)
  local n = tonumber(v)
  if n == nil then return default end
  return n
end

local now
if A[1] ~= nil and A[1] ~= '' then
  now = tonumber(A[1])
else
  local t = redis.call('TIME')
  now = tonumber(t[1]) + tonumber(t[2]) / 1e6
end

local function hgetall(key)
  local flat = redis.call('HGETALL', key)
  local t = {}
  for i = 1, #flat, 2 do t[flat[i]] = flat[i + 1] end
  return t
end

local function save(key, t, fields)
  local args = {}
  for _, k in ipairs(fields) do
    if t[k] ~= nil then
      args[#args + 1] = k
      args[#args + 1] = type(t[k]) == 'number' and f(t[k]) or t[k]
    end
  end
  if #args > 0 then redis.call('HSET', key, unpack(args)) end
  redis.call('EXPIRE', key, C.ttl)
end

-- the known limit of a dimension (a minute): the lower of configured and stated (0: none)
local function known_limit(st, cfg, d)
  local c, s = num(cfg[d], 0), num(st['srv_' .. d], 0)
  if c > 0 and s > 0 then return math.min(c, s) end
  return math.max(c, s)
end

-- whether the adaptive request rate is what paces requests: no request limit is known, or the
-- rate was cut below the known one (a limit given or stated is a ceiling, never a promise)
local function adaptive_applies(st, cfg)
  local ada = num(st['ada'], 0)
  local known = C.pace * known_limit(st, cfg, 'requests')
  return known <= 0 or (ada > 0 and ada < known)
end

-- the rate each bucket refills at (a minute): the lower of configured and stated, paced; for
-- requests, the adaptive rate when it is lower
local function effective(st, cfg)
  local lim = {}
  for _, d in ipairs(DIMS) do
    local l = known_limit(st, cfg, d)
    if l > 0 then lim[d] = C.pace * l end
    if d == 'requests' and num(st['ada'], 0) > 0 then
      lim[d] = math.min(lim[d] or math.huge, num(st['ada'], 0))
    end
  end
  return lim
end

-- A token dimension has two buckets: 'lvl_' counts reservations (estimated input, max_tokens)
-- and holds what the minute allows, so a refund of an unused reservation is never dropped;
-- 'pac_' holds one burst and is charged what a call is expected to use (its reservation x the
-- share of reservations calls used lately, 'use_'), corrected to what it used: no burst of
-- real tokens passes a server's per-second enforcement. Requests: one bucket of one burst.
local function capacity(d, l)
  if IS_TOKENS[d] then return l * C.token_hold / 60 end
  return math.max(l * C.burst / 60, 1)
end

local function pace_capacity(l) return l * C.burst / 60 end

-- the share of its reservation a call is expected to use, per token dimension (1 until known)
local function uses(st)
  local u = {}
  for _, d in ipairs(TOKEN_DIMS) do u[d] = num(st['use_' .. d], 1) end
  return u
end

local function refill(b, lim)
  local at = tonumber(b['at'])
  local elapsed = 0
  if at ~= nil then elapsed = math.max(0, now - at) end
  b['at'] = now
  for d, l in pairs(lim) do
    local cap = capacity(d, l)
    local v = tonumber(b['lvl_' .. d])
    if v == nil then
      if d == 'requests' then v = math.min(cap, 1) else v = cap end
    else
      v = math.min(cap, v + elapsed * l / 60)
    end
    b['lvl_' .. d] = v
    if IS_TOKENS[d] then
      local pcap = pace_capacity(l)
      local p = tonumber(b['pac_' .. d])
      if p == nil then p = pcap else p = math.min(pcap, p + elapsed * l / 60) end
      b['pac_' .. d] = p
    end
  end
end

local function bucket_wait(b, need, lim, use)
  local wait = 0
  for d, l in pairs(lim) do
    local want = math.min(need[d], capacity(d, l))
    local v = b['lvl_' .. d]
    if v < want - 1e-6 then wait = math.max(wait, (want - v) * 60 / l) end
    if IS_TOKENS[d] then
      local pwant = math.min(need[d] * use[d], pace_capacity(l))
      local p = b['pac_' .. d]
      if p < pwant - 1e-6 then wait = math.max(wait, (pwant - p) * 60 / l) end
    end
  end
  return wait
end

-- add amounts to the buckets of one kind ('lvl_' or 'pac_') that exist
local function bucket_add(b, amounts, kind)
  for d, a in pairs(amounts) do
    local v = tonumber(b[kind .. d])
    if v ~= nil then b[kind .. d] = v + a end
  end
end

-- take a grant: its reservation from 'lvl_', what it is expected to use from 'pac_'
local function bucket_take(b, need, lim, use)
  for d, _ in pairs(lim) do
    b['lvl_' .. d] = b['lvl_' .. d] - need[d]
    if IS_TOKENS[d] then b['pac_' .. d] = b['pac_' .. d] - need[d] * use[d] end
  end
end

local LEVELS = {'at', 'lvl_requests', 'lvl_input-tokens', 'lvl_output-tokens', 'lvl_tokens', 'pac_input-tokens',
  'pac_output-tokens', 'pac_tokens'}

-- per-second counts: 'a' granted, 'o' served, 'f' served at a job's first call, 'd' done without
-- an answer (failed, or never sent), 'r' jobs refused (first refusal), 'q' 429s, 'x' refusals
-- of jobs judged refused for themselves
local function count(what)
  local sec = math.floor(now)
  local lo = tonumber(redis.call('HGET', STATS, 'lo'))
  if lo == nil or sec - lo > 240 then
    redis.call('DEL', STATS)
    redis.call('HSET', STATS, 'lo', sec)
  elseif sec - lo > 70 then
    for s = lo, sec - 61 do
      redis.call('HDEL', STATS, s .. ':a', s .. ':o', s .. ':f', s .. ':d', s .. ':r', s .. ':q', s .. ':x')
    end
    redis.call('HSET', STATS, 'lo', sec - 60)
  end
  redis.call('HINCRBY', STATS, sec .. ':' .. what, 1)
  redis.call('EXPIRE', STATS, 120)
end

-- sums over the whole seconds from 'first' to now
local function window(first)
  local sec = math.floor(now)
  local names = {'a', 'o', 'f', 'd', 'r', 'q', 'x'}
  local out = {a = 0, o = 0, f = 0, d = 0, r = 0, q = 0, x = 0}
  local fields = {}
  for s = first, sec do
    for _, k in ipairs(names) do fields[#fields + 1] = s .. ':' .. k end
  end
  if #fields == 0 then return out end  -- (a window that starts after now: Redis refuses an empty HMGET)
  local values = redis.call('HMGET', STATS, unpack(fields))
  for i, v in ipairs(values) do
    local k = names[(i - 1) % #names + 1]
    out[k] = out[k] + num(v, 0)
  end
  return out
end

-- congestion: of the recent answers, more refused than the thresholds over and above the share
-- of jobs the server refuses for themselves ('own', learned)
local function congested(st)
  local marks = redis.call('LRANGE', RECENT, 0, -1)
  local refused = 0
  for _, m in ipairs(marks) do refused = refused + tonumber(m) end
  local own = num(st['own'], 0) * #marks
  return #marks >= C.min_evidence and refused >= C.min_refused + own and refused >= (C.min_share * #marks) + own
end

-- the share of jobs refused for themselves ('own') learned from one more job: x 1 for such a
-- job, 0 for a job served; a weighted mean, exact from the first job on (its weights' sum in
-- 'own_n'). Returns the new 'own' and 'own_n' (the caller writes them with its other fields).
local function own_share(st, x)
  local keep = 1 - C.own_weight
  local n = keep * num(st['own_n'], 0) + 1
  return (keep * num(st['own_n'], 0) * num(st['own'], 0) + x) / n, n
end

local function remember(mark)
  redis.call('LPUSH', RECENT, mark)
  redis.call('LTRIM', RECENT, 0, C.recent - 1)
  redis.call('EXPIRE', RECENT, C.ttl)
end

-- give back to the reservation buckets 'back' and to the pace buckets 'pace' (per token
-- dimension; negative: charge), the run's share bucket too; st: the state as the caller read it
local function refund(st, back, pace, fraction)
  bucket_add(st, back, 'lvl_')
  bucket_add(st, pace, 'pac_')
  save(STATE, st, LEVELS)
  if fraction > 0 and redis.call('EXISTS', RUN) == 1 then
    local run = hgetall(RUN)
    bucket_add(run, back, 'lvl_')
    bucket_add(run, pace, 'pac_')
    save(RUN, run, LEVELS)
  end
end

-- per token dimension, from input and output amounts
local function token_amounts(input, output)
  return {['input-tokens'] = input, ['output-tokens'] = output, ['tokens'] = input + output}
end

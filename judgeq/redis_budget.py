"""The judge budget in Redis: one :class:`judgeq._budget.Budget` shared by every worker
process and machine of a judge (see :mod:`judgeq._budget` for the algorithm).

Each operation is one Lua script (atomic; Redis's own clock, so machines need not agree on
the time).  Keys, per judge (provider, model, a hash of the key; never the key):

=====================================  ====  ============================================
``judgeq:budget:{NAME}``               hash  levels, learned limits, pause, adaptive rate
``judgeq:budget:{NAME}:recent``        zset  grants of the last minute (adaptive mode only)
=====================================  ====  ============================================

Why a script of our own rather than a rate-limit library: the budget must reserve several
quantities at once (a request, estimated input tokens, ``max_tokens`` output tokens) and
refund part of them after the call, learn its limits from the server's headers and pause on
the server's ``retry-after``; ``limits`` (the well-kept library) checks fixed amounts against
fixed limits and has no refund or pause.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping

import redis

from judgeq._budget import ADAPTIVE_EPOCH, ADAPTIVE_GROWTH, Limits, Usage, server_limits
from judgeq.redis_store import store_errors

REFUND_EVERY = 1.0
"""Seconds a process may hold refunds back (they go out with its next reservation)."""
TTL = 3600
"""Seconds an unused budget is kept (it is rebuilt full, like a fresh provider bucket)."""

_ACQUIRE = """
-- first the refunds this process has gathered since its last call (see RedisBudget.settle)
for i, dim in ipairs({'lvl_input-tokens', 'lvl_output-tokens'}) do
  local back = tonumber(ARGV[7 + i]) or 0
  if back ~= 0 and redis.call('HEXISTS', KEYS[1], dim) == 1 then
    redis.call('HINCRBYFLOAT', KEYS[1], dim, back)
  end
end
local grow = tonumber(ARGV[10]) or 0
local adaptive = redis.call('HEXISTS', KEYS[1], 'ada') == 1
if grow ~= 0 and adaptive and redis.call('HEXISTS', KEYS[1], 'srv_requests') == 0 then
  redis.call('HINCRBYFLOAT', KEYS[1], 'ada', grow)
end
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1e6
local h = redis.call('HMGET', KEYS[1], 'pause', 'at', 'lvl_requests', 'lvl_input-tokens',
  'lvl_output-tokens', 'srv_requests', 'srv_input-tokens', 'srv_output-tokens', 'ada')
local pause = tonumber(h[1]) or 0
if pause > now then return tostring(pause - now) end
local at = tonumber(h[2]) or now
local elapsed = math.max(0, now - at)
local dims = {'requests', 'input-tokens', 'output-tokens'}
local lim, lvl = {}, {}
local wait = 0
for i = 1, 3 do
  local given = tonumber(ARGV[3 + i]) or 0
  local server = tonumber(h[5 + i]) or 0
  local l = server
  if given > 0 and server > 0 then l = math.min(given, server) elseif given > 0 then l = given end
  if l <= 0 and i == 1 then l = tonumber(h[9]) or 0 end
  lim[i] = l
  if l > 0 then
    local v = tonumber(h[2 + i])
    if v == nil then v = l else v = math.min(l, v + elapsed * l / 60) end
    lvl[i] = v
    local want = math.min(tonumber(ARGV[i]), l)
    if v < want - 1e-6 then wait = math.max(wait, (want - v) * 60 / l) end
  end
end
local upd = {'at', tostring(now)}
for i = 1, 3 do
  if lim[i] > 0 then
    local v = lvl[i]
    if wait == 0 then v = v - tonumber(ARGV[i]) end
    upd[#upd + 1] = 'lvl_' .. dims[i]
    upd[#upd + 1] = tostring(v)
  end
end
redis.call('HSET', KEYS[1], unpack(upd))
redis.call('EXPIRE', KEYS[1], ARGV[7])
-- '?': the server's limits are not (or no longer: the budget expired) known here
local unknown = ''
if h[6] == false and h[7] == false and h[8] == false then unknown = '?' end
if wait > 0 then return tostring(wait) .. unknown end
if (tonumber(ARGV[4]) or 0) <= 0 and (tonumber(h[6]) or 0) <= 0 then
  local seq = redis.call('HINCRBY', KEYS[1], 'seq', 1)
  redis.call('ZADD', KEYS[2], now, tostring(seq))
  redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now - 60)
  redis.call('EXPIRE', KEYS[2], 120)
end
return '0' .. unknown
"""

_SETTLE = """
for i, dim in ipairs({'lvl_input-tokens', 'lvl_output-tokens'}) do
  if redis.call('HEXISTS', KEYS[1], dim) == 1 then
    redis.call('HINCRBYFLOAT', KEYS[1], dim, ARGV[i])
  end
end
if redis.call('HEXISTS', KEYS[1], 'ada') == 1 and redis.call('HEXISTS', KEYS[1], 'srv_requests') == 0 then
  redis.call('HINCRBYFLOAT', KEYS[1], 'ada', ARGV[3])
end
return 1
"""

_LEARN = """
redis.call('EXPIRE', KEYS[1], ARGV[1])
for i = 2, #ARGV, 3 do
  redis.call('HSET', KEYS[1], 'srv_' .. ARGV[i], ARGV[i + 1])
  if ARGV[i + 2] ~= '' then
    local lvl = tonumber(redis.call('HGET', KEYS[1], 'lvl_' .. ARGV[i]))
    local rem = tonumber(ARGV[i + 2])
    if lvl == nil or rem < lvl then redis.call('HSET', KEYS[1], 'lvl_' .. ARGV[i], ARGV[i + 2]) end
  end
end
return 1
"""

_THROTTLED = """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1e6
local pause = tonumber(redis.call('HGET', KEYS[1], 'pause')) or 0
redis.call('HSET', KEYS[1], 'pause', tostring(math.max(pause, now + tonumber(ARGV[1]))))
local halved = tonumber(redis.call('HGET', KEYS[1], 'ada_at')) or 0
if (tonumber(ARGV[2]) or 0) <= 0 and redis.call('HEXISTS', KEYS[1], 'srv_requests') == 0
    and now - halved >= tonumber(ARGV[4]) then
  redis.call('HSET', KEYS[1], 'ada_at', tostring(now))
  local ada = tonumber(redis.call('HGET', KEYS[1], 'ada')) or 0
  if ada <= 0 then ada = redis.call('ZCOUNT', KEYS[2], now - 60, '+inf') end
  ada = math.max(1, ada / 2)
  redis.call('HSET', KEYS[1], 'ada', tostring(ada))
  local lvl = tonumber(redis.call('HGET', KEYS[1], 'lvl_requests')) or 0
  redis.call('HSET', KEYS[1], 'lvl_requests', tostring(math.min(lvl, ada)))
end
redis.call('EXPIRE', KEYS[1], ARGV[3])
return 1
"""


class RedisBudget:
    """A :class:`judgeq._budget.Budget` in Redis, named by :func:`judgeq._budget.budget_key`."""

    def __init__(self, client: redis.Redis, name: str) -> None:
        self.r = client
        self.keys = [f"judgeq:budget:{{{name}}}", f"judgeq:budget:{{{name}}}:recent"]
        self._acquire = client.register_script(_ACQUIRE)
        self._settle = client.register_script(_SETTLE)
        self._throttled = client.register_script(_THROTTLED)
        self._learn = client.register_script(_LEARN)
        self._learned: dict[str, int] = {}
        self._lock = threading.Lock()
        self._pending = [0.0, 0.0, 0.0]
        """Refunds not yet applied: input tokens, output tokens, adaptive growth."""
        self._flushed = time.monotonic()

    @store_errors
    def acquire(self, input_tokens: int, output_tokens: int, limits: Limits) -> float:
        back_in, back_out, grow = self._take_pending()
        args = [1, input_tokens, output_tokens, *limits.as_tuple(), TTL, back_in, back_out, grow]
        try:
            answer = str(self._acquire(keys=self.keys, args=args))
        except BaseException:
            self._add_pending(back_in, back_out, grow)  # not applied: keep them for the next call
            raise
        if answer.endswith("?") and self._learned:
            self._learned = {}  # the budget lost the server's limits (expired): teach them again
        return float(answer.rstrip("?"))

    @store_errors
    def settle(self, reserved: Usage, used: Usage) -> None:
        """Refund what a call did not use. Gathered in this process and applied with its next
        :meth:`acquire` (one round trip a call instead of two), or at once when the last
        refund went out more than :data:`REFUND_EVERY` seconds ago."""
        back_in = reserved.input_tokens - used.input_tokens
        back_out = reserved.output_tokens - used.output_tokens
        self._add_pending(back_in, back_out, ADAPTIVE_GROWTH)
        if time.monotonic() - self._flushed >= REFUND_EVERY:
            back_in, back_out, grow = self._take_pending()
            try:
                self._settle(keys=self.keys, args=[back_in, back_out, grow])
            except BaseException:
                self._add_pending(back_in, back_out, grow)
                raise

    def _add_pending(self, back_in: float, back_out: float, grow: float) -> None:
        with self._lock:
            self._pending[0] += back_in
            self._pending[1] += back_out
            self._pending[2] += grow

    def _take_pending(self) -> tuple[float, float, float]:
        with self._lock:
            taken = (self._pending[0], self._pending[1], self._pending[2])
            self._pending = [0.0, 0.0, 0.0]
            self._flushed = time.monotonic()
            return taken

    @store_errors
    def observe(self, headers: Mapping[str, str]) -> None:
        learned = server_limits(headers)
        if learned and learned != self._learned:  # written when they change, not on every call
            remaining = server_limits(headers, "remaining")
            args: list[object] = [TTL]
            for dim, limit in learned.items():
                args += [dim, limit, remaining.get(dim, "")]
            self._learn(keys=self.keys, args=args)
            self._learned = learned

    @store_errors
    def throttled(self, retry_after: float | None, limits: Limits) -> None:
        wait = retry_after if retry_after is not None else 1.0
        self._throttled(keys=self.keys, args=[wait, limits.rpm or 0, TTL, ADAPTIVE_EPOCH])

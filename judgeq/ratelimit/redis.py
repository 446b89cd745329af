"""The judge's rate limit in Redis: one :class:`~judgeq.ratelimit.policy.Budget` shared by every
worker process and machine of a judge. The policy (:mod:`judgeq.ratelimit.policy`) runs in one
Lua script per operation (``lua/common.lua`` + ``lua/<operation>.lua``: atomic, on Redis's clock,
so machines need not agree on the time); its constants are passed from ``policy.py`` with every
call, so they are written once.

Keys, per judge (provider, model, a hash of the key; never the key)::

    judgeq:budget:{NAME}          hash  levels, the server's limits, pause, adaptive rate, epoch
    judgeq:budget:{NAME}:cfg      hash  the judge's configured limits (kept until reset)
    judgeq:budget:{NAME}:stats    hash  per-second counts of the last minute
    judgeq:budget:{NAME}:recent   list  this epoch's last answers (1: a job refused)
    judgeq:budget:{NAME}:wait     zset  callers waiting, until when
    judgeq:budget:{NAME}:run:ID   hash  a run's share bucket
    judgeq:budgets                set   every budget's name (``judgeq budget``)

Why scripts of our own rather than a rate-limit library: the budget reserves several quantities
at once and refunds part of them after the call, learns its limits from the server's headers,
pauses on the server's ``retry-after`` and adapts its rate to 429s; ``limits`` (the well-kept
library) checks fixed amounts against fixed limits, with no refund, pause or adaptation.
"""

from __future__ import annotations

import math
import os
import threading
import time
from collections.abc import Callable, Mapping
from importlib import resources
from typing import Any

import redis

from judgeq.ratelimit import policy
from judgeq.ratelimit.policy import DIMENSIONS, BudgetState, Grant, Limits, Share, Usage, server_limits
from judgeq.redis_connect import store_errors

__all__ = [
    "CONSTANTS",
    "NAMES",
    "RELEARN",
    "TTL",
    "RedisBudget",
    "budget_keys",
    "budget_names",
    "read_state",
    "reset_budget",
]

TTL = 3600
"""Seconds an unused budget is kept (it is rebuilt small, like a fresh bucket); the configured
limits are kept until ``judgeq budget reset``."""

CONSTANTS = (
    policy.BURST_SECONDS,
    policy.WINDOW,
    policy.RECENT,
    policy.MIN_REFUSED,
    policy.MIN_EVIDENCE,
    policy.MIN_SHARE,
    policy.MIN_SPAN,
    policy.CUT,
    policy.GROW,
    policy.NEAR,
    policy.GROW_NEAR,
    policy.CLEAN,
    policy.FLOOR,
    policy.DEFAULT_RETRY_AFTER,
    policy.PROBE,
    policy.PROBE_STEP,
    policy.PACE,
    TTL,
)
"""In the order ``lua/common.lua`` reads them."""

NAMES = "judgeq:budgets"
RELEARN = 10.0
"""Seconds after which a worker writes the server's limits again though they did not change."""


def _script(name: str) -> str:
    lua = resources.files("judgeq.ratelimit").joinpath("lua")
    return lua.joinpath("common.lua").read_text() + "\n" + lua.joinpath(f"{name}.lua").read_text()


def budget_keys(name: str, run: str = "") -> list[str]:
    """The keys of a judge's budget (one hash tag: one cluster slot), in the scripts' order."""
    base = f"judgeq:budget:{{{name}}}"
    return [base, f"{base}:cfg", f"{base}:stats", f"{base}:recent", f"{base}:wait", f"{base}:run:{run}"]


class RedisBudget:
    """A :class:`~judgeq.ratelimit.policy.Budget` in Redis, named by
    :func:`~judgeq.ratelimit.policy.budget_key`. ``clock`` (tests only) replaces Redis's clock
    in every decision."""

    def __init__(self, client: redis.Redis, name: str, clock: Callable[[], float] | None = None) -> None:
        self.r = client
        self.name = name
        self.keys = budget_keys(name)
        self._clock = clock
        self._ops = {
            op: client.register_script(_script(op)) for op in ("acquire", "settle", "refused", "observe")
        }
        self._learned: dict[str, int] = {}
        self._learned_at = 0.0
        self._listed = False

    def _call(self, op: str, share: Share | None, *args: str | int | float) -> Any:
        keys = budget_keys(self.name, share.run) if share is not None else self.keys
        now = "" if self._clock is None else repr(self._clock())
        return self._ops[op](keys=keys, args=[*CONSTANTS, now, *args])

    @store_errors
    def acquire(self, input_tokens: int, output_tokens: int, share: Share | None = None) -> Grant:
        if not self._listed:  # outside the scripts: the set is in another cluster slot
            self.r.sadd(NAMES, self.name)
            self._listed = True
        caller = f"{os.getpid()}:{threading.get_ident()}"
        fraction = share.fraction if share is not None else 0
        wait, epoch = self._call("acquire", share, caller, input_tokens, output_tokens, fraction)
        return Grant(float(wait), int(epoch))

    @store_errors
    def settle(
        self, reserved: Usage, used: Usage, *, ok: bool, epoch: int, share: Share | None = None
    ) -> None:
        self._call(
            "settle",
            share,
            reserved.input_tokens - used.input_tokens,
            reserved.output_tokens - used.output_tokens,
            1 if ok else 0,
            epoch,
            share.fraction if share is not None else 0,
        )

    @store_errors
    def refused(
        self,
        reserved: Usage,
        retry_after: float | None,
        *,
        epoch: int,
        nth: int = 1,
        first_epoch: int = -1,
        share: Share | None = None,
    ) -> float:
        pause = self._call(
            "refused",
            share,
            reserved.input_tokens,
            reserved.output_tokens,
            "" if retry_after is None else repr(float(retry_after)),
            epoch,
            nth,
            first_epoch,
            share.fraction if share is not None else 0,
        )
        return float(pause)

    @store_errors
    def observe(self, headers: Mapping[str, str]) -> None:
        learned = server_limits(headers)
        if not learned:
            return
        # written when they change, and again now and then (the budget may have expired or been
        # reset since), not on every call
        if learned == self._learned and time.monotonic() - self._learned_at < RELEARN:
            return
        remaining = server_limits(headers, "remaining")
        args: list[str | int] = []
        for dim, limit in learned.items():
            args += [dim, limit, remaining.get(dim, "")]
        self._call("observe", None, *args)
        self._learned, self._learned_at = learned, time.monotonic()

    @store_errors
    def configure(self, limits: Limits | None) -> None:
        given = limits.by_dimension() if limits is not None else {}
        pipe = self.r.pipeline()
        if limits is None:
            pipe.delete(self.keys[1])
        if given:
            pipe.hset(self.keys[1], mapping=given)  # type: ignore[arg-type]
        if given.get("requests"):
            pipe.hdel(self.keys[0], "ada")
        pipe.sadd(NAMES, self.name)
        pipe.execute()

    @store_errors
    def snapshot(self) -> BudgetState:
        return read_state(self.r, self.name, self._clock)


def read_state(client: redis.Redis, name: str, clock: Callable[[], float] | None = None) -> BudgetState:
    """The budget's state now, read without changing it (``judgeq budget``)."""
    keys = budget_keys(name)
    pipe = client.pipeline()
    pipe.hgetall(keys[0])
    pipe.hgetall(keys[1])
    pipe.hgetall(keys[2])
    pipe.zrangebyscore(keys[4], "-inf", "+inf", withscores=True)
    pipe.time()
    st, cfg, stats, waiting, (sec, usec) = pipe.execute()
    st, cfg, stats = (_text(h) for h in (st, cfg, stats))
    now = clock() if clock is not None else sec + usec / 1e6
    configured = Limits.of({d: float(cfg[d]) for d in DIMENSIONS if d in cfg})
    server = Limits.of({d: float(st[f"srv_{d}"]) for d in DIMENSIONS if f"srv_{d}" in st})
    state = BudgetState(name=name, configured=configured, server=server)
    if not configured.rpm and not server.rpm and float(st.get("ada", 0) or 0) > 0:
        state.adaptive_rpm = float(st["ada"])
    limits = {
        d: (policy.PACE * v if d in (configured.by_dimension() | server.by_dimension()) else v)
        for d, v in state.effective().items()
    }
    at = float(st["at"]) if "at" in st else now
    for dim, limit in limits.items():
        level = st.get(f"lvl_{dim}")
        cap = policy.capacity(dim, limit)
        state.levels[dim] = (
            policy.start(dim, cap)
            if level is None
            else min(cap, float(level) + max(0.0, now - at) * limit / 60)
        )
    state.paused_for = max(0.0, float(st.get("pause", 0) or 0) - now)
    first = math.floor(now) - 59
    for field, value in stats.items():
        sec, _, what = field.partition(":")
        if what and int(sec) >= first:
            if what == "a":
                state.requests_last_minute += int(value)
            elif what == "o":
                state.served_last_minute += int(value)
            elif what == "q":
                state.refused_last_minute += int(value)
    state.waiting = sum(1 for _, until in waiting if until > now)
    return state


def budget_names(client: redis.Redis) -> list[str]:
    """Every judge budget known to this Redis (in use, or with limits set); the names of
    budgets that expired unused are dropped from the set as they are found."""
    names = sorted(_text_one(n) for n in client.smembers(NAMES))
    pipe = client.pipeline()
    for name in names:
        keys = budget_keys(name)
        pipe.exists(keys[0], keys[1])
    alive = pipe.execute()
    gone = [n for n, a in zip(names, alive, strict=True) if not a]
    if gone:
        client.srem(NAMES, *gone)
    return [n for n in names if n not in gone]


def reset_budget(client: redis.Redis, name: str) -> None:
    """Forget everything of a judge's budget: its configured and learned limits, levels, stats."""
    keys = budget_keys(name)
    runs = list(client.scan_iter(match=f"judgeq:budget:{{{name}}}:run:*", count=1000))
    client.delete(*keys[:5], *runs)
    client.srem(NAMES, name)


def _text(h: Mapping[object, object]) -> dict[str, str]:
    return {_text_one(k): _text_one(v) for k, v in h.items()}


def _text_one(v: object) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)

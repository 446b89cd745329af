"""The judge's rate limit in Redis: one :class:`~judgeq.ratelimit.policy.Budget` shared by every
worker process and machine of a judge. Each operation is one policy script
(:mod:`judgeq.ratelimit.scripts`) run in Redis with ``register_script``: atomic, on Redis's clock,
so machines need not agree on the time.

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

import os
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

import redis

from judgeq.ratelimit.headers import long_window_limits
from judgeq.ratelimit.policy import BudgetState, Grant, Limits, server_limits
from judgeq.ratelimit.scripts import OPERATIONS, ScriptBudget, budget_keys, script_text
from judgeq.redis_connect import store_errors

__all__ = [
    "NAMES",
    "RELEARN",
    "RELIST",
    "RedisBudget",
    "budget_keys",
    "budget_names",
    "read_state",
    "reset_budget",
]

NAMES = "judgeq:budgets"
RELEARN = 10.0
"""Seconds after which a worker writes the server's limits again though they did not change."""
RELIST = 10.0
"""Seconds after which a process using a budget adds its name to :data:`NAMES` again (it may have
been dropped since: ``judgeq budget reset``, or the budget expired unused and ``judgeq budget``
pruned it)."""


class RedisBudget(ScriptBudget):
    """A :class:`~judgeq.ratelimit.policy.Budget` in Redis, named by
    :func:`~judgeq.ratelimit.policy.budget_key`. ``clock`` (tests only) replaces Redis's clock
    in every decision, and this process's clock in when the name is listed again (:meth:`_list`)."""

    def __init__(self, client: redis.Redis, name: str, clock: Callable[[], float] | None = None) -> None:
        super().__init__(name, clock)
        self.r = client
        self._ops = {op: client.register_script(script_text(op)) for op in OPERATIONS}
        self._learned: dict[str, int] = {}
        self._learned_at = 0.0
        self._listed_at: float | None = None
        self._epoch = 0

    @store_errors  # (every operation's script: Redis failing is the store failing, never the job)
    def _run(self, op: str, keys: list[str], now: float | None, args: list[str]) -> Any:
        return self._ops[op](keys=keys, args=args)

    def _granted(self, grant: Grant) -> None:
        self._list(grant.epoch)

    def _caller(self) -> str:
        return f"{os.getpid()}:{threading.get_ident()}"

    def _now(self) -> float:
        return self._clock() if self._clock is not None else time.monotonic()

    @store_errors
    def _list(self, epoch: int) -> None:
        """Add this budget's name to :data:`NAMES` (``judgeq budget`` lists it) after an acquire
        that returned ``epoch``: the first time in this process, again every :data:`RELIST`
        seconds, and at once when the epoch went back (the budget's state was made afresh: a
        reset, or it expired).

        Why so: ``judgeq budget reset`` removes the name, and ``judgeq budget`` drops the name
        of a budget that expired, while a worker goes on using it (and so makes its keys
        again); the name must come back. An ``SADD`` on every call would be a second round trip
        per judge call; the acquire script could say when it made the state afresh, but the
        set cannot be written from the scripts (it is in another cluster slot than the
        budget's keys). So the name is written again every :data:`RELIST` seconds (one
        round trip per process per 10 s, as :data:`RELEARN` does for the server's limits): a
        budget in use is listed again at most that long after a reset, and at its first call
        after it expired (an hour unused). The epoch the script returns goes back to 0 when
        the state was made afresh: a process that saw a later one lists the name at once.
        Written after the acquire, so the budget's keys exist when the name is listed again
        (``budget_names`` drops a name without them)."""
        now = self._now()
        made_afresh = epoch < self._epoch  # (or another thread's older answer: one SADD more)
        self._epoch = epoch
        if made_afresh or self._listed_at is None or now - self._listed_at >= RELIST:
            self.r.sadd(NAMES, self.name)  # outside the scripts: the set is in another cluster slot
            self._listed_at = now

    @store_errors
    def observe(self, headers: Mapping[str, str]) -> None:
        learned = server_limits(headers)
        for dim in long_window_limits(headers):  # (forgotten as per-minute limits)
            learned.setdefault(dim, 0)
        # written when they change, and again now and then (the budget may have expired or been
        # reset since), not on every call: a round trip saved per answer
        if not learned or (learned == self._learned and time.monotonic() - self._learned_at < RELEARN):
            return
        super().observe(headers)
        self._learned, self._learned_at = learned, time.monotonic()

    @store_errors
    def configure(self, limits: Limits | None) -> None:
        super().configure(limits)
        self.r.sadd(NAMES, self.name)


def read_state(client: redis.Redis, name: str, clock: Callable[[], float] | None = None) -> BudgetState:
    """The budget's state now, read without changing it (``judgeq budget``)."""
    return RedisBudget(client, name, clock).snapshot()


def budget_names(client: redis.Redis) -> list[str]:
    """Every judge budget known to this Redis (in use, or with limits set); the names of
    budgets that expired unused are dropped from the set as they are found (a process that uses
    one again lists it again: :meth:`RedisBudget._list`)."""
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


def _text_one(v: object) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)

"""The rate-limit policy as Lua scripts, and the :class:`~judgeq.ratelimit.policy.Budget` over
them that both backends share.

The policy of :mod:`judgeq.ratelimit.policy` is written once, as one Lua script per operation
(``lua/common.lua`` + ``lua/<operation>.lua``). A backend only says how a script runs:
:class:`~judgeq.ratelimit.redis.RedisBudget` in Redis (atomic, shared by every worker),
:class:`~judgeq.ratelimit.memory.MemoryBudget` in this process (``lua/keyspace.lua`` stands in
for the few Redis commands the scripts use). The policy's constants are passed from
``policy.py`` with every call, so they too are written once.

Why one Lua policy rather than the policy in Python over small atomic primitives per backend
(as dramatiq's rate limiters do): every operation reads and writes several quantities at once
(three buckets, the run's share bucket, the congestion window, the adaptive rate), so as
primitives it would take several Redis round trips per call and a lock or optimistic retries
under hundreds of callers; a script is one round trip and atomic. The cost is measured by
``python benchmarks/budget_cost.py``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from importlib import resources
from typing import Any

from judgeq.ratelimit import policy
from judgeq.ratelimit.headers import long_window_limits
from judgeq.ratelimit.policy import (
    COMBINED,
    DIMENSIONS,
    BudgetState,
    Grant,
    Limits,
    Refusal,
    Share,
    Usage,
    server_limits,
)

__all__ = ["CONSTANTS", "OPERATIONS", "TTL", "ScriptBudget", "budget_keys", "script_text"]

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
    policy.HORIZON,
    policy.TOKEN_SECONDS,
    policy.USE_WEIGHT,
    policy.OWN_WEIGHT,
    TTL,
)
"""In the order ``lua/common.lua`` reads them."""

_CONSTANTS_LUA = "local CONSTANTS = {" + ", ".join(repr(float(c)) for c in CONSTANTS) + "}\n"
"""The constants as a Lua table, written into each operation's script: sent with every call as
arguments, they were two thirds of the values a worker encoded for Redis."""

OPERATIONS = ("acquire", "settle", "refused", "observe", "configure", "snapshot")


def script_text(name: str) -> str:
    """``lua/<name>.lua`` (the operations: after the policy's constants and ``lua/common.lua``)."""
    lua = resources.files("judgeq.ratelimit").joinpath("lua")
    own = lua.joinpath(f"{name}.lua").read_text()
    if name not in OPERATIONS:
        return own
    return _CONSTANTS_LUA + lua.joinpath("common.lua").read_text() + "\n" + own


def budget_keys(name: str, run: str = "") -> list[str]:
    """The keys of a judge's budget (one hash tag: one cluster slot), in the scripts' order."""
    base = f"judgeq:budget:{{{name}}}"
    return [base, f"{base}:cfg", f"{base}:stats", f"{base}:recent", f"{base}:wait", f"{base}:run:{run}"]


def _arg(value: str | int | float) -> str:
    """A script argument as redis-py sends it (a float by its repr)."""
    return repr(value) if isinstance(value, float) else str(value)


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _pairs(flat: Sequence[Any]) -> dict[str, float]:
    return {_text(flat[i]): float(_text(flat[i + 1])) for i in range(0, len(flat), 2)}


class ScriptBudget:
    """A :class:`~judgeq.ratelimit.policy.Budget` whose every operation is one policy script;
    a backend implements :meth:`_run`. ``clock`` (tests, and the in-process backend) replaces
    the backend's clock in every decision."""

    def __init__(self, name: str, clock: Callable[[], float] | None = None) -> None:
        self.name = name
        self.keys = budget_keys(name)
        self._clock = clock

    def _run(self, op: str, keys: list[str], now: float | None, args: list[str]) -> Any:
        """Run the script of ``op`` atomically; ``now`` None: on the backend's own clock."""
        raise NotImplementedError

    def _call(self, op: str, share: Share | None, *args: str | int | float) -> Any:
        keys = budget_keys(self.name, share.run) if share is not None else self.keys
        now = None if self._clock is None else self._clock()
        given = ["" if now is None else _arg(now), *map(_arg, args)]
        return self._run(op, keys, now, given)

    def acquire(
        self,
        input_tokens: int,
        output_tokens: int,
        share: Share | None = None,
        *,
        own_epoch: int = -1,
        first_epoch: int = -1,
    ) -> Grant:
        fraction = share.fraction if share is not None else 0
        wait, epoch, paused, free = self._call(
            "acquire", share, self._caller(), input_tokens, output_tokens, fraction, own_epoch, first_epoch
        )
        grant = Grant(float(_text(wait)), int(epoch), bool(int(paused)), bool(int(free)))
        self._granted(grant)
        return grant

    def _granted(self, grant: Grant) -> None:
        """A backend's own step after each acquire (none here)."""

    def _caller(self) -> str:
        """Who asks (a waiting caller is counted once)."""
        raise NotImplementedError

    def settle(
        self,
        reserved: Usage,
        used: Usage,
        *,
        ok: bool,
        epoch: int,
        share: Share | None = None,
        free: bool = False,
        first: bool = False,
    ) -> None:
        self._call(
            "settle",
            share,
            reserved.input_tokens,
            reserved.output_tokens,
            used.input_tokens,
            used.output_tokens,
            1 if ok else 0,
            epoch,
            share.fraction if share is not None else 0,
            1 if free else 0,
            1 if first else 0,
        )

    def refused(
        self,
        reserved: Usage,
        retry_after: float | None,
        *,
        epoch: int,
        nth: int = 1,
        previous_epoch: int = -1,
        since: float = 0.0,
        share: Share | None = None,
        free: bool = False,
        lent: int = 0,
    ) -> Refusal:
        pause, own = self._call(
            "refused",
            share,
            reserved.input_tokens,
            reserved.output_tokens,
            "" if retry_after is None else min(float(retry_after), policy.MAX_PAUSE),
            epoch,
            nth,
            previous_epoch,
            share.fraction if share is not None else 0,
            since,
            1 if free else 0,
            lent,
        )
        return Refusal(float(_text(pause)), bool(int(own)))

    def observe(self, headers: Mapping[str, str]) -> None:
        learned = server_limits(headers)
        longer = long_window_limits(headers)
        if not learned and not longer:
            return
        remaining = server_limits(headers, "remaining")
        args: list[str | int] = []
        for dim, limit in learned.items():
            args += [dim, limit, remaining.get(dim, "")]
        for dim in longer:  # a limit over a longer window (a day) is no per-minute limit: forget
            if dim not in learned:  # one taken per minute before its window showed
                args += [dim, 0, ""]
        self._call("observe", None, *args)

    def configure(self, limits: Limits | None) -> None:
        args: list[str | int] = ["1" if limits is None else "0"]
        for dim, value in (limits.by_dimension() if limits is not None else {}).items():
            args += [dim, value]
        self._call("configure", None, *args)

    def snapshot(self) -> BudgetState:
        levels, configured, server, ada, paused, granted, served, refused, waiting = self._call(
            "snapshot", None
        )
        return BudgetState(
            name=self.name,
            configured=Limits.of(_pairs(configured)),
            server=Limits.of(_pairs(server)),
            adaptive_rpm=float(_text(ada)) if _text(ada) else None,
            levels={d: v for d, v in _pairs(levels).items() if d in (*DIMENSIONS, COMBINED)},
            paused_for=float(_text(paused)),
            requests_last_minute=int(granted),
            served_last_minute=int(served),
            refused_last_minute=int(refused),
            waiting=int(waiting),
            tokens_limit=int(_pairs(server).get(COMBINED) or 0) or None,
        )

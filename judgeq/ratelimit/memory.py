"""The judge's rate limit in one process (``judgeq run``, tests).

It is not a second implementation of the policy: it runs the very scripts Redis runs
(:mod:`judgeq.ratelimit.scripts`) in an embedded Lua 5.1 (lupa, Redis's Lua version), where
``lua/keyspace.lua`` stands in for the few Redis commands they call. A script runs under this
budget's lock, as it runs alone in Redis: atomic for every thread of the process. The clock is
injectable (tests); keys expire on it as they do in Redis.

Cost (``python benchmarks/budget_cost.py``): tens of microseconds per job, against judge calls
of hundreds of milliseconds.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from lupa import lua51

from judgeq.ratelimit.scripts import OPERATIONS, ScriptBudget, script_text

__all__ = ["MemoryBudget"]


class MemoryBudget(ScriptBudget):
    """A :class:`~judgeq.ratelimit.policy.Budget` for one process; ``clock`` is injectable."""

    def __init__(self, name: str = "memory", clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__(name, clock)
        self._lock = threading.Lock()
        self._lua = lua51.LuaRuntime(unpack_returned_tuples=False)
        self._lua.execute(script_text("keyspace"))
        self._globals = self._lua.globals()
        # each operation compiled once, as a function of (KEYS, ARGV) like a script in Redis
        self._ops = {op: self._lua.eval(f"function(KEYS, ARGV)\n{script_text(op)}\nend") for op in OPERATIONS}

    def _run(self, op: str, keys: list[str], now: float | None, args: list[str]) -> Any:
        with self._lock:
            self._globals.NOW = now if now is not None else time.time()
            out = self._ops[op](self._lua.table_from(keys), self._lua.table_from(args))
            return _as_redis_reply(out)

    def _caller(self) -> str:
        return str(threading.get_ident())


def _as_redis_reply(value: Any) -> Any:
    """A script's return value as Redis converts it: a number to an integer (truncated), a
    table to a list up to its first nil, false to None."""
    if value is None or value is False:
        return None
    if value is True:
        return 1
    if isinstance(value, (int, float)):
        return int(value)
    if isinstance(value, (str, bytes)):
        return value
    out = []
    i = 1
    while value[i] is not None:
        out.append(_as_redis_reply(value[i]))
        i += 1
    return out

"""The judge's rate limit (its "budget"): the policy stated in :mod:`.policy` and executed once,
as Lua scripts (:mod:`.scripts`, ``lua/``), run in one process (:mod:`.memory`) or in Redis for
every worker (:mod:`.redis`, imported by the edges only); the servers' rate-limit headers read
in :mod:`.headers`."""

from judgeq.ratelimit.headers import LongLimit, long_window_limits, retry_after
from judgeq.ratelimit.memory import MemoryBudget
from judgeq.ratelimit.policy import (
    COMBINED,
    DIMENSIONS,
    NO_LIMITS,
    Budget,
    BudgetState,
    Grant,
    Limits,
    PausedPastDeadline,
    Refusal,
    Share,
    Usage,
    budget_key,
    estimate_input_tokens,
    server_limits,
    wait_for_budget,
)

__all__ = [
    "COMBINED",
    "DIMENSIONS",
    "NO_LIMITS",
    "Budget",
    "BudgetState",
    "Grant",
    "Limits",
    "LongLimit",
    "MemoryBudget",
    "PausedPastDeadline",
    "Refusal",
    "Share",
    "Usage",
    "budget_key",
    "estimate_input_tokens",
    "long_window_limits",
    "retry_after",
    "server_limits",
    "wait_for_budget",
]

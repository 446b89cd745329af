"""Scripted judge faults for tests and ``benchmarks/chaos.py``.

A fault plan maps job indices to directives of the fake Messages API
(:mod:`judgeq.testing.fake_anthropic`): permanent faults end as a null with a known reason,
transient ones (``*N``: fail the first N attempts) and out-of-range scores end graded.
"""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

__all__ = ["GRADED_ODDITIES", "PERMANENT", "TRANSIENT", "expected_nulls", "fault_plan", "response_rows"]

PERMANENT: dict[str, str] = {
    "429": "rate_limited",
    "529": "overloaded",
    "500": "api_error",
    "slow": "timeout",
    "garbage": "parse_error",
    "truncated": "parse_error",
    "refusal": "refusal",
}
TRANSIENT: tuple[str, ...] = ("429*2", "529*1", "500*2", "slow*1")
GRADED_ODDITIES: tuple[str, ...] = ("score=15", "score=-3")


def fault_plan(n: int, fraction: float = 0.3, seed: int = 7) -> dict[int, str]:
    """About ``fraction`` of ``n`` jobs get a fault: half permanent, half transient or odd."""
    rng = random.Random(seed)
    chosen = rng.sample(range(n), round(n * fraction))
    kinds = [*PERMANENT, *TRANSIENT, *GRADED_ODDITIES]
    return {i: kinds[k % len(kinds)] for k, i in enumerate(sorted(chosen))}


def expected_nulls(plan: dict[int, str]) -> Counter[str]:
    """The null reasons the plan must produce (transient faults and odd scores end graded)."""
    return Counter(PERMANENT[d] for d in plan.values() if d in PERMANENT)


def response_rows(
    n: int,
    plan: dict[int, str] | None = None,
    *,
    prefix: str = "j",
    width: int = 6,
    models: tuple[str, ...] = ("sys-a", "sys-b", "sys-c"),
) -> list[dict[str, Any]]:
    """``n`` response jobs with the plan's directives in their outputs (deterministic)."""
    plan = plan or {}
    rows = []
    for i in range(n):
        extra = f" [[fake:{plan[i]}]]" if i in plan else ""
        rows.append(
            {
                "id": f"{prefix}{i:0{width}d}",
                "input": f"Question number {i}?",
                "output": f"Answer number {i}.{extra}",
                "expected_answer": f"Answer {i}",
                "model": models[i % len(models)],
            }
        )
    return rows

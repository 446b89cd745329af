"""Per-question retrieval metrics: rank, hits and the position-weighted total score."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence

from judgeq.rubric.model import RetrievalConfig, Rubric, parse_band

__all__ = [
    "first_relevant_rank",
    "hits_at",
    "llm_grade",
    "parse_position_weights",
    "position_weight",
    "total_score",
]


def first_relevant_rank(doc_ids: Sequence[str], relevant: Iterable[str]) -> int | None:
    """1-based rank of the first retrieved doc that is relevant; None when none was retrieved.

    Several chunks of one document: the first counts (its rank is the chunk's position).
    """
    wanted = set(relevant)
    for rank, doc_id in enumerate(doc_ids, 1):
        if doc_id in wanted:
            return rank
    return None


def hits_at(rank: int | None, ks: Iterable[int]) -> dict[str, bool]:
    """``{"1": rank <= 1, "3": ...}``; a missing needle is a miss at every k."""
    return {str(k): rank is not None and rank <= k for k in ks}


def position_weight(rank: int | None, config: RetrievalConfig) -> float:
    """The weight of a rank band (``"1"``, ``"2-3"``, …); ``default_weight`` outside every band."""
    if rank is not None:
        for band, weight in config.position_weights.items():
            rng = parse_band(band)
            if rng is not None and rng[0] <= rank <= rng[1]:
                return weight
    return config.default_weight


def total_score(grade: float | None, rank: int | None, config: RetrievalConfig) -> float | None:
    """``grade x position weight``, rounded to 2 decimals; None when the grade is None."""
    if grade is None:
        return None
    return round(grade * position_weight(rank, config), 2)


def parse_position_weights(spec: str) -> Mapping[str, float]:
    """``1=1.0,2-3=0.95,4-5=0.85`` -> mapping (for a ``--position-weights`` flag)."""
    out: dict[str, float] = {}
    for part in filter(None, (p.strip() for p in spec.split(","))):
        band, _, value = part.partition("=")
        if parse_band(band) is None:
            raise ValueError(f"{band!r} is not a rank band like 1 or 2-3")
        try:
            out[band.strip()] = float(value)
        except ValueError:
            raise ValueError(
                f"weight {value.strip()!r} of rank band {band.strip()!r} is not a number"
            ) from None
    return out


def llm_grade(overall: float, rubric: Rubric) -> int:
    """A question's grade on 1-10 whatever the rubric's scale (pass 10, fail 1; 1-5 mapped
    linearly), rounded half up (7.5 -> 8), so retrieval metrics mean the same for every rubric."""
    lo, hi = rubric.lo, rubric.hi
    on_ten = 1 + 9 * (min(max(overall, lo), hi) - lo) / (hi - lo) if (lo, hi) != (1, 10) else overall
    return max(1, min(10, math.floor(on_ten + 0.5)))

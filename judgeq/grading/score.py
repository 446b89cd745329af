"""Scoring a parsed verdict: weighted overall, ceiling rules, safety gate, pass/fail.

Order of operations (numeric rubrics):

1. ``overall`` = sum of weight x dimension score, rounded to 2 decimals (a rubric without
   dimensions uses the holistic score), then clamped into the scale;
2. ceiling rules: every rule whose dimension score is below ``below`` caps the overall at
   ``cap``; the tightest cap wins.  A cap never raises a score;
3. safety gate (when on): a candidate output that fails a safety category has its overall
   capped at the safety cap (default 0: below the floor of a 1-based scale so a safety
   failure is unmistakable; the floor itself of a 0-based one) and the failed categories are
   recorded; the output never passes;
4. ``passed`` = overall >= the rubric's pass threshold.

Pass-fail rubrics: pass counts 1.0, fail 0.0; a safety failure turns a pass into a fail.
Missing dimensions are handled in parsing (holistic fallback, else ``parse_error``), so
scoring always sees every dimension.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

from judgeq.grading.safety import check_safety
from judgeq.grading.verdict import ParsedVerdict
from judgeq.rubric.model import Ceiling, Rubric

__all__ = ["Score", "apply_ceiling", "score_verdict", "weighted_overall"]


@dataclass(slots=True)
class Score:
    """The scored outcome of one verdict."""

    overall: float
    passed: bool
    scores: dict[str, float]
    flags: list[str] = field(default_factory=list)
    safety_categories: list[str] = field(default_factory=list)


def weighted_overall(scores: Mapping[str, float], weights: Mapping[str, float]) -> float:
    """Sum of weight x score over ``weights``, rounded to 2 decimals."""
    return round(math.fsum(weights[name] * scores[name] for name in weights), 2)


def apply_ceiling(overall: float, scores: Mapping[str, float], ceiling: Ceiling | None) -> tuple[float, bool]:
    """Cap ``overall`` by every matching rule; return (new overall, whether a cap bit)."""
    if ceiling is None or ceiling.dimension not in scores:
        return overall, False
    value = scores[ceiling.dimension]
    caps = [r.cap for r in ceiling.rules if value < r.below]
    if not caps or min(caps) >= overall:
        return overall, False
    return min(caps), True


def score_verdict(
    rubric: Rubric,
    verdict: ParsedVerdict,
    *,
    candidate: str | None = None,
    safety_gate: bool | None = None,
    safety_cap: float = 0.0,
) -> Score:
    """Turn a usable parsed verdict into a :class:`Score`.

    ``safety_gate`` None means "as the rubric says"; ``candidate`` is the text the gate checks.
    """
    flags = list(verdict.flags)
    if rubric.is_pass_fail:
        passed = verdict.verdict == "pass"
        overall = 1.0 if passed else 0.0
        scores: dict[str, float] = {}
    else:
        scores = dict(verdict.scores)
        if rubric.dimensions:
            overall = weighted_overall(scores, rubric.weights)
        else:
            assert verdict.holistic is not None
            overall = round(verdict.holistic, 2)
        overall = min(max(overall, float(rubric.lo)), float(rubric.hi))
        overall, capped = apply_ceiling(overall, scores, rubric.ceiling)
        if capped:
            flags.append("ceiling_applied")
        passed = overall >= (rubric.threshold or 0.0)
    gate = rubric.safety_gate if safety_gate is None else safety_gate
    categories = check_safety(candidate) if gate and candidate else []
    if categories:
        flags.append("safety_failed")
        overall = min(overall, safety_cap)
        passed = False
    return Score(overall=overall, passed=passed, scores=scores, flags=flags, safety_categories=categories)

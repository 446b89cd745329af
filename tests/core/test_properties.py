"""Property tests: overall within the scale, ceilings never raise, weight tolerance exact."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from judgeq import RubricError, load_rubric, parse_rubric
from judgeq.grading.score import apply_ceiling, score_verdict
from judgeq.grading.verdict import ParsedVerdict
from judgeq.rubric.model import WEIGHT_TOLERANCE, Ceiling, CeilingRule

QUALITY = load_rubric("quality")
DIMS = [d.name for d in QUALITY.dimensions]

scores_st = st.fixed_dictionaries({d: st.integers(1, 10) for d in DIMS})


@given(scores_st, st.floats(0, 1))
@settings(max_examples=300, deadline=None)
def test_overall_stays_within_scale(scores: dict[str, int], jitter: float) -> None:
    s = score_verdict(QUALITY, ParsedVerdict(scores={k: float(v) for k, v in scores.items()}))
    assert QUALITY.lo <= s.overall <= QUALITY.hi
    # with any valid re-weighting too
    raw = [jitter + 0.01, 1, 1, 1, 1]
    weights = {d: w / sum(raw) for d, w in zip(DIMS, raw, strict=True)}
    weights[DIMS[-1]] = 1 - math.fsum(weights[d] for d in DIMS[:-1])
    r = QUALITY.with_weights(weights)
    s = score_verdict(r, ParsedVerdict(scores={k: float(v) for k, v in scores.items()}))
    assert r.lo <= s.overall <= r.hi


@given(
    st.floats(1, 10),
    st.floats(1, 10),
    st.lists(st.tuples(st.floats(1, 10), st.floats(0, 10)), min_size=1, max_size=4),
)
@settings(max_examples=300, deadline=None)
def test_ceiling_never_raises_a_score(overall: float, acc: float, rules: list[tuple[float, float]]) -> None:
    ceiling = Ceiling(dimension="accuracy", rules=[CeilingRule(below=b, cap=c) for b, c in rules])
    capped, applied = apply_ceiling(overall, {"accuracy": acc}, ceiling)
    assert capped <= overall
    assert applied == (capped < overall)


def _rubric_with(weights: list[float]) -> str:
    dims = "\n".join(f"  - {{name: d{i}, weight: {w!r}}}" for i, w in enumerate(weights))
    return f"---\nname: p\nversion: 1.0.0\nscale: 1-5\ndescription: d\ndimensions:\n{dims}\n---\nb\n"


@given(st.lists(st.floats(0, 1, allow_nan=False), min_size=1, max_size=6))
@settings(max_examples=400, deadline=None)
def test_weight_validation_accepts_exactly_sums_within_tolerance(weights: list[float]) -> None:
    total = math.fsum(weights)
    ok = abs(total - 1.0) <= WEIGHT_TOLERANCE
    if ok:
        parse_rubric(_rubric_with(weights), "p.md")
    else:
        with pytest.raises(RubricError, match="sum to"):
            parse_rubric(_rubric_with(weights), "p.md")


@given(st.floats(-0.002, 0.002))
@settings(max_examples=200, deadline=None)
def test_weight_tolerance_boundary(delta: float) -> None:
    weights = [0.5, 0.5 + delta]
    ok = abs(math.fsum(weights) - 1.0) <= WEIGHT_TOLERANCE
    if ok:
        parse_rubric(_rubric_with(weights), "p.md")
    else:
        with pytest.raises(RubricError):
            parse_rubric(_rubric_with(weights), "p.md")

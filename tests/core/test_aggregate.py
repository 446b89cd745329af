"""The streaming Aggregator against reference computations and hand-derived fixtures."""

from __future__ import annotations

import json
import math
import statistics
from collections import Counter
from importlib import resources
from typing import Any

import pytest
import scipy.stats
from hypothesis import given, settings
from hypothesis import strategies as st

from judgeq.figures.stats import wilson
from judgeq.grading.result import Result
from judgeq.jobs.kinds import make_result
from judgeq.jobs.question import RetrievalStats
from judgeq.judges.prices import shipped_prices
from judgeq.report.aggregate import (
    Aggregator,
    Stats,
    estimate_cost,
    price_for,
    quantile,
)
from judgeq.report.build import build_report, new_aggregator
from judgeq.report.markdown import render_markdown
from judgeq.rubric.model import read_rubric_text
from judgeq.runspec import RunSpec

PRICES: dict[str, Any] = json.loads(resources.files("judgeq").joinpath("data/prices.json").read_text())


def res(index: int, overall: float | None = None, **kw: Any) -> Result:
    """A graded result when ``overall`` is given, else null (``null_reason`` defaults to timeout)."""
    base: dict[str, Any] = {
        "job_id": f"j{index}",
        "index": index,
        "rubric_name": "quality",
        "rubric_version": "1.0.0",
        "judge_model": "scripted",
    }
    if overall is None:
        base.update(status="null", null_reason=kw.pop("null_reason", "timeout"))
    else:
        base.update(status="graded", overall=overall, passed=kw.pop("passed", overall >= 7.0))
    base.update(kw)
    return make_result(**base)


def aggregate(results: list[Result], **kw: Any) -> dict[str, Any]:
    judge_model = kw.pop("judge_model", "scripted")
    agg = Aggregator(**kw)
    for r in results:
        agg.add(r)
    return agg.report(judge_model=judge_model)


# -- quantile / Stats against the statistics module ---------------------------------------------

two_decimals = st.integers(-10_000, 10_000).map(lambda k: k / 100)


@given(st.lists(two_decimals, min_size=1, max_size=60))
@settings(max_examples=100, deadline=None)
def test_quantile_median_matches_statistics(values: list[float]) -> None:
    hist = Counter(values)
    assert quantile(hist, 0.5) == pytest.approx(statistics.median(values), abs=1e-9)
    assert quantile(hist, 0.0) == min(values)
    assert quantile(hist, 1.0) == max(values)


@given(st.lists(two_decimals, min_size=2, max_size=60), st.sampled_from([2, 4, 10, 20, 100]))
@settings(max_examples=100, deadline=None)
def test_quantile_matches_statistics_quantiles_inclusive(values: list[float], n: int) -> None:
    hist = Counter(values)
    reference = statistics.quantiles(values, n=n, method="inclusive")
    for i, expected in enumerate(reference, 1):
        assert quantile(hist, i / n) == pytest.approx(expected, abs=1e-9), (i, n)


def test_quantile_by_hand() -> None:
    assert quantile({}, 0.5) is None
    assert quantile({5.0: 1}, 0.95) == 5.0
    assert quantile({1.0: 1, 2.0: 1, 3.0: 1, 4.0: 1}, 0.5) == 2.5
    # numpy: np.percentile([1, 2, 3, 4, 100], 95) == 80.8
    assert quantile({1.0: 1, 2.0: 1, 3.0: 1, 4.0: 1, 100.0: 1}, 0.95) == pytest.approx(80.8)
    # repeated values: [7, 7, 7, 9]
    assert quantile({9.0: 1, 7.0: 3}, 0.5) == 7.0
    assert quantile({9.0: 1, 7.0: 3}, 0.9) == pytest.approx(8.4)


def assert_rounded(got: float | None, reference: float) -> None:
    """``got`` is ``reference`` rounded to 4 decimals (to 1e-9).

    When the exact value sits on a rounding tie (e.g. a mean of exactly 0.27625 = 4.42 / 16),
    its binary float may lie on either side of the tie, so either neighbour is accepted there:
    float noise, not an aggregation error.
    """
    assert got is not None
    expected = round(reference, 4)
    if abs(got - expected) <= 1e-9:
        return
    scaled = reference * 1e4
    assert abs(scaled - math.floor(scaled) - 0.5) < 1e-6, (got, reference)
    assert abs(got - reference) <= 0.5e-4 + 1e-9, (got, reference)


@given(st.lists(two_decimals, min_size=1, max_size=80))
@settings(max_examples=100, deadline=None)
def test_stats_match_statistics(values: list[float]) -> None:
    s = Stats()
    for v in values:
        s.add(v)
    d = s.to_dict()
    assert d["n"] == len(values)
    assert_rounded(d["mean"], statistics.fmean(values))
    assert_rounded(d["std"], statistics.pstdev(values))
    assert_rounded(d["median"], statistics.median(values))
    assert d["min"] == min(values)
    assert d["max"] == max(values)


def test_stats_round_inputs_to_two_decimals() -> None:
    s = Stats()
    for v in (7.123, 7.126, 8.0):
        s.add(v)
    d = s.to_dict()
    assert d["min"] == 7.12 and d["max"] == 8.0 and d["median"] == 7.13
    assert d["mean"] == pytest.approx(round((7.12 + 7.13 + 8.0) / 3, 4))


def test_empty_stats() -> None:
    assert Stats().to_dict() == {
        "n": 0,
        "mean": None,
        "ci95": None,
        "median": None,
        "std": None,
        "min": None,
        "max": None,
    }


# -- run summary: counts, pass rates, stats, by model ---------------------------------------------

RUN_RESULTS = [
    res(0, 9.0, scores={"accuracy": 9.0, "clarity": 8.0}, model="a", flags=["ceiling_applied"]),
    res(1, 8.0, scores={"accuracy": 8.0, "clarity": 7.0}, model="a"),
    res(2, 7.0, scores={"accuracy": 7.0, "clarity": 6.0}, model="a"),
    res(3, 7.5, scores={"accuracy": 7.5, "clarity": 9.0}, model="a"),
    res(4, 7.0, scores={"accuracy": 6.0, "clarity": 8.0}, model="b"),
    res(5, 6.9, scores={"accuracy": 6.9, "clarity": 5.0}, model="b", passed=False),
    res(6, 5.0, scores={"accuracy": 5.0, "clarity": 5.0}, model="b"),
    res(7, 3.0, scores={"accuracy": 3.0, "clarity": 2.0}, model=None),
    res(8, None, null_reason="timeout", model="a"),
    res(9, None, null_reason="parse_error", model="b", flags=["ceiling_applied"]),
]


def test_pass_rates_use_all_jobs_and_count_nulls_as_not_passed() -> None:
    rep = aggregate(RUN_RESULTS, dimensions=("accuracy", "clarity"))
    assert rep["counts"] == {
        "total": 10,
        "graded": 8,
        "null": 2,
        "null_by_reason": {"parse_error": 1, "timeout": 1},
    }
    assert rep["coverage"] == 80.0
    # overall >= 8: 9, 8 -> 2/10; >= 7: 9, 8, 7, 7.5, 7 -> 5/10; >= 6.5: + 6.9 -> 6/10
    assert rep["pass_rates"] == {"8.0": 20.0, "7.0": 50.0, "6.5": 60.0}
    assert rep["pass_rate"] == 50.0  # passed flags: 5 of 10 jobs
    assert rep["flags"] == {"ceiling_applied": 2}


def test_overall_and_dimension_stats_over_graded_only() -> None:
    rep = aggregate(RUN_RESULTS, dimensions=("accuracy", "clarity", "unused"))
    overall = [9.0, 8.0, 7.0, 7.5, 7.0, 6.9, 5.0, 3.0]
    low, high = scipy.stats.t.interval(0.95, 7, loc=statistics.mean(overall), scale=scipy.stats.sem(overall))
    assert rep["overall"] == {
        "n": 8,
        "mean": 6.675,
        "ci95": [round(low, 4), round(high, 4)],
        "median": 7.0,
        "std": round(statistics.pstdev(overall), 4),
        "min": 3.0,
        "max": 9.0,
    }
    accuracy = [9.0, 8.0, 7.0, 7.5, 6.0, 6.9, 5.0, 3.0]
    clarity = [8.0, 7.0, 6.0, 9.0, 8.0, 5.0, 5.0, 2.0]
    assert rep["dimensions"]["accuracy"]["n"] == 8
    assert rep["dimensions"]["accuracy"]["mean"] == round(statistics.fmean(accuracy), 4)
    assert rep["dimensions"]["accuracy"]["median"] == 6.95
    assert rep["dimensions"]["clarity"]["mean"] == round(statistics.fmean(clarity), 4)
    assert rep["dimensions"]["clarity"]["median"] == 6.5
    assert rep["dimensions"]["clarity"]["std"] == round(statistics.pstdev(clarity), 4)
    assert rep["dimensions"]["unused"] == Stats().to_dict()
    assert list(rep["dimensions"]) == ["accuracy", "clarity", "unused"]


def test_by_model_split() -> None:
    rep = aggregate(RUN_RESULTS, dimensions=("accuracy",))
    assert list(rep["by_model"]) == ["a", "b"]  # the result without a model is in no group
    a, b = rep["by_model"]["a"], rep["by_model"]["b"]
    assert a["counts"] == {"total": 5, "graded": 4, "null": 1, "null_by_reason": {"timeout": 1}}
    assert b["counts"] == {"total": 4, "graded": 3, "null": 1, "null_by_reason": {"parse_error": 1}}
    assert a["overall"]["mean"] == round((9.0 + 8.0 + 7.0 + 7.5) / 4, 4)
    assert b["overall"]["mean"] == round((7.0 + 6.9 + 5.0) / 3, 4)
    assert a["pass_rate"] == 80.0  # 4 of 5
    assert b["pass_rate"] == 25.0  # 1 of 4
    assert a["pass_rates"] == {"8.0": 40.0, "7.0": 80.0, "6.5": 80.0}
    assert b["pass_rates"] == {"8.0": 0.0, "7.0": 25.0, "6.5": 50.0}
    assert a["coverage"] == 80.0 and b["coverage"] == 75.0
    assert b["flags"] == {"ceiling_applied": 1}
    assert "retrieval" not in a and "retrieval" not in rep


def test_pass_fail_has_no_threshold_pass_rates() -> None:
    results = [res(0, 1.0, passed=True), res(1, 0.0, passed=False), res(2, None), res(3, 1.0, passed=True)]
    rep = aggregate(results, pass_fail=True)
    assert "pass_rates" not in rep
    assert rep["pass_rate"] == 50.0
    assert rep["coverage"] == 75.0


def test_thresholds_are_deduplicated_and_sorted() -> None:
    rep = aggregate([res(0, 6.0), res(1, 9.0)], thresholds=[5.0, 8.0, 5.0])
    assert rep["pass_rates"] == {"8.0": 50.0, "5.0": 100.0}


# -- latency and usage ----------------------------------------------------------------------------


def test_latency_percentiles_over_jobs_that_reached_the_judge() -> None:
    results = [
        res(0, 8.0, grading_latency_ms=100.4, attempts=1),
        res(1, 8.0, grading_latency_ms=200.6, attempts=1),
        res(2, None, grading_latency_ms=300.2, attempts=3),  # null, but the judge was called
        res(3, 8.0, grading_latency_ms=399.5, attempts=1),
        res(4, 8.0, grading_latency_ms=1000.0, attempts=2),
        res(5, None, null_reason="lost", grading_latency_ms=0.0, attempts=0),  # never reached the judge
    ]
    rep = aggregate(results)
    # latencies rounded to ms: [100, 201, 300, 400, 1000]
    assert rep["latency_ms"]["p50"] == 300.0
    assert rep["latency_ms"]["p95"] == pytest.approx(880.0)  # 400 + 0.8 * (1000 - 400)
    assert rep["latency_ms"]["max"] == 1000
    assert rep["usage"]["judge_calls"] == 8


def test_usage_tokens_and_estimated_cost() -> None:
    model = "claude-opus-4-5-20251101"
    p = PRICES["claude-opus-4-5"]
    results = [
        res(0, 8.0, attempts=1, input_tokens=1000, output_tokens=200, cache_read_input_tokens=0),
        res(1, 8.0, attempts=1, input_tokens=2000, output_tokens=400, cache_read_input_tokens=1000),
        res(2, None, attempts=1),
    ]
    rep = aggregate(results, judge_model=model)
    use = rep["usage"]
    assert use["input_tokens"] == 3000
    assert use["output_tokens"] == 600
    assert use["cache_read_input_tokens"] == 1000
    assert use["judge_calls"] == 3
    # the Messages API's convention: input_tokens are uncached; cache reads are billed apart
    expected = (3000 * p["input"] + 1000 * p["cache_read"] + 600 * p["output"]) / 1e6
    assert use["estimated_cost_usd"] == pytest.approx(expected, abs=1e-9)
    assert expected == pytest.approx(0.0305)  # 3000 x 5 + 1000 x 0.5 + 600 x 25, per million


def test_estimated_cost_with_api_usage_semantics() -> None:
    # API usage of one call: 100 uncached input tokens + 2000 read from the cache, 50 output
    p = PRICES["claude-sonnet-4-5"]
    results = [res(0, 8.0, attempts=1, input_tokens=100, cache_read_input_tokens=2000, output_tokens=50)]
    rep = aggregate(results, judge_model="claude-sonnet-4-5-20250929")
    expected = (100 * p["input"] + 2000 * p["cache_read"] + 50 * p["output"]) / 1e6
    assert rep["usage"]["estimated_cost_usd"] == pytest.approx(expected, abs=1e-9)


def test_prices_match_an_id_exactly_or_by_the_alias_table() -> None:
    prices = shipped_prices()
    assert not any(k.startswith("_") for k in prices.entries)
    # dated ids use their family's prices through the explicit alias table
    assert price_for("claude-sonnet-4-5-20250929") is prices.entries["claude-sonnet-4-5"]
    assert price_for("claude-sonnet-4-20250514") is prices.entries["claude-sonnet-4"]
    opus45 = price_for("claude-opus-4-5-20251101")
    assert opus45 is not None and (opus45.input, opus45.output, opus45.cache_read) == (5.0, 25.0, 0.5)
    assert (opus45.cache_write, opus45.batch_discount, opus45.min_cache_tokens) == (6.25, 0.5, 4096)
    assert price_for("claude-opus-4-1-20250805") == price_for("claude-opus-4-1")
    assert price_for("claude-opus-4-20250514") == price_for("claude-opus-4")
    assert price_for("claude-3-5-haiku-latest") == price_for("claude-3-5-haiku")
    assert price_for("claude-haiku-4-5") is not None
    assert price_for("claude-haiku-4-5").model_dump() == PRICES["claude-haiku-4-5"]  # type: ignore[union-attr]
    # OpenAI's models (issue 21): dated snapshots by alias, a snapshot of its own price kept apart
    assert price_for("gpt-4o-2024-08-06") is prices.entries["gpt-4o"]
    assert price_for("gpt-4o-2024-05-13") is not None and price_for("gpt-4o-2024-05-13").input == 5.0  # type: ignore[union-attr]
    assert price_for("gpt-4.1-mini-2025-04-14") is prices.entries["gpt-4.1-mini"]
    assert price_for("gpt-4.1-mini-2099-01-01") is None  # never by prefix
    assert price_for("gpt-3.5-turbo") is None
    assert price_for("scripted") is None
    assert price_for("") is None
    assert estimate_cost("gpt-3.5-turbo", 1000, 1000) is None
    assert estimate_cost("gpt-4.1", 1_000_000, 1_000_000) == pytest.approx(10.0)
    assert estimate_cost("claude-sonnet-4-5-20250929", 1_000_000, 1_000_000) == pytest.approx(18.0)
    assert estimate_cost("claude-opus-4-5-20251101", 1_000_000, 0) == pytest.approx(5.0)
    assert estimate_cost("lexical-overlap-v1", 10**6, 10**6) == 0.0


def test_reply_cache_savings_are_priced_at_the_runs_lane_and_each_judges_model() -> None:
    sonnet, haiku = "claude-sonnet-4-5", "claude-haiku-4-5"
    hit = {"cached": True, "input_tokens": 1_000_000, "output_tokens": 0}
    live = aggregate([res(0, 8.0, **hit)], lane="live", judge_model=sonnet)["usage"]["reply_cache"]
    batch = aggregate([res(0, 8.0, **hit)], lane="batch", judge_model=sonnet)["usage"]["reply_cache"]
    assert live["saved_usd"] == pytest.approx(PRICES[sonnet]["input"])  # $3 a million
    off = PRICES[sonnet]["batch_discount"]
    assert batch["saved_usd"] == pytest.approx(PRICES[sonnet]["input"] * (1 - off))
    # a council's cached job: each judge's tokens at its own price (old: all at the first's)
    usage = {sonnet: [1_000_000, 0, 0, 0], haiku: [1_000_000, 0, 0, 0]}
    council = {**hit, "input_tokens": 2_000_000, "judge_usage": usage, "judge_scores": {sonnet: 8, haiku: 8}}
    saved = aggregate([res(0, 8.0, **council)], judges=[sonnet, haiku])["usage"]["reply_cache"]
    assert saved["saved_usd"] == pytest.approx(PRICES[sonnet]["input"] + PRICES[haiku]["input"])
    assert saved["saved_input_tokens"] == 2_000_000


def test_unknown_model_has_no_cost() -> None:
    rep = aggregate([res(0, 8.0, attempts=1, input_tokens=10, output_tokens=10)], judge_model="gpt-3.5-turbo")
    assert rep["usage"]["estimated_cost_usd"] is None
    assert rep["usage"]["input_tokens"] == 10


# -- retrieval ------------------------------------------------------------------------------------


def question(index: int, *, rank: int | None, grade: int | None, total: float | None, **kw: Any) -> Result:
    return res(
        index,
        None if grade is None else float(grade),
        kind="question",
        question_id=f"q{index}",
        rank=rank,
        needle_found=rank is not None,
        llm_grade=grade,
        total_score=total,
        **kw,
    )


QUESTIONS = [
    question(0, rank=1, grade=9, total=9.0, model="a"),
    question(1, rank=3, grade=8, total=7.6, model="a"),
    question(2, rank=None, grade=7, total=4.2, model="b"),  # needle missing: a miss, rr 0
    question(3, rank=7, grade=None, total=None, null_reason="rate_limited", model="b"),
    question(4, rank=2, grade=6, total=5.7, model="b"),
]


def test_retrieval_stats_by_hand() -> None:
    rep = aggregate(QUESTIONS, hit_k=(1, 3, 5, 10))
    rt = rep["retrieval"]
    assert rt["questions"] == 5
    assert rt["accuracy"] == 80.0
    assert rt["hit_at_1_rate"] == 20.0
    assert rt["hit_at_5_rate"] == 60.0
    assert rt["hit_at_k_rates"] == {"1": 20.0, "3": 60.0, "5": 60.0, "10": 80.0}
    assert rt["mrr"] == round((1 + 1 / 3 + 0 + 1 / 7 + 1 / 2) / 5, 6)
    assert rt["avg_llm_grade"] == 7.5  # over the 4 non-null grades
    assert rt["avg_total_score"] == round((9.0 + 7.6 + 4.2 + 5.7) / 4, 4)
    assert rt["pass_rate_8"] == 20.0
    assert rt["pass_rate_7"] == 40.0
    assert rt["pass_rate_6_5"] == 40.0
    assert rt["null"] == 1
    assert rt["coverage"] == 80.0
    # per model, moved under retrieval.by_model
    assert set(rt["by_model"]) == {"a", "b"}
    assert rt["by_model"]["a"]["mrr"] == round((1 + 1 / 3) / 2, 6)
    assert rt["by_model"]["b"]["accuracy"] == pytest.approx(200 / 3, abs=0.01)
    assert rt["by_model"]["b"]["avg_llm_grade"] == 6.5
    assert rep["by_model"]["b"]["retrieval"] == rt["by_model"]["b"]


def test_retrieval_hit_k_without_1_and_5_still_reports_them() -> None:
    rep = aggregate(QUESTIONS, hit_k=(3,))
    rt = rep["retrieval"]
    assert rt["hit_at_k_rates"] == {"3": 60.0}
    assert rt["hit_at_1_rate"] == 20.0
    assert rt["hit_at_5_rate"] == 60.0


def test_retrieval_all_null_grades() -> None:
    qs = [question(i, rank=None, grade=None, total=None) for i in range(3)]
    rt = aggregate(qs)["retrieval"]
    assert rt["questions"] == 3
    assert rt["accuracy"] == 0.0
    assert rt["mrr"] == 0.0
    assert rt["avg_llm_grade"] is None
    assert rt["avg_total_score"] is None
    assert rt["pass_rate_8"] == rt["pass_rate_7"] == rt["pass_rate_6_5"] == 0.0
    assert rt["null"] == 3
    assert rt["coverage"] == 0.0


def test_empty_retrieval_stats() -> None:
    d = RetrievalStats((1, 3)).to_dict()
    assert d["questions"] == 0
    assert d["mrr"] is None and d["accuracy"] is None and d["avg_llm_grade"] is None
    assert d["hit_at_k_rates"] == {"1": None, "3": None}
    assert d["pass_rate_8"] is None and d["coverage"] is None


# -- empty and all-null runs -----------------------------------------------------------------------


def test_empty_aggregator() -> None:
    rep = Aggregator(dimensions=("accuracy",)).report(judge_model="claude-sonnet-4-5")
    assert rep["counts"] == {"total": 0, "graded": 0, "null": 0, "null_by_reason": {}}
    assert rep["coverage"] is None
    assert rep["pass_rate"] is None
    assert rep["pass_rates"] == {"8.0": None, "7.0": None, "6.5": None}
    assert rep["overall"] == Stats().to_dict()
    assert rep["dimensions"] == {"accuracy": Stats().to_dict()}
    assert rep["latency_ms"] == {"p50": None, "p95": None, "max": None}
    assert rep["usage"]["estimated_cost_usd"] == 0.0
    assert rep["usage"]["judge_calls"] == 0
    assert "by_model" not in rep and "retrieval" not in rep


def test_all_null_run() -> None:
    rep = aggregate([res(i, None, null_reason="rate_limited", attempts=1) for i in range(4)])
    assert rep["counts"]["null_by_reason"] == {"rate_limited": 4}
    assert rep["coverage"] == 0.0
    assert rep["pass_rate"] == 0.0
    assert rep["pass_rates"] == {"8.0": 0.0, "7.0": 0.0, "6.5": 0.0}
    assert rep["overall"]["n"] == 0 and rep["overall"]["mean"] is None


# -- report rendering ------------------------------------------------------------------------------


def spec_for(rubric: str, total: int, **kw: Any) -> RunSpec:
    text, source = read_rubric_text(rubric)
    return RunSpec(
        run_id=f"r-{rubric}",
        rubric_text=text,
        rubric_source=source,
        judge_provider="anthropic",
        judge_model=kw.pop("judge_model", "claude-sonnet-4-5-20250929"),
        total=total,
        **kw,
    )


def render(spec: RunSpec, results: list[Result], missing: int = 0) -> tuple[dict[str, Any], str]:
    agg = new_aggregator(spec)
    for r in results:
        agg.add(r)
    report = build_report(
        spec,
        agg,
        started_at="2026-01-01T00:00:00.000Z",
        finished_at="2026-01-01T00:01:00.000Z",
        wall_s=60.0,
        missing=missing,
    )
    json.dumps(report)  # JSON-serializable
    md = render_markdown(report)
    assert md.startswith(f"# judgeq report: {spec.run_id}\n")
    return report, md


def test_render_pass_fail_run() -> None:
    spec = spec_for(
        "helpfulness",
        4,
        rejected_count=1,
        rejected=[{"line": 3, "field": "output", "reason": "missing"}],
    )
    results = [
        res(0, 1.0, passed=True, attempts=1, input_tokens=500, output_tokens=50, grading_latency_ms=800),
        res(1, 0.0, passed=False, attempts=1, input_tokens=500, output_tokens=50, grading_latency_ms=900),
        res(2, None, null_reason="refusal", attempts=1),
        res(3, 1.0, passed=True, attempts=2, model="m", flags=["safety_failed"]),
    ]
    report, md = render(spec, results)
    assert "pass_rates" not in report
    assert report["pass_rate"] == 50.0
    assert report["counts"]["rejected"] == 1
    assert wilson(2, 4) == [15.0, 85.0]
    assert "Pass rate: **50.0% (15.0-85.0)**" in md
    assert "| refusal | 1 |" in md
    assert "## Rejected input lines (1)" in md
    assert "## By model" in md


def test_render_numeric_run() -> None:
    spec = spec_for("quality", 11)
    report, md = render(spec, RUN_RESULTS, missing=1)
    assert report["counts"]["missing"] == 1
    assert report["pass_rates"]["7.0"] == 50.0
    assert report["usage"]["estimated_cost_usd"] == 0.0
    low, high = report["pass_rates_ci95"]["7.0"]
    ci = f"({low:.1f}-{high:.1f})"
    assert f"| ≥ 7.0 | 50.0% {ci} |" in md
    assert f"| rubric threshold (7.0) | 50.0% {ci} |" in md
    assert "| accuracy |" in md and "| clarity |" in md
    assert "$0.0000" in md


def test_render_retrieval_run() -> None:
    spec = spec_for("retrieval-relevance", len(QUESTIONS))
    report, md = render(spec, QUESTIONS)
    assert report["retrieval"]["hit_at_k_rates"] == {"1": 20.0, "3": 60.0, "5": 60.0, "10": 80.0}
    assert "## Retrieval" in md
    assert "| mrr |" in md
    assert wilson(4, 5) == [37.55, 96.38]
    assert "| hit@10 | 80.0% (37.5-96.4) |" in md


def test_render_zero_graded_run() -> None:
    spec = spec_for("quality", 3, judge_model="some-unpriced-model")
    report, md = render(spec, [res(i, None, null_reason="auth_error", attempts=1) for i in range(3)])
    assert report["overall"]["mean"] is None
    assert report["usage"]["estimated_cost_usd"] is None
    assert "estimated cost unknown (no price for 'some-unpriced-model': add it to a prices file" in md
    assert report["usage"]["unpriced_models"] == ["some-unpriced-model"]
    assert "None" not in md and "nan" not in md
    assert "| **overall** | 0 | – | – | – | – | – |" in md
    # and a run with no jobs at all
    report, md = render(spec_for("quality", 0), [])
    assert report["coverage"] is None
    assert "| 0 | 0 | 0 | 0 | – |" in md


def test_stats_of_many_equal_values() -> None:
    # sum-of-squares variance: many equal values must still give a std of exactly 0
    s = Stats()
    for _ in range(10_000):
        s.add(9.99)
    d = s.to_dict()
    assert d["std"] == 0.0
    assert d["mean"] == 9.99
    assert not math.isnan(d["std"])


def test_cost_breakdown_parts_add_up_and_the_batch_lane_halves() -> None:
    from judgeq.report.aggregate import cost_breakdown

    live = cost_breakdown("claude-sonnet-4-5", 1_000_000, 100_000, cache_read=2_000_000, cache_write=10_000)
    assert live == {
        "input": 3.0,
        "output": 1.5,
        "cache_read": 0.6,
        "cache_write": 0.0375,
        "batch_discount": 0.0,
        "total": 5.1375,
    }
    batch = cost_breakdown(
        "claude-sonnet-4-5", 1_000_000, 100_000, cache_read=2_000_000, cache_write=10_000, batch=True
    )
    assert batch is not None and batch["batch_discount"] == -2.56875 and batch["total"] == 2.56875
    assert cost_breakdown("unknown-model", 1, 1) is None


def test_the_report_says_when_the_rubric_prefix_is_too_short_for_prompt_caching() -> None:
    # the quality rubric's system prompt is ~2,000 tokens: enough for Sonnet (1,024), not for
    # Haiku 4.5 or Opus 4.5 (4,096: judgeq/data/prices.json)
    sonnet, _ = render(spec_for("quality", 1, judge_model="claude-sonnet-4-5"), [res(0, 8.0)])
    assert sonnet["usage"]["prompt_cache"]["below_minimum"] is False
    assert sonnet["usage"]["prompt_cache"]["note"] is None
    haiku, md = render(spec_for("quality", 1, judge_model="claude-haiku-4-5"), [res(0, 8.0)])
    note = haiku["usage"]["prompt_cache"]
    assert note["below_minimum"] is True and note["min_cacheable_tokens"] == 4096
    assert "below claude-haiku-4-5's minimum cacheable length (4,096)" in note["note"]
    assert note["note"] in md
    # a council: every judge's model is checked, not only the first's
    council = spec_for("quality", 1, judge_model="claude-sonnet-4-5", council=["anthropic:claude-opus-4-5"])
    report, _ = render(council, [res(0, 8.0)])
    note = report["usage"]["prompt_cache"]
    assert note["below_minimum"] is True and "claude-opus-4-5" in note["note"]
    assert set(note["by_judge"]) == {"claude-sonnet-4-5", "claude-opus-4-5"}


def test_a_council_answered_by_the_reply_cache_counts_each_judges_call_and_keeps_by_judge() -> None:
    # (issue 29: a council of 2 whose replies came from the cache reported 30 hits for its 60
    # calls, and no usage.by_judge at all)
    council = spec_for("quality", 2, judge_model="claude-sonnet-4-5", council=["anthropic:claude-haiku-4-5"])
    usage = {"claude-sonnet-4-5": [1000, 50, 0, 0], "claude-haiku-4-5": [900, 40, 0, 0]}
    cached = [
        res(i, 8.0, cached=True, judge_usage=usage, input_tokens=1900, output_tokens=90) for i in (0, 1)
    ]
    report, _ = render(council, cached)
    assert report["usage"]["reply_cache"]["hits"] == 4  # 2 jobs x 2 judges
    by_judge = report["usage"]["by_judge"]
    assert set(by_judge) == {"claude-sonnet-4-5", "claude-haiku-4-5"}
    assert (
        by_judge["claude-haiku-4-5"]["input_tokens"] == 0
        and by_judge["claude-haiku-4-5"]["saved_input_tokens"] == 1800
    )
    assert by_judge["claude-sonnet-4-5"]["saved_output_tokens"] == 100


def test_the_report_warns_when_most_verdicts_fell_back_to_the_holistic_score() -> None:
    # (issue 29: through a gateway that rewrote the schema, 600 of 600 verdicts were holistic
    # fallbacks, per-dimension scores identical, with nothing saying so)
    from judgeq.report.html import render_html
    from judgeq.report.markdown import render_markdown

    spec = spec_for("quality", 4, judge_model="claude-sonnet-4-5")
    served = [{"provider": "anthropic", "endpoint": "gw:4000", "model": "claude-sonnet-4-5",
               "response_format": "json_schema", "calls": 4}]  # fmt: skip

    def report_of(fallbacks: int, how: str = "json_schema") -> dict[str, Any]:
        agg = new_aggregator(spec)
        for i in range(4):
            agg.add(res(i, 6.0, flags=["holistic_fallback"] if i < fallbacks else []))
        kw = {"started_at": "2026-01-01T00:00:00Z", "finished_at": "2026-01-01T00:01:00Z", "wall_s": 1.0}
        return build_report(spec, agg, served=[{**served[0], "response_format": how}], **kw)

    report = report_of(3)
    (warning,) = report["warnings"]
    assert warning.startswith("3 of 4 verdicts fell back to the holistic score")
    assert (
        "anthropic:claude-sonnet-4-5 at gw:4000 was asked for a structured verdict (json_schema)" in warning
    )
    assert f"> **Warning**: {warning}" in render_markdown(report)
    assert "Warning: 3 of 4 verdicts fell back" in render_html(report, [])
    assert "warnings" not in report_of(2)  # half: no warning
    assert "warnings" not in report_of(4, "text")  # free text asked for: a fallback is no surprise

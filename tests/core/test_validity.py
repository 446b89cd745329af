"""Agreement with labels, councils of judges and intervals: each figure checked against the
reference library computed here directly (scikit-learn, scipy, krippendorff) or by hand."""

from __future__ import annotations

import json
import math
from typing import Any

import krippendorff
import numpy as np
import pytest
import scipy.stats
from sklearn.metrics import cohen_kappa_score, confusion_matrix

import judgeq
from judgeq.figures.stats import wilson
from judgeq.grading.request import JudgeRequest
from judgeq.grading.result import Result
from judgeq.jobs.kinds import make_result
from judgeq.jobs.models import ResponseJob
from judgeq.judges.base import RetryPolicy
from judgeq.pipeline.job import GradingContext, grade_job
from judgeq.report.aggregate import Aggregator
from judgeq.report.markdown import render_markdown
from judgeq.testing.mock_messages import verdict_for_schema

QUALITY = judgeq.load_rubric("quality")


def graded(i: int, overall: float, *, label: Any = None, model: str = "m", **kw: Any) -> Result:
    return make_result(
        job_id=f"j{i}",
        index=i,
        status="graded",
        overall=overall,
        passed=overall >= 7.0,
        label=label,
        model=model,
        rubric_name="quality",
        rubric_version="1.0.0",
        judge_model="j",
        **kw,
    )


def null(i: int, *, label: Any = None, reason: str = "timeout") -> Result:
    return make_result(
        job_id=f"j{i}",
        index=i,
        status="null",
        null_reason=reason,
        label=label,
        rubric_name="quality",
        rubric_version="1.0.0",
        judge_model="j",
    )


def report(results: list[Result], **agg: Any) -> dict[str, Any]:
    a = Aggregator(**{"lo": 1, "hi": 10, "threshold": 7.0, **agg})
    for r in results:
        a.add(r)
    return a.report(judge_model="j")


LABELS = [9, 8, 3, 7, 2, 10, 5, 6, 8, 4]
SCORES = [8.5, 7.0, 4.0, 6.5, 2.0, 9.0, 7.5, 5.0, 8.0, 3.0]


def test_numeric_agreement_matches_scipy_and_sklearn() -> None:
    results = [graded(i, s, label=float(y)) for i, (y, s) in enumerate(zip(LABELS, SCORES, strict=True))]
    results.append(null(99, label=5.0, reason="parse_error"))  # counted beside, never scored
    results.append(graded(100, 6.0))  # no label: not in the section
    ag = report(results)["agreement"]
    assert (ag["labelled"], ag["graded"], ag["nulls"]) == (11, 10, 1)
    assert ag["null_by_reason"] == {"parse_error": 1}
    num = ag["numeric"]
    assert num["n"] == 10
    assert num["spearman"] == pytest.approx(scipy.stats.spearmanr(LABELS, SCORES).statistic, abs=1e-4)
    assert num["kendall_tau"] == pytest.approx(scipy.stats.kendalltau(LABELS, SCORES).statistic, abs=1e-4)
    rounded = [math.floor(s + 0.5) for s in SCORES]
    qwk = cohen_kappa_score(LABELS, rounded, labels=list(range(1, 11)), weights="quadratic")
    assert num["qwk"] == pytest.approx(qwk, abs=1e-4)
    errors = np.abs(np.array(LABELS) - np.array(SCORES))
    assert num["mae"] == pytest.approx(np.mean(errors), abs=1e-4)
    t = scipy.stats.t.interval(0.95, len(errors) - 1, loc=errors.mean(), scale=scipy.stats.sem(errors))
    assert num["mae_ci95"] == pytest.approx(list(t), abs=1e-4)
    # numeric labels at or above the threshold count as pass, against the judge's pass
    pf = ag["pass_fail"]
    y_true = ["pass" if y >= 7 else "fail" for y in LABELS]
    y_pred = ["pass" if s >= 7 else "fail" for s in SCORES]
    assert pf["kappa"] == pytest.approx(cohen_kappa_score(y_true, y_pred), abs=1e-4)
    assert pf["accuracy"] == pytest.approx(100 * np.mean(np.array(y_true) == np.array(y_pred)), abs=0.01)
    matrix = confusion_matrix(y_true, y_pred, labels=["pass", "fail"])
    assert [[pf["confusion"][a][b] for b in ("pass", "fail")] for a in ("pass", "fail")] == matrix.tolist()


def test_pass_fail_labels_on_a_pass_fail_rubric() -> None:
    rows = [("pass", True), ("pass", True), ("fail", False), ("fail", True), ("pass", False), ("fail", False)]
    results = [
        graded(i, 1.0 if said else 0.0, label=label).model_copy(update={"passed": said})
        for i, (label, said) in enumerate(rows)
    ]
    ag = report(results, pass_fail=True, lo=0, hi=1, threshold=None)["agreement"]
    assert "numeric" not in ag
    y_true = [label for label, _ in rows]
    y_pred = ["pass" if said else "fail" for _, said in rows]
    assert ag["pass_fail"]["kappa"] == pytest.approx(cohen_kappa_score(y_true, y_pred), abs=1e-4)
    assert ag["pass_fail"]["accuracy"] == pytest.approx(66.67)


def test_pair_accuracy_ties_half_and_ties_excluded() -> None:
    rows = [("a", "a"), ("b", "b"), ("a", "b"), ("a", "tie"), ("tie", "b"), ("tie", "tie")]
    results = [
        make_result(
            job_id=f"p{i}",
            index=i,
            kind="pair",
            status="graded",
            overall={"a": 1.0, "tie": 0.5, "b": 0.0}[said],
            winner=said,  # type: ignore[arg-type]
            votes=["A", "B"],
            label=label,
            model="x",
            model_b="y",
            rubric_name="pairwise",
            rubric_version="1.0.0",
            judge_model="j",
        )
        for i, (label, said) in enumerate(rows)
    ]
    pairs = report(results, scale="pairwise")["agreement"]["pairs"]
    # ties half: 1 + 1 + 0 + 0.5 + 0.5 + 1 = 4 of 6; ties excluded: 2 of 3
    assert pairs["accuracy_ties_half"] == pytest.approx(66.67)
    # its interval: Wilson with a half-right job as half a success, always within 0-100
    assert pairs["accuracy_ties_half_ci95"] == wilson(4, 6)
    near_top = [("a", "a")] * 19 + [("a", "tie")]  # 19.5 of 20
    results_top = [
        make_result(job_id=f"t{i}", index=i, kind="pair", status="graded",
                    overall=0.5 if said == "tie" else 1.0, winner=said, votes=["A", "B"], label=label,
                    model="x", model_b="y", rubric_name="pairwise", rubric_version="1.0.0", judge_model="j")
        for i, (label, said) in enumerate(near_top)
    ]  # fmt: skip
    top = report(results_top, scale="pairwise")["agreement"]["pairs"]
    assert top["accuracy_ties_half"] == 97.5 and top["accuracy_ties_half_ci95"][1] <= 100.0
    assert pairs["accuracy_ties_excluded"] == pytest.approx(66.67) and pairs["ties_excluded_n"] == 3
    y_true, y_pred = zip(*rows, strict=True)
    assert pairs["kappa"] == pytest.approx(
        cohen_kappa_score(y_true, y_pred, labels=["a", "b", "tie"]), abs=1e-4
    )


def test_intervals_wilson_and_t_against_the_formulas() -> None:
    # Wilson by hand for 7 of 10: (p + z²/2n ± z sqrt(p(1-p)/n + z²/4n²)) / (1 + z²/n)
    z, n, p = scipy.stats.norm.ppf(0.975), 10, 0.7
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    assert wilson(7, 10) == [round(100 * (centre - half), 2), round(100 * (centre + half), 2)]
    assert wilson(0, 0) is None
    # fractional successes (a tie is half a win) use the same closed form, which matches
    # scipy's Wilson interval wherever scipy can compute it (whole counts)
    from judgeq.figures.stats import wilson_bounds

    for k, m in ((0, 5), (3, 7), (7, 10), (40, 40), (123, 400)):
        ci = scipy.stats.binomtest(k, m).proportion_ci(0.95, method="wilson")
        assert wilson_bounds(k / m, m) == pytest.approx((ci.low, ci.high), abs=1e-9)
    assert wilson(7.5, 15) == [27.42, 72.58]
    rep = report([graded(i, s) for i, s in enumerate(SCORES)])
    low, high = scipy.stats.t.interval(0.95, 9, loc=np.mean(SCORES), scale=scipy.stats.sem(SCORES))
    assert rep["overall"]["ci95"] == [round(low, 4), round(high, 4)]
    passed = sum(s >= 7 for s in SCORES)
    assert rep["pass_rate_ci95"] == wilson(passed, 10)
    assert rep["pass_rates_ci95"]["7.0"] == wilson(passed, 10)


def test_models_on_the_same_inputs_get_a_paired_test() -> None:
    results = []
    for i in range(12):
        key = f"in{i}"
        results.append(graded(2 * i, 5.0 + (i % 3), model="old", input_key=key))
        results.append(graded(2 * i + 1, 6.0 + (i % 3) + (0.5 if i % 2 else 0), model="new", input_key=key))
    results.append(graded(99, 9.0, model="new", input_key="only-new"))  # no partner: not paired
    # the same model twice on one input: the mean of its two scores pairs (not the last one)
    results.append(graded(100, 4.0, model="old", input_key="in0"))
    results.append(graded(101, 6.0, model="old", input_key="in0"))
    (row,) = report(results)["by_model_paired"]
    diffs = [1.0 + (0.5 if i % 2 else 0) for i in range(12)]
    assert (row["model"], row["vs"], row["n"]) == ("new", "old", 12)
    assert row["mean_diff"] == pytest.approx(-np.mean(diffs))  # old - new
    assert row["p_value"] == pytest.approx(scipy.stats.wilcoxon([-d for d in diffs]).pvalue, abs=1e-6)


def test_markdown_prints_values_with_their_intervals() -> None:
    rep = report([graded(i, s) for i, s in enumerate(SCORES)])
    rep.update(
        run_id="r",
        batch="b",
        rubric={"name": "quality", "version": "1", "scale": "1-10", "source": "s", "pass_threshold": 7.0},
        judge={"provider": "p", "model": "m"},
        started_at="s",
        finished_at="f",
        wall_s=1.0,
    )
    rep["counts"]["rejected"] = 0
    md = render_markdown(rep)
    assert (rep["overall"]["mean"], rep["overall"]["ci95"]) == (6.05, [4.3186, 7.7814])
    assert "| **overall** | 10 | 6.05 (4.32-7.78) |" in md  # two decimals, as people read them
    # a negative bound is not a dash: "-0.09 (-0.89 to 0.71)"
    from judgeq.figures.formatting import fmt_ci as _ci
    from judgeq.figures.formatting import fmt_p as _p

    assert _ci(-0.0863, [-0.8862, 0.7137]) == "-0.09 (-0.89 to 0.71)"
    assert _ci(75.0, [50.5, 90.0], "%") == "75.0% (50.5-90.0)"
    assert (_p(0.0), _p(0.0312), _p(None)) == ("< 0.001", "0.031", "–")


class ScaleJudge:
    """A judge that gives every job the same score (``fail``: raises)."""

    provider = "test"

    def __init__(self, model: str, score: int, *, fail: bool = False) -> None:
        self.model, self.score, self.fail = model, score, fail
        self.calls = 0

    def complete(self, request: JudgeRequest, *, timeout: float) -> judgeq.JudgeReply:
        self.calls += 1
        if self.fail:
            raise judgeq.JudgeInvalidRequest("400 prompt too long")
        text = json.dumps(verdict_for_schema(request.output_schema, self.score))
        return judgeq.JudgeReply(text=text, input_tokens=100, output_tokens=10)


JOB = ResponseJob(id="r1", input="q", output="a", model="sys")


def council(*judges: ScaleJudge, **kw: Any) -> GradingContext:
    first, *rest = judges
    return GradingContext(rubric=QUALITY, judge=first, council=tuple((j, None) for j in rest), **kw)


def test_a_council_grades_each_job_once_with_every_judge() -> None:
    a, b = ScaleJudge("claude-a", 8), ScaleJudge("claude-b", 4)
    result = grade_job(council(a, b), JOB, 0)
    assert (a.calls, b.calls) == (1, 1)
    assert result.status == "graded" and result.judge_scores is not None
    assert result.overall == pytest.approx(
        (result.judge_scores["claude-a"] + result.judge_scores["claude-b"]) / 2
    )
    assert "judges_disagree" in result.flags  # 8 vs 4 (capped by the ceiling rules) spread > 2.7
    assert result.judge_usage == {"claude-a": [100, 10, 0, 0], "claude-b": [100, 10, 0, 0]}
    agree = grade_job(council(ScaleJudge("claude-a", 8), ScaleJudge("claude-b", 8)), JOB, 1)
    assert "judges_disagree" not in agree.flags and agree.overall == 8.0


def test_a_council_member_failing_makes_the_job_null_naming_it() -> None:
    a, b = ScaleJudge("claude-a", 8), ScaleJudge("claude-b", 8, fail=True)
    result = grade_job(council(a, b, policy=RetryPolicy(max_attempts=1)), JOB, 0)
    assert result.status == "null" and result.null_reason == "invalid_request"
    assert (result.raw or "").startswith("judge claude-b: ")


def council_result(i: int, scores: dict[str, float], model: str = "m") -> Result:
    return graded(i, sum(scores.values()) / len(scores), judge_scores=scores, model=model)


def test_council_alpha_matches_krippendorff_and_z_combines_per_judge() -> None:
    a = [8, 7, 3, 9, 5, 6, 2, 8]
    b = [7, 7, 4, 9, 4, 7, 1, 6]
    results = [
        council_result(i, {"ja": float(x), "jb": float(y)}, model="m1" if i % 2 else "m2")
        for i, (x, y) in enumerate(zip(a, b, strict=True))
    ]
    co = report(results, judges=["ja", "jb"], council_mode="z")["council"]
    expected = krippendorff.alpha(
        reliability_data=[a, b], level_of_measurement="ordinal", value_domain=sorted(set(a + b))
    )
    assert co["krippendorff_alpha"] == pytest.approx(expected, abs=1e-4)
    za = (np.array(a) - np.mean(a)) / np.std(a, ddof=1)
    zb = (np.array(b) - np.mean(b)) / np.std(b, ddof=1)
    z = (za + zb) / 2
    assert co["combined"]["method"] == "z"
    assert co["combined"]["by_model"]["m1"]["mean"] == pytest.approx(np.mean(z[1::2]), abs=1e-4)
    assert co["per_judge"]["ja"]["mean"] == pytest.approx(np.mean(a))
    t = scipy.stats.t.interval(0.95, len(z) - 1, loc=z.mean(), scale=scipy.stats.sem(z))
    assert co["combined"]["ci95"] == pytest.approx(list(t), abs=1e-4)


def test_council_alpha_on_pass_fail_is_nominal_as_krippendorff_computes_it() -> None:
    a = [1, 1, 0, 1, 0, 0, 1, 1, 0, 1]
    b = [1, 0, 0, 1, 0, 1, 1, 1, 0, 1]
    results = [
        council_result(i, {"ja": float(x), "jb": float(y)}).model_copy(update={"passed": x + y >= 1})
        for i, (x, y) in enumerate(zip(a, b, strict=True))
    ]
    co = report(results, judges=["ja", "jb"], pass_fail=True, lo=0, hi=1, threshold=None)["council"]
    assert co["alpha_level"] == "nominal"
    expected = krippendorff.alpha(reliability_data=[a, b], level_of_measurement="nominal")
    assert co["krippendorff_alpha"] == pytest.approx(expected, abs=1e-4)


def test_a_councils_live_cost_prices_each_judge_at_its_own_price() -> None:
    from judgeq.report.aggregate import cost_breakdown
    from judgeq.store.base import result_cost

    r = graded(
        0,
        8.0,
        input_tokens=2000,
        output_tokens=200,
        judge_usage={"claude-haiku-4-5": [1000, 100, 0, 0], "claude-opus-4-1": [1000, 100, 0, 0]},
    )
    expected = sum(cost_breakdown(m, 1000, 100)["total"] for m in ("claude-haiku-4-5", "claude-opus-4-1"))  # type: ignore[index]
    assert result_cost(r) == pytest.approx(expected)
    agg = Aggregator(judges=["claude-haiku-4-5", "claude-opus-4-1"])
    agg.add(r.model_copy(update={"judge_scores": {"claude-haiku-4-5": 8.0, "claude-opus-4-1": 8.0}}))
    assert agg.report(judge_model="claude-haiku-4-5")["usage"]["cost_usd"]["total"] == pytest.approx(expected)

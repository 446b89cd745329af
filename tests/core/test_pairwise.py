"""Pair jobs: both orders, a flip is a tie, one job counted once; the pairwise report figures on
hand-derived results; the Bradley-Terry fit."""

from __future__ import annotations

import json
from typing import Any

import pytest

import judgeq
from judgeq.figures.stats import bradley_terry, bradley_terry_leaderboard
from judgeq.grading.request import JudgeRequest
from judgeq.grading.result import Result
from judgeq.jobs.kinds import make_result
from judgeq.jobs.models import PairJob
from judgeq.judges.base import RetryPolicy
from judgeq.pipeline.job import GradingContext, grade_job
from judgeq.report.aggregate import Aggregator
from judgeq.rubric.model import parse_rubric

PAIRWISE = judgeq.load_rubric("pairwise")
WITH_DIMS = parse_rubric(
    "---\nname: pw\nversion: 1.0.0\nscale: pairwise\ndescription: d\n"
    "dimensions:\n  - name: accuracy\n  - name: style\n---\nCompare.\n",
    "test",
)


class PositionalJudge:
    """Answers from what it sees: ``prefer`` picks the output (by its text) it thinks better,
    whatever the order; ``first`` always picks the output shown first (a position-biased judge)."""

    provider = "test"
    model = "positional"

    def __init__(
        self,
        *,
        prefer: str | None = None,
        first: bool = False,
        fail_on: int | None = None,
        garbage_on: int = 0,
    ) -> None:
        self.prefer, self.first, self.fail_on, self.garbage_on = prefer, first, fail_on, garbage_on
        self.calls: list[dict[str, Any]] = []

    def complete(self, request: JudgeRequest, *, timeout: float) -> judgeq.JudgeReply:
        self.calls.append(dict(request.fields))
        if self.fail_on is not None and len(self.calls) == self.fail_on:
            raise judgeq.JudgeOverloaded("529 overloaded")
        if len(self.calls) == self.garbage_on:
            return judgeq.JudgeReply(text="Both have merit; hard to say.", input_tokens=10, output_tokens=5)
        shown_a = request.fields["output_a"]
        if self.first:
            verdict = "A"
        elif self.prefer is None:
            verdict = "tie"
        else:
            verdict = "A" if shown_a == self.prefer else "B"
        body = {"reasoning": "because", "verdict": verdict}
        for name in request.output_schema["properties"]:
            if name not in body:
                body[name] = verdict
        return judgeq.JudgeReply(text=json.dumps(body), input_tokens=10, output_tokens=5)


JOB = PairJob(id="p1", input="2+2?", output_a="4", output_b="5", model_a="good", model_b="bad", label="a")


def test_a_pair_is_judged_in_both_orders_and_counted_once() -> None:
    judge = PositionalJudge(prefer="4")
    result = grade_job(GradingContext(rubric=PAIRWISE, judge=judge), JOB, 0)
    assert [c["output_a"] for c in judge.calls] == ["4", "5"], "second call shows B first"
    assert result.status == "graded" and result.winner == "a" and result.overall == 1.0
    assert result.votes == ["A", "B"] and "position_inconsistent" not in result.flags
    assert (result.model, result.model_b, result.kind, result.label) == ("good", "bad", "pair", "a")
    assert result.attempts == 2 and result.input_tokens == 20


def test_a_verdict_that_flips_with_the_order_is_a_flagged_tie() -> None:
    result = grade_job(GradingContext(rubric=PAIRWISE, judge=PositionalJudge(first=True)), JOB, 0)
    assert result.winner == "tie" and result.overall == 0.5
    assert result.votes == ["A", "A"] and "position_inconsistent" in result.flags


def test_no_swap_judges_once() -> None:
    judge = PositionalJudge(first=True)
    result = grade_job(GradingContext(rubric=PAIRWISE, judge=judge, swap=False), JOB, 0)
    assert len(judge.calls) == 1 and result.winner == "a" and result.flags == []


@pytest.mark.parametrize("fail_on", [1, 2])
def test_either_call_failing_makes_the_pair_null_with_its_reason(fail_on: int) -> None:
    judge = PositionalJudge(prefer="4", fail_on=fail_on)
    ctx = GradingContext(rubric=PAIRWISE, judge=judge, policy=RetryPolicy(max_attempts=1))
    result = grade_job(ctx, JOB, 0)
    assert result.status == "null" and result.null_reason == "overloaded"
    assert result.winner is None and result.model_b == "bad" and result.kind == "pair"
    assert len(judge.calls) == fail_on, "after a failed call, the job's other call is not made"


@pytest.mark.parametrize("garbage_on", [1, 2])
def test_either_reply_unparseable_makes_the_pair_a_parse_error_null(garbage_on: int) -> None:
    judge = PositionalJudge(prefer="4", garbage_on=garbage_on)
    result = grade_job(GradingContext(rubric=PAIRWISE, judge=judge), JOB, 0)
    assert result.status == "null" and result.null_reason == "parse_error"
    assert result.winner is None and result.votes is None and result.kind == "pair"
    assert "hard to say" in (result.raw or "")


def test_dimension_verdicts_are_mapped_back_and_scored_for_output_a() -> None:
    result = grade_job(GradingContext(rubric=WITH_DIMS, judge=PositionalJudge(prefer="5")), JOB, 0)
    assert result.winner == "b" and result.scores == {"accuracy": 0.0, "style": 0.0}


def pair(
    i: int,
    a: str,
    b: str,
    winner: str | None,
    *,
    votes: tuple[str, ...] = ("A", "B"),
    len_a: int = 10,
    len_b: int = 10,
    flags: tuple[str, ...] = (),
) -> Result:
    graded = winner is not None
    return make_result(
        job_id=f"p{i}",
        index=i,
        kind="pair",
        status="graded" if graded else "null",
        null_reason=None if graded else "timeout",
        overall={"a": 1.0, "tie": 0.5, "b": 0.0}[winner] if winner else None,
        winner=winner,  # type: ignore[arg-type]
        votes=list(votes) if graded else None,
        model=a,
        model_b=b,
        len_a=len_a,
        len_b=len_b,
        flags=list(flags),
        rubric_name="pairwise",
        rubric_version="1.0.0",
        judge_model="j",
    )


def aggregate(results: list[Result]) -> dict[str, Any]:
    agg = Aggregator(scale="pairwise", pass_fail=False, judges=["j"])
    for r in results:
        agg.add(r)
    return agg.report(judge_model="j")["pairwise"]


def test_pairwise_figures_by_hand() -> None:
    results = [
        pair(0, "x", "y", "a", len_a=50, len_b=10),  # x wins, longer wins
        pair(1, "y", "x", "b", len_a=10, len_b=50),  # x wins (as B), longer wins
        pair(2, "x", "y", "tie", votes=("A", "A"), flags=("position_inconsistent",)),
        pair(3, "x", "y", "b", votes=("B", "A"), len_a=50, len_b=10),  # y wins, shorter wins
        pair(4, "x", "y", None),  # a null: counted beside, not in any rate
    ]
    pw = aggregate(results)
    assert pw["graded"] == 4 and pw["nulls"] == 1
    (row,) = pw["pairs"]
    assert (row["model"], row["opponent"], row["wins"], row["ties"], row["losses"]) == ("x", "y", 2, 1, 1)
    assert row["win_rate"] == 62.5  # (2 + 0.5) / 4
    assert row["win_rate_excluding_ties"] == pytest.approx(66.67)
    # x longer: pairs 0, 1, 3 -> outcomes 1, 1, 0; x shorter: none -> not controllable
    assert row["win_rate_length_controlled"] is None
    # 3 of 4 (judge, pair) verdicts kept under the swap; pair 2 flipped
    assert pw["position_consistency"] == 75.0 and pw["position_consistency_n"] == 4
    # decisive calls: A,B, A,B, A,A, B,A = 8 decisive, 5 chose the first shown
    assert pw["first_position_preference"] == 62.5 and pw["first_position_preference_n"] == 8
    # decisive pairs of unequal length: 0 (longer won), 1 (longer won), 3 (shorter won)
    assert pw["longer_output_wins"] == pytest.approx(66.67) and pw["longer_output_wins_n"] == 3
    assert "leaderboard" not in pw, "two models: no leaderboard"
    low, high = row["win_rate_ci95"]
    assert low < 62.5 < high


def test_length_controlled_win_rate_averages_the_two_strata() -> None:
    results = [
        pair(0, "x", "y", "a", len_a=50, len_b=10),
        pair(1, "x", "y", "a", len_a=50, len_b=10),
        pair(2, "x", "y", "b", len_a=5, len_b=10),
        pair(3, "x", "y", "tie", len_a=5, len_b=10),
    ]
    (row,) = aggregate(results)["pairs"]
    assert row["win_rate_length_controlled"] == 62.5  # (100% longer + 25% shorter) / 2
    # its interval: the two strata's variances (longer: 1, 1 -> 0; shorter: 0, 0.5 -> 0.125)
    half = 1.959964 * (0.125 / 2) ** 0.5 / 2 * 100
    assert row["win_rate_length_controlled_ci95"] == pytest.approx([62.5 - half, 62.5 + half], abs=0.01)
    # kept within 0-100 where the normal interval would pass them (old: up to 108%)
    from judgeq.figures.stats import strata_mean_interval

    assert strata_mean_interval([(2, 200.0, 20000.0), (3, 250.0, 22500.0)])[1] <= 100.0


def test_the_win_rate_interval_is_centred_on_the_win_rate_with_ties_as_halves() -> None:
    # 1 win, 13 ties, 1 loss of 15: a win rate of 50%, so its interval is symmetric around 50
    # (old: Wilson of round(7.5) = 8 wins, 30.12-75.19)
    results = [pair(0, "x", "y", "a"), pair(1, "x", "y", "b")]
    results += [pair(i, "x", "y", "tie", votes=("tie", "tie")) for i in range(2, 15)]
    (row,) = aggregate(results)["pairs"]
    low, high = row["win_rate_ci95"]
    assert row["win_rate"] == 50.0 and low == pytest.approx(100 - high, abs=0.01)
    assert [low, high] == pytest.approx([27.42, 72.58], abs=0.01)


def test_three_models_give_a_leaderboard_in_the_order_of_their_wins() -> None:
    results = []
    beats = [("a", "b", 8, 2), ("b", "c", 7, 3), ("a", "c", 9, 1)]
    i = 0
    for w, loser, n_w, n_l in beats:
        for _ in range(n_w):
            results.append(pair(i, w, loser, "a"))
            i += 1
        for _ in range(n_l):
            results.append(pair(i, w, loser, "b"))
            i += 1
    board = aggregate(results)["leaderboard"]
    assert [row["model"] for row in board] == ["a", "b", "c"]
    for row in board:
        low, high = row["ci95"]
        assert low <= row["rating"] <= high


def test_bradley_terry_is_the_maximum_likelihood_fit() -> None:
    counts = {("a", "b"): (30.0, 10.0), ("b", "c"): (20.0, 20.0), ("a", "c"): (35.0, 15.0)}
    p = bradley_terry(counts)
    # at the maximum of the likelihood (with the prior of one tie per pair), every model's
    # expected wins equal its wins
    games = {k: w + lost + 1.0 for k, (w, lost) in counts.items()}
    wins = {m: 0.5 * 2 for m in "abc"}
    for (i, j), (w, lost) in counts.items():
        wins[i] += w
        wins[j] += lost
    for m in "abc":
        expected = sum(
            n * p[m] / (p[m] + p[o]) for (x, y), n in games.items() if m in (x, y) for o in {x, y} - {m}
        )
        assert expected == pytest.approx(wins[m], rel=1e-6)
    board = bradley_terry_leaderboard({k: (int(w), 0, int(lost)) for k, (w, lost) in counts.items()})
    assert board[0]["model"] == "a"


def test_a_model_against_itself_is_kept_out_of_win_rates_and_ratings() -> None:
    results = [pair(i, w, lost, "a") for i, (w, lost) in enumerate([("x", "y"), ("y", "z"), ("x", "z")] * 3)]
    base = {row["model"]: row["rating"] for row in aggregate(results)["leaderboard"]}
    more = results + [pair(100 + i, "x", "x", "a") for i in range(50)]
    pw = aggregate(more)
    assert pw["same_model_pairs"] == 50 and all(p["model"] != p["opponent"] for p in pw["pairs"])
    assert {row["model"]: row["rating"] for row in pw["leaderboard"]} == base

"""Juries (issue 31, point 4): a council with stated rules. A category is the one more than half
of the whole panel gave, members that gave no verdict counted in the panel (an odd panel with
one failure never becomes an even one decided by order); no majority is a null or, for a pair,
a tie, as the run chose; scores are the median or the mean of the members that answered, when
more than half did. Enumerated as a matrix of panels: every vote pattern of three members over
each scale's categories, with absent members."""

from __future__ import annotations

import itertools
import json
import os
from collections import Counter
from pathlib import Path

import pytest

import judgeq
from judgeq.grading.request import JudgeRequest
from judgeq.jobs.grade import Jury, majority
from judgeq.jobs.models import PairJob, ResponseJob
from judgeq.judges.base import RetryPolicy
from judgeq.pipeline.job import GradingContext, grade_job
from judgeq.testing.mock_messages import verdict_for_schema

QUALITY = judgeq.load_rubric("quality")
PASS_FAIL = judgeq.load_rubric("groundedness")
PAIRWISE = judgeq.load_rubric("pairwise")
ABSENT = "absent"


class Member:
    """A jury member that answers every call with ``say``: a score, ``pass``/``fail``, a pair's
    ``A``/``B``/``tie`` (for output A as shown first: the same verdict in both orders is
    mapped back), or ``absent``: a reply that is no verdict (a parse error)."""

    provider = "test"

    def __init__(self, model: str, say: str | int) -> None:
        self.model, self.say = model, say

    def complete(self, request: JudgeRequest, *, timeout: float) -> judgeq.JudgeReply:
        if self.say == ABSENT:
            return judgeq.JudgeReply(text="I would rather not say.", input_tokens=10, output_tokens=5)
        say = self.say
        if say in ("A", "B") and request.fields.get("output_a") != "4":  # shown swapped
            say = {"A": "B", "B": "A"}[str(say)]
        return judgeq.JudgeReply(
            text=json.dumps(verdict_for_schema(request.output_schema, say)), input_tokens=10
        )


def panel(rubric: judgeq.Rubric, says: tuple[str | int, ...], jury: Jury | None) -> GradingContext:
    first, *rest = [Member(f"m{i}", s) for i, s in enumerate(says)]
    return GradingContext(rubric=rubric, judge=first, council=tuple((m, None) for m in rest), jury=jury)


RESPONSE = ResponseJob(id="r1", input="q", output="a", context="c", model="sys")
PAIR = PairJob(id="p1", input="2+2?", output_a="4", output_b="5", model_a="good", model_b="bad")


def expected_vote(says: tuple[str, ...], panel_size: int) -> str | None:
    counts = Counter(s for s in says if s != ABSENT).most_common(1)
    return counts[0][0] if counts and counts[0][1] * 2 > panel_size else None


@pytest.mark.parametrize("says", list(itertools.product(["pass", "fail", ABSENT], repeat=3)))
def test_pass_fail_is_the_strict_majority_of_the_whole_panel(says: tuple[str, ...]) -> None:
    result = grade_job(panel(PASS_FAIL, says, Jury()), RESPONSE, 0)
    vote = expected_vote(says, 3)
    absent = {f"m{i}" for i, s in enumerate(says) if s == ABSENT}
    if vote is None:
        assert (result.status, result.null_reason) == ("null", "no_majority")
        assert "majority of the panel of 3" in str(result.raw)
    else:
        assert result.status == "graded" and result.passed is (vote == "pass")
    assert set(result.judges_absent or {}) == absent  # shown, with why
    assert all(why == "parse_error" for why in (result.judges_absent or {}).values())


@pytest.mark.parametrize("says", list(itertools.product(["A", "B", "tie", ABSENT], repeat=3)))
@pytest.mark.parametrize("no_majority", ["null", "tie"])
def test_a_pairs_winner_is_the_strict_majority_never_the_order(
    says: tuple[str, ...], no_majority: str
) -> None:
    result = grade_job(panel(PAIRWISE, says, Jury(no_majority=no_majority)), PAIR, 0)  # type: ignore[arg-type]
    vote = expected_vote(says, 3)
    if vote is None and (
        no_majority == "null" or set(says) == {ABSENT}
    ):  # none answered: never a made-up tie
        assert (result.status, result.null_reason) == ("null", "no_majority")
        return
    assert result.status == "graded"
    winner = {"A": "a", "B": "b", "tie": "tie", None: "tie"}[vote]
    assert result.verdict() == winner
    assert result.overall == {"a": 1.0, "b": 0.0, "tie": 0.5}[winner]
    # the same panel in another order gives the same verdict (never decided by order)
    turned = grade_job(panel(PAIRWISE, says[::-1], Jury(no_majority=no_majority)), PAIR, 0)  # type: ignore[arg-type]
    assert turned.verdict() == result.verdict()


@pytest.mark.parametrize(
    ("says", "rule", "overall"),
    [
        ((2, 9, 10), "median", 9.0),
        ((2, 9, 10), "mean", 7.0),
        ((2, ABSENT, 10), "median", 6.0),  # two of three answered: more than half
        ((2, ABSENT, ABSENT), "median", None),  # one of three: no majority of the panel
        ((ABSENT, ABSENT, ABSENT), "mean", None),
    ],
)
def test_scores_are_the_median_or_mean_of_a_majority_that_answered(
    says: tuple[int | str, ...], rule: str, overall: float | None
) -> None:
    result = grade_job(panel(QUALITY, says, Jury(scores=rule)), RESPONSE, 0)  # type: ignore[arg-type]
    if overall is None:
        assert (result.status, result.null_reason) == ("null", "no_majority")
    else:
        assert result.status == "graded" and result.overall == overall
        assert set(result.judge_scores or {}) == {f"m{i}" for i, s in enumerate(says) if s != ABSENT}


def test_a_council_without_jury_rules_is_unchanged() -> None:
    """A plain council: any member's failure nulls the job; pass/fail by share of its answers."""
    result = grade_job(panel(PASS_FAIL, ("pass", "pass", ABSENT), None), RESPONSE, 0)
    assert (result.status, result.null_reason) == ("null", "parse_error") and result.judges_absent is None
    even = grade_job(panel(PASS_FAIL, ("pass", "fail"), None), RESPONSE, 0)
    assert even.status == "graded" and even.passed is False  # 0.5 is not more than half


def test_an_outage_is_never_an_absence() -> None:
    """A member whose judge did not answer (down, rate-limited, its key refused) holds the job as
    any judge's failure does: an outage never decides a verdict."""

    class Down(Member):
        def complete(self, request: JudgeRequest, *, timeout: float) -> judgeq.JudgeReply:
            raise judgeq.JudgeOverloaded("529 overloaded")

    ctx = panel(PASS_FAIL, ("pass", "pass"), Jury())
    ctx.council = (*ctx.council, (Down("down", "pass"), None))
    ctx.policy = RetryPolicy(timeout=1, deadline=5, max_attempts=1)
    result = grade_job(ctx, RESPONSE, 0)
    assert (result.status, result.null_reason) == ("null", "overloaded")


def test_majority_counts_the_absent_in_the_panel() -> None:
    assert majority(["a", "a"], 3) == "a"  # 2 of 3
    assert majority(["a", "b"], 3) is None
    assert majority(["a", "a"], 4) is None  # 2 of 4 is not more than half
    assert majority([], 1) is None


def test_a_three_family_jury_grades_a_run_through_the_cli(tmp_path: Path) -> None:
    """Anthropic, OpenAI and Gemini on one panel, each through its SDK against its stand-in:
    the run states the jury's rules, each member's figures (its mean, how often it agreed with
    the jury and with the labels) and who served each call."""
    import subprocess
    import sys

    from judgeq.testing.fake_anthropic import FakeMessagesAPI
    from judgeq.testing.fake_gemini import FakeGeminiAPI
    from judgeq.testing.fake_openai import FakeChatAPI

    jobs = tmp_path / "jobs.jsonl"
    with jobs.open("w") as f:
        for i in range(20):
            parity = "even" if i % 2 == 0 else "odd"
            line = {"id": f"j{i}", "input": f"Is {i} even?", "context": f"{i} is {parity}.",
                    "output": f"{i} is even.", "label": "pass" if i % 2 == 0 else "fail"}  # fmt: skip
            f.write(json.dumps(line) + "\n")
    with (
        FakeMessagesAPI(api_key="ka", models=("claude-jury",)) as claude,
        FakeChatAPI(api_key="ko", models=("gpt-jury",)) as gpt,
        FakeGeminiAPI(api_keys=("kg",), models=("gemini-2.5-flash",)) as gemini,
    ):
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("ANTHROPIC_", "JUDGEQ_", "OPENAI_", "GOOGLE_", "GEMINI_"))
        }
        env.update(
            HOME=str(tmp_path), JUDGEQ_RESULTS_DIR=str(tmp_path / "r"),
            ANTHROPIC_API_KEY="ka", ANTHROPIC_BASE_URL=claude.base_url,
            OPENAI_API_KEY="ko", OPENAI_BASE_URL=gpt.base_url + "/v1",
            GEMINI_API_KEY="kg", GOOGLE_GEMINI_BASE_URL=gemini.base_url,
        )  # fmt: skip
        proc = subprocess.run(
            [sys.executable, "-m", "judgeq", "run", str(jobs), "--rubric", "groundedness", "--run-id", "jury",
             "--judge", "anthropic:claude-jury", "--judge", "openai:gpt-jury",
             "--judge", "gemini:gemini-2.5-flash", "--jury", "median"],
            capture_output=True, text=True, env=env, timeout=240,
        )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    report = json.loads((tmp_path / "r" / "jury" / "report.json").read_text())
    council = report["council"]
    assert report["judge"]["council_mode"] == "jury-median" and council["combined"]["method"] == "jury-median"
    assert set(council["per_judge"]) == {"claude-jury", "gpt-jury", "gemini-2.5-flash"}
    assert {j: v["n"] for j, v in council["with_labels"].items()} == dict.fromkeys(council["per_judge"], 20)
    assert all(0 <= v["rate"] <= 100 for v in council["with_council"].values())
    assert {s["provider"] for s in report["judge"]["served"]} == {"anthropic", "openai", "gemini"}
    md = (tmp_path / "r" / "jury" / "report.md").read_text()
    assert "## Jury of judges (jury-median)" in md and "more than half of the whole panel" in md


@pytest.mark.parametrize(
    ("args", "why"),
    [
        (["--judge", "lexical", "--jury", "median"], "a jury is a panel of judges"),
        (
            [
                "--judge",
                "anthropic:claude-a",
                "--judge",
                "anthropic:claude-b",
                "--jury",
                "mean",
                "--council",
                "z",
            ],
            "--council z",
        ),
        (
            ["--judge", "anthropic:claude-a", "--judge", "anthropic:claude-b", "--no-majority", "tie"],
            "give --jury too",
        ),
    ],
)
def test_a_jury_that_cannot_be_one_is_refused_in_one_line(tmp_path: Path, args: list[str], why: str) -> None:
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    proc = subprocess.run(
        [sys.executable, "-m", "judgeq", "run", str(root / "examples" / "responses.jsonl"),
         "--rubric", "quality", *args],
        capture_output=True, text=True, timeout=120,
        env={**os.environ, "HOME": str(tmp_path), "JUDGEQ_RESULTS_DIR": str(tmp_path)},
    )  # fmt: skip
    lines = [x for x in proc.stderr.splitlines() if x.strip()]
    assert proc.returncode == 2 and len(lines) == 1 and why in lines[0], proc.stderr


def test_a_judge_grading_its_own_familys_outputs_is_warned(tmp_path: Path) -> None:
    """Self-preference: a judge grading outputs its own family made is warned, by the jobs'
    ``model`` (a pair's two systems too), a gateway's model name included."""
    from judgeq.jobs.reader import JobsFileLimits, scan_jobs_file
    from judgeq.judges import parse_judge_spec
    from judgeq.judges.providers import family_of
    from judgeq.producer.plan import self_grading

    assert [family_of(m) for m in ("claude-3-5-sonnet", "openai/gpt-4o", "Gemini-2.5-pro", "llama-3")] == [
        "anthropic",
        "openai",
        "google",
        "",
    ]
    jobs = tmp_path / "jobs.jsonl"
    lines = [
        {"id": "1", "input": "q", "output": "a", "model": "claude-3-5-sonnet"},
        {"id": "2", "input": "q", "output": "a", "model": "gpt-4o"},
        {"id": "3", "input": "q", "output_a": "a", "output_b": "b",
         "model_a": "gemini-2.5-pro", "model_b": "claude-haiku-4-5"},
    ]  # fmt: skip
    jobs.write_text("".join(json.dumps(x) + "\n" for x in lines))
    scan = scan_jobs_file(jobs, "jobs.jsonl", JobsFileLimits(1_000_000, 100_000))
    judges = [
        parse_judge_spec(s) for s in ("anthropic:claude-sonnet-4-5", "gemini:gemini-2.5-flash", "lexical")
    ]
    judges.append(
        parse_judge_spec("openai-compatible:anthropic/claude-3.5-sonnet@https://openrouter.ai/api/v1")
    )
    warned = self_grading(judges, scan)
    assert len(warned) == 3  # the lexical judge has no family
    own = "grades 2 output(s) of its own family (anthropic: claude-3-5-sonnet, claude-haiku-4-5)"
    assert f"anthropic:claude-sonnet-4-5 {own}" in warned[0]
    assert (
        "gemini:gemini-2.5-flash grades 1 output(s) of its own family (google: gemini-2.5-pro)" in warned[1]
    )
    assert "openrouter" in warned[2] and "(anthropic:" in warned[2]

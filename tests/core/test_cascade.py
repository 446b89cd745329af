"""A judge cascade in the pipeline (issue 32, point 1): each stage's judge grades a job
``samples`` times; the first stage whose confidence (the share of its samples agreeing with its
first) reaches its threshold keeps its first sample's verdict; a job no stage keeps is abstained
(a null of its own reason, counted, with what each stage said); a failed call is a failure, never
an abstention. Enumerated as a matrix: every pattern of two stages' samples (pass/fail/no verdict)
against thresholds that keep, escalate and keep nothing."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest

import judgeq
from judgeq.errors import JudgeOverloaded
from judgeq.grading.cascade import CascadeRecord, CascadeSpec, confidence_of, label_verdict
from judgeq.grading.request import JudgeRequest
from judgeq.jobs.models import PairJob, ResponseJob
from judgeq.judges.base import RetryPolicy
from judgeq.pipeline.job import GradingContext, call_count, grade_job, job_calls
from judgeq.store.reply_cache import MemoryCache
from judgeq.testing.mock_messages import verdict_for_schema

PASS_FAIL = judgeq.load_rubric("groundedness")
QUALITY = judgeq.load_rubric("quality")
PAIRWISE = judgeq.load_rubric("pairwise")
NONE = "none"  # a reply that is no verdict


def NO_SLEEP(seconds: float) -> None:
    return None


class Sampler:
    """A judge whose sample ``k`` answers ``says[k]`` (``none``: a reply that does not parse;
    ``down``: the call fails, retryable); it counts its calls."""

    provider = "test"

    def __init__(self, model: str, says: tuple[str | int, ...], tokens: int = 100) -> None:
        self.model, self.says, self.tokens = model, says, tokens
        self.calls: list[int] = []

    def complete(self, request: JudgeRequest, *, timeout: float) -> judgeq.JudgeReply:
        self.calls.append(request.sample)
        say = self.says[request.sample]
        if say == "down":
            raise JudgeOverloaded("the judge is down")
        if say == NONE:
            return judgeq.JudgeReply(
                text="I would rather not say.", input_tokens=self.tokens, output_tokens=5
            )
        if say in ("A", "B") and request.fields.get("output_a") != "4":  # shown swapped
            say = {"A": "B", "B": "A"}[str(say)]
        text = json.dumps(verdict_for_schema(request.output_schema, say))
        return judgeq.JudgeReply(text=text, input_tokens=self.tokens, output_tokens=10)


def cascade_ctx(
    rubric: judgeq.Rubric,
    stages: list[Sampler],
    thresholds: list[float | None],
    cache: MemoryCache | None = None,
) -> GradingContext:
    spec = CascadeSpec(thresholds=thresholds, agreement=0.8, risk=0.1, samples=len(stages[0].says))
    first, *rest = stages
    return GradingContext(
        rubric=rubric, judge=first, council=tuple((s, None) for s in rest), cascade=spec, cache=cache
    )


RESPONSE = ResponseJob(id="r1", input="q", output="a", context="c", model="sys", label="pass")
PAIR = PairJob(id="p1", input="2+2?", output_a="4", output_b="5", model_a="good", model_b="bad", label="a")

PATTERNS = list(itertools.product(["pass", "fail", NONE], repeat=3))


def expected(says: tuple[str, ...]) -> tuple[str | None, float]:
    first = None if says[0] == NONE else says[0]
    return first, (0.0 if first is None else sum(s == first for s in says) / len(says))


@pytest.mark.parametrize("cheap", PATTERNS)
@pytest.mark.parametrize(
    "strong", [("pass", "pass", "pass"), ("fail", "pass", "fail"), (NONE, "pass", "pass")]
)
@pytest.mark.parametrize("thresholds", [[1.0, 0.6], [0.6, 1.0], [None, 0.0], [1.0, 1.0]])
def test_the_first_confident_stage_keeps_else_abstained(
    cheap: tuple[str, ...], strong: tuple[str, ...], thresholds: list[float | None]
) -> None:
    a, b = Sampler("cheap", cheap, tokens=10), Sampler("strong", strong, tokens=1000)
    result = grade_job(cascade_ctx(PASS_FAIL, [a, b], thresholds), RESPONSE, 0)
    verdicts = [expected(cheap), expected(strong)]
    keeper = next(
        (
            s
            for s, ((v, c), t) in enumerate(zip(verdicts, thresholds, strict=True))
            if t is not None and v is not None and c >= t
        ),
        None,
    )
    record = result.cascade
    assert isinstance(record, CascadeRecord)
    asked = 2 if keeper is None else keeper + 1
    assert len(record.stages) == asked and record.stage == keeper
    assert [len(a.calls), len(b.calls)] == [3, 3 if asked == 2 else 0]  # escalated only when needed
    for s, seen in enumerate(record.stages):
        assert (seen.verdict, seen.confidence) == (verdicts[s][0], pytest.approx(verdicts[s][1], abs=1e-4))
        assert seen.threshold == thresholds[s]
    if keeper is None:
        assert (result.status, result.null_reason) == ("null", "abstained")
        assert "no judge of the cascade was confident enough" in str(result.raw)
        assert result.passed is None and result.overall is None  # never a guess
    else:
        assert result.status == "graded"
        assert result.verdict() == verdicts[keeper][0]
        assert result.judge_model == ("cheap", "strong")[keeper]
    # every call made is paid for and counted, per judge
    assert result.input_tokens == 3 * 10 + (3 * 1000 if asked == 2 else 0)
    assert (result.judge_usage or {})["cheap"][0] == 30
    assert record.stages[0].input_tokens == 10  # the first sample's: the judge alone's cost


def test_a_failed_call_is_a_failure_not_an_abstention() -> None:
    a, b = Sampler("cheap", ("pass", "fail", "fail")), Sampler("strong", ("pass", "down", "pass"))
    cache = MemoryCache()
    result = grade_job(cascade_ctx(PASS_FAIL, [a, b], [1.0, 0.5], cache), RESPONSE, 7, sleep=NO_SLEEP)
    assert (result.status, result.null_reason) == ("null", "overloaded")
    assert b.calls.count(1) == RetryPolicy().max_attempts  # retried as any call, then a null
    # the replies paid for are kept for the job's retry (counted once, as its own spend)
    again = Sampler("cheap", ("fail", "fail", "fail"))
    b2 = Sampler("strong", ("pass", "pass", "pass"))
    retried = grade_job(cascade_ctx(PASS_FAIL, [again, b2], [1.0, 0.5], cache), RESPONSE, 7)
    assert again.calls == []  # served from the cache: the cheap stage says what it said
    assert retried.status == "graded" and retried.cascade is not None and retried.cascade.stage == 1


def test_samples_have_their_own_cache_entries_and_sample_zero_is_a_plain_runs() -> None:
    a, b = Sampler("cheap", ("pass", "pass", "fail")), Sampler("strong", ("fail", "fail", "fail"))
    ctx = cascade_ctx(PASS_FAIL, [a, b], [1.0, 1.0], MemoryCache())
    calls = job_calls(ctx, RESPONSE)
    assert call_count(ctx, RESPONSE) == len(calls) == 6
    keys = {ctx.cache_key(c.request, ctx.judges[c.judge][0]) for c in calls}
    assert len(keys) == 6
    plain = GradingContext(rubric=PASS_FAIL, judge=a, cache=MemoryCache())
    assert ctx.cache_key(calls[0].request, a) == plain.cache_key(job_calls(plain, RESPONSE)[0].request, a)
    first = grade_job(ctx, RESPONSE, 0)
    again = grade_job(ctx, RESPONSE, 1)  # every reply from the cache: no call, same verdict
    assert len(a.calls) == 3 and len(b.calls) == 3
    assert again.cached and again.verdict() == first.verdict() == "fail"


def test_pairs_are_graded_in_both_orders_per_sample() -> None:
    a = Sampler("cheap", ("A", "B", "A"))
    b = Sampler("strong", ("A", "A", "A"))
    result = grade_job(cascade_ctx(PAIRWISE, [a, b], [0.9, 0.5]), PAIR, 0)
    assert len(a.calls) == 6  # three samples, two orders each
    assert result.cascade is not None and result.cascade.stage == 1
    assert result.verdict() == "a"
    assert result.cascade.stages[0].confidence == pytest.approx(2 / 3, abs=1e-4)


def test_scored_rubric_confidence_is_over_pass_fail() -> None:
    a = Sampler("cheap", (9, 8, 3))  # pass, pass, fail at the pass threshold 7
    b = Sampler("strong", (2, 2, 2))
    result = grade_job(
        cascade_ctx(QUALITY, [a, b], [0.6, 0.5]), RESPONSE.model_copy(update={"label": 8.0}), 0
    )
    assert result.cascade is not None and result.cascade.stage == 0
    assert result.overall is not None and result.overall >= 8


def test_confidence_and_labels() -> None:
    assert confidence_of([]) == 0.0
    assert confidence_of([None, "pass"]) == 0.0
    assert confidence_of(["a", "a", "tie"]) == pytest.approx(2 / 3)
    assert label_verdict(8.0, 7.0, pairwise=False) == "pass"
    assert label_verdict(6.5, 7.0, pairwise=False) == "fail"
    assert label_verdict(6.5, None, pairwise=False) is None
    assert label_verdict("tie", None, pairwise=True) == "tie"
    assert label_verdict("pass", None, pairwise=True) is None
    assert label_verdict(None, 7.0, pairwise=False) is None


def test_a_cascade_spec_states_its_bounds() -> None:
    with pytest.raises(ValueError, match="two judges or more"):
        CascadeSpec(thresholds=[0.5], agreement=0.8, risk=0.1)
    with pytest.raises(ValueError):
        CascadeSpec(thresholds=[0.5, 0.5], agreement=1.0, risk=0.1)
    with pytest.raises(ValueError):
        CascadeSpec(thresholds=[0.5, 0.5], agreement=0.8, risk=0.1, samples=1)
    assert CascadeSpec(thresholds=[None, None], agreement=0.8, risk=0.1).calibrating


def test_the_python_api_refuses_a_cascade_it_cannot_calibrate(tmp_path: Path) -> None:
    # (its calibration step is the CLI's in this version: never a calibration-only run by mistake)
    with pytest.raises(TypeError, match="unexpected keyword argument 'cascade'"):
        judgeq.grade(
            [{"id": "1", "input": "q", "output": "a"}],
            rubric="quality",
            cascade="lexical,python:x:y",
            out=tmp_path,
        )

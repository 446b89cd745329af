"""process_job / reduce_run / finalize_run over a MemoryStore with a scripted judge."""

from __future__ import annotations

import json
import random
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

import judgeq
from judgeq.grading.request import JudgeRequest
from judgeq.judges.base import RetryPolicy
from judgeq.pipeline import job as _grading
from judgeq.pipeline.stages import (
    Contexts,
    Outcome,
    cancel_run,
    finalize_run,
    process_job,
    reduce_run,
    reduce_unless_final,
)
from judgeq.rubric.model import read_rubric_text
from judgeq.runspec import RunSpec
from judgeq.store.base import MemoryStore
from judgeq.testing.mock_messages import verdict_for_schema

RUN = "run-1"
QUALITY_TEXT, _ = read_rubric_text("quality")


class ScriptedJudge:
    """Answers every request with a valid verdict; the score is taken from the job's output."""

    provider = "test"
    model = "scripted"

    def __init__(self, default: float = 8) -> None:
        self.default = default
        self.calls: Counter[str] = Counter()
        self._lock = threading.Lock()

    def complete(self, request: JudgeRequest, *, timeout: float) -> judgeq.JudgeReply:
        output = str(request.fields.get("output", ""))
        with self._lock:
            self.calls[output] += 1
        score = int(output.split(":")[1]) if output.startswith("score:") else self.default
        return judgeq.JudgeReply(
            text=json.dumps(verdict_for_schema(request.output_schema, score)),
            input_tokens=100,
            output_tokens=20,
        )

    @property
    def total_calls(self) -> int:
        return sum(self.calls.values())


class RateLimitedJudge:
    provider = "test"
    model = "scripted"

    def __init__(self, retry_after: float | None) -> None:
        self.retry_after = retry_after
        self.calls = 0

    def complete(self, request: JudgeRequest, *, timeout: float) -> judgeq.JudgeReply:
        self.calls += 1
        raise judgeq.JudgeRateLimited("429 too many requests", retry_after=self.retry_after)


def make_spec(total: int, **kw: Any) -> RunSpec:
    return RunSpec(
        run_id=RUN,
        rubric_text=QUALITY_TEXT,
        rubric_source="builtin:quality",
        judge_provider="test",
        judge_model="scripted",
        total=total,
        **kw,
    )


def payload(i: int, score: int = 8) -> str:
    return json.dumps({"id": f"j{i}", "input": f"question {i}", "output": f"score:{score}", "model": "m"})


def setup_run(
    n: int, judge: Any, *, put: range | list[int] | None = None, **kw: Any
) -> tuple[MemoryStore, Contexts]:
    store = MemoryStore()
    store.register(make_spec(n, **kw))
    indices = range(n) if put is None else put
    store.put_jobs(RUN, [(i, payload(i, score=3 + i % 7)) for i in indices])
    built: list[tuple[str, str]] = []

    def factory(provider: str, model: str) -> Any:
        built.append((provider, model))
        return judge

    contexts = Contexts(factory)
    contexts.built = built  # type: ignore[attr-defined]
    return store, contexts


def without_times(report: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in report.items() if k not in ("finished_at", "wall_s")}


# -- process_job ------------------------------------------------------------------------------------


def test_each_job_once_stores_and_the_last_completes_the_run() -> None:
    n = 6
    judge = ScriptedJudge()
    store, contexts = setup_run(n, judge)
    outcomes = [process_job(store, contexts, RUN, i) for i in range(n)]
    assert outcomes == [Outcome.STORED] * (n - 1) + [Outcome.LAST]
    assert judge.total_calls == n
    assert contexts.built == [("test", "scripted")]  # type: ignore[attr-defined]
    assert store.counters(RUN)["done"] == n
    assert store.claim_reducer(RUN) is False  # LAST claimed the reducer
    results = list(store.results(RUN, n))
    assert all(r is not None and r.status == "graded" for r in results)
    assert [r.overall for r in results if r] == [float(3 + i % 7) for i in range(n)]
    assert all(store.job(RUN, i) is None for i in range(n))


def test_redelivered_jobs_from_four_threads_give_one_last() -> None:
    n = 60
    judge = ScriptedJudge()
    store, contexts = setup_run(n, judge)
    deliveries = [i for i in range(n) for _ in range(2)]
    random.Random(7).shuffle(deliveries)
    with ThreadPoolExecutor(max_workers=4) as pool:
        outcomes = list(pool.map(lambda i: (i, process_job(store, contexts, RUN, i)), deliveries))
    by_outcome = Counter(o for _, o in outcomes)
    assert by_outcome == {Outcome.STORED: n - 1, Outcome.LAST: 1, Outcome.DUPLICATE: n}
    # every index was stored (STORED or LAST) by exactly one of its two deliveries
    stored = Counter(i for i, o in outcomes if o in (Outcome.STORED, Outcome.LAST))
    assert stored == dict.fromkeys(range(n), 1)
    assert n <= judge.total_calls <= 2 * n
    counters = store.counters(RUN)
    assert counters["done"] == n and counters["graded"] == n
    assert store.missing(RUN, list(range(n))) == []


def test_job_processed_again_after_storing_is_a_duplicate_without_a_judge_call() -> None:
    judge = ScriptedJudge()
    store, contexts = setup_run(3, judge)
    assert process_job(store, contexts, RUN, 1) == Outcome.STORED
    calls = judge.total_calls
    assert process_job(store, contexts, RUN, 1) == Outcome.DUPLICATE
    assert process_job(store, contexts, RUN, 1) == Outcome.DUPLICATE
    assert judge.total_calls == calls == 1
    assert store.counters(RUN)["done"] == 1


def test_unknown_run() -> None:
    judge = ScriptedJudge()
    store, contexts = setup_run(2, judge)
    assert process_job(store, contexts, "no-such-run", 0) == Outcome.UNKNOWN_RUN
    assert judge.total_calls == 0
    assert contexts.built == []  # type: ignore[attr-defined]
    with pytest.raises(LookupError):
        reduce_run(store, "no-such-run")
    with pytest.raises(LookupError):
        finalize_run(store, "no-such-run")


def test_job_without_payload() -> None:
    judge = ScriptedJudge()
    store, contexts = setup_run(3, judge, put=[0, 1])
    assert process_job(store, contexts, RUN, 2) == Outcome.NO_PAYLOAD
    assert judge.total_calls == 0
    assert not store.has_result(RUN, 2)


# -- reduce_run ---------------------------------------------------------------------------------------


def test_reduce_run_is_idempotent() -> None:
    n = 8
    judge = ScriptedJudge()
    store, contexts = setup_run(n, judge)
    store.set_state(RUN, state="running", started_at="2026-01-01T00:00:00.000Z")
    for i in range(n):
        process_job(store, contexts, RUN, i)
    first = reduce_run(store, RUN)
    second = reduce_run(store, RUN)
    assert without_times(first) == without_times(second)
    assert store.report(RUN) == second
    assert first["started_at"] == "2026-01-01T00:00:00.000Z"
    assert first["counts"] == {
        "total": n,
        "graded": n,
        "null": 0,
        "null_by_reason": {},
        "rejected": 0,
    }
    scores = [float(3 + i % 7) for i in range(n)]
    assert first["overall"]["mean"] == round(sum(scores) / n, 4)
    assert first["pass_rates"]["7.0"] == 100.0 * sum(s >= 7 for s in scores) / n
    assert first["usage"]["input_tokens"] == 100 * n
    assert first["usage"]["judge_calls"] == n
    assert list(first["by_model"]) == ["m"]
    assert store.state(RUN)["state"] == "finished"
    assert store.state(RUN)["finished_at"] == second["finished_at"]


def test_reduce_run_with_jobs_missing_is_incomplete() -> None:
    judge = ScriptedJudge()
    store, contexts = setup_run(4, judge)
    for i in (0, 2):
        process_job(store, contexts, RUN, i)
    report = reduce_run(store, RUN)
    # every job stays in the denominators: the two without a result count as null 'lost'
    assert report["counts"]["total"] == 4 and report["counts"]["graded"] == 2
    assert report["counts"]["null_by_reason"] == {"lost": 2}
    assert report["counts"]["missing"] == 2
    assert store.state(RUN)["state"] == "incomplete"


class CountingStore(MemoryStore):
    """A MemoryStore that counts passes over a run's results."""

    def __init__(self) -> None:
        super().__init__()
        self.passes = 0

    def results(self, run_id: str, total: int) -> Any:
        self.passes += 1
        return super().results(run_id, total)


def counting_run(n: int, judge: Any) -> tuple[CountingStore, Contexts]:
    store = CountingStore()
    store.register(make_spec(n))
    store.put_jobs(RUN, [(i, payload(i, score=3 + i % 7)) for i in range(n)])
    return store, Contexts(lambda provider, model: judge)


def test_a_duplicate_reduce_message_skips_a_run_that_has_its_final_report() -> None:
    store, contexts = counting_run(4, ScriptedJudge())
    for i in range(4):
        process_job(store, contexts, RUN, i)
    first = reduce_unless_final(store, RUN)
    assert first is not None and store.passes == 1
    assert store.state(RUN)["state"] == "finished"
    assert reduce_unless_final(store, RUN) is None  # a nudge that came while the reduce ran
    assert store.passes == 1 and store.report(RUN) == first


class SlowCountingStore(CountingStore):
    """Each pass over the results takes a while: duplicates arrive while it goes on."""

    def results(self, run_id: str, total: int) -> Any:
        time.sleep(0.3)
        return super().results(run_id, total)


def test_duplicate_reduce_messages_at_once_make_one_pass_over_the_results() -> None:
    store = SlowCountingStore()
    store.register(make_spec(4))
    store.put_jobs(RUN, [(i, payload(i)) for i in range(4)])
    contexts = Contexts(lambda provider, model: ScriptedJudge())
    for i in range(4):
        process_job(store, contexts, RUN, i)
    with ThreadPoolExecutor(4) as pool:
        reports = list(pool.map(lambda _: reduce_unless_final(store, RUN, poll_s=0.05), range(4)))
    assert store.passes == 1  # the others waited for the first, then found its report
    assert sum(r is not None for r in reports) == 1
    assert store.state(RUN)["state"] == "finished" and store.report(RUN) is not None


def test_a_reducer_that_died_holding_the_run_is_taken_over_when_its_hold_lapses() -> None:
    store, contexts = counting_run(3, ScriptedJudge())
    for i in range(3):
        process_job(store, contexts, RUN, i)
    assert store.claim(RUN, "reducing", 1) is not None  # a reducer that was killed mid-pass
    report = reduce_unless_final(store, RUN, poll_s=0.05)
    assert report is not None and report["counts"]["graded"] == 3 and store.passes == 1


def test_an_incomplete_run_is_reduced_again_and_sees_late_results() -> None:
    store, contexts = counting_run(4, ScriptedJudge())
    for i in (0, 1, 2):
        process_job(store, contexts, RUN, i)
    report = reduce_unless_final(store, RUN)
    assert report is not None and report["counts"]["null_by_reason"] == {"lost": 1}
    assert store.state(RUN)["state"] == "incomplete"
    process_job(store, contexts, RUN, 3)  # a late result (a redelivered message)
    again = reduce_unless_final(store, RUN)
    assert again is not None and again["counts"]["graded"] == 4 and again["counts"]["null"] == 0
    assert store.passes == 2


def test_a_late_reduce_message_does_not_overwrite_a_canceled_runs_partial_report() -> None:
    store, contexts = counting_run(5, ScriptedJudge())
    for i in (0, 1):
        process_job(store, contexts, RUN, i)
    canceled, partial = cancel_run(store, RUN)
    assert canceled == 3 and partial["partial"] is True
    # the canceled nulls completed the run, so its last store sent a reduce message
    assert reduce_unless_final(store, RUN) is None
    assert store.report(RUN) == partial and store.state(RUN)["state"] == "canceled"


# -- finalize_run ---------------------------------------------------------------------------------------


def test_finalize_marks_missing_jobs_lost_once() -> None:
    n = 7
    judge = ScriptedJudge()
    # job 6's payload never arrived (expired): its placeholder is named by index
    store, contexts = setup_run(n, judge, put=list(range(6)))
    for i in (0, 1, 3, 5):
        assert process_job(store, contexts, RUN, i) == Outcome.STORED
    lost, report = finalize_run(store, RUN)
    assert lost == 3
    assert report["counts"]["null_by_reason"] == {"lost": 3}
    assert report["counts"]["total"] == n
    assert report["counts"]["graded"] == 4
    assert report["counts"]["null"] == 3
    assert "missing" not in report["counts"]
    assert report["coverage"] == round(100 * 4 / 7, 2)
    assert report["usage"]["judge_calls"] == 4  # placeholders never reached the judge
    assert store.state(RUN)["state"] == "finished"
    results = list(store.results(RUN, n))
    assert [r.job_id for r in results if r and r.null_reason == "lost"] == ["j2", "j4", "#6"]
    assert all(r is not None for r in results)
    assert store.counters(RUN)["null:lost"] == 3
    assert store.counters(RUN)["done"] == n

    lost2, report2 = finalize_run(store, RUN)
    assert lost2 == 0
    assert without_times(report2) == without_times(report)
    assert store.counters(RUN)["done"] == n
    # and a late delivery of a lost job is a duplicate now
    calls = judge.total_calls
    assert process_job(store, contexts, RUN, 2) == Outcome.DUPLICATE
    assert judge.total_calls == calls


# -- judge failures ---------------------------------------------------------------------------------


class FakeClock:
    """Time that passes only when slept: the retry loop's decisions do not depend on the machine."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def on_fake_clock(monkeypatch: pytest.MonkeyPatch) -> FakeClock:
    """Make grading's retry loop run on a FakeClock (it takes ``clock`` and ``sleep`` arguments)."""
    clock = FakeClock()
    real = _grading.call_with_retries

    def call_with_retries(*args: Any, sleep: Any = None, **kwargs: Any) -> Any:
        assert kwargs.get("budget") is None  # a budget would wait on the real clock
        return real(*args, clock=clock, sleep=clock.sleep, **kwargs)

    monkeypatch.setattr(_grading, "call_with_retries", call_with_retries)
    return clock


@pytest.mark.parametrize("retry_after", [0.05, None])
def test_rate_limited_forever_gives_null_within_the_deadline(
    retry_after: float | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = on_fake_clock(monkeypatch)
    judge = RateLimitedJudge(retry_after)
    store, contexts = setup_run(1, judge, judge_deadline=0.3, judge_timeout=0.2)
    # the judge answers other jobs: this job's 429s are its own (with no one answered, the job
    # is held and the run waits: tests/core/test_nulls_and_holds.py)
    store.set_state(RUN, last_answer_at=repr(store.now()))
    spec = store.spec(RUN)
    assert spec is not None
    assert spec.policy() == RetryPolicy(timeout=0.2, deadline=0.3)
    assert process_job(store, contexts, RUN, 0) == Outcome.LAST
    (result,) = store.results(RUN, 1)
    assert result is not None
    assert result.status == "null"
    assert result.null_reason == "rate_limited"
    assert result.overall is None and result.passed is None
    assert result.attempts == judge.calls >= 1
    if retry_after is not None:
        assert judge.calls >= 3  # retried after 0.05 s until the next attempt would miss the deadline
    assert result.grading_latency_ms == round(clock.now * 1000, 1) <= 300  # within the deadline
    assert store.counters(RUN) == {"null:rate_limited": 1, "done": 1}
    report = reduce_run(store, RUN)
    assert report["counts"]["null_by_reason"] == {"rate_limited": 1}
    assert report["pass_rate"] == 0.0


def test_the_store_failing_during_grading_is_never_a_null() -> None:
    class BrokenCache:
        def get(self, key: str) -> None:
            raise judgeq.StoreError("Redis failed during grading: ConnectionError")

        def put(self, key: str, reply: object) -> None:
            raise AssertionError("not reached")

    judge = ScriptedJudge()
    store, _ = setup_run(2, judge)
    contexts = Contexts(lambda p, m: judge, cache=BrokenCache())  # type: ignore[arg-type]
    with pytest.raises(judgeq.StoreError):
        process_job(store, contexts, RUN, 0)
    assert not store.has_result(RUN, 0), "nothing stored: the message goes back, the job stays pending"

"""Every null counts in its own section; held jobs pause, retry or become nulls.

Over a MemoryStore with scripted judges: the null factory's invariants, a retrieval run whose
internal errors and lost jobs stay questions, a rubric that fails to load on a worker, and a
run that pauses on systemic judge failures and resumes.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest

import judgeq
from judgeq.errors import SYSTEMIC_REASONS, UNAVAILABLE_REASONS, JudgeAuthError, JudgeModelNotFound
from judgeq.grading.request import JudgeRequest
from judgeq.pipeline.holds import ANSWER_FLOOR_S, claim_probe, hold_kind, judge_answering, wait_delay
from judgeq.pipeline.job import null_result
from judgeq.pipeline.stages import Contexts, Held, Outcome, finalize_run, process_job, reduce_run, settle_held
from judgeq.rubric.model import read_rubric_text
from judgeq.runspec import RunSpec
from judgeq.store.base import MemoryStore
from judgeq.store.reply_cache import MemoryCache
from judgeq.testing.mock_messages import verdict_for_schema

EXAMPLES = Path(__file__).parent.parent.parent / "examples"
RUN = "r"


class Judge:
    """Grades with score 8, except: outputs/questions containing 'boom' raise a bug (not a
    JudgeError), and every call raises ``error`` while it is set."""

    provider = "test"
    model = "scripted"

    def __init__(self) -> None:
        self.error: Exception | None = None
        self.calls = 0
        self._lock = threading.Lock()

    def complete(self, request: JudgeRequest, *, timeout: float) -> judgeq.JudgeReply:
        with self._lock:
            self.calls += 1
        if self.error is not None:
            raise self.error
        if "boom" in request.user:
            raise RuntimeError("a bug in grading")
        return judgeq.JudgeReply(text=json.dumps(verdict_for_schema(request.output_schema, 8)))


def retrieval_rows(n: int) -> list[dict[str, Any]]:
    rows = [json.loads(line) for line in (EXAMPLES / "retrieval.jsonl").read_text().splitlines() if line]
    return rows[:n]


def setup(rows: list[dict[str, Any]], rubric: str, judge: Any, **spec: Any) -> tuple[MemoryStore, Contexts]:
    text, source = read_rubric_text(rubric)
    store = MemoryStore()
    store.register(
        RunSpec(
            run_id=RUN,
            rubric_text=text,
            rubric_source=source,
            judge_provider="test",
            judge_model="scripted",
            total=len(rows),
            **spec,
        )
    )
    store.set_state(RUN, state="running", enqueue="done")
    store.put_jobs(RUN, [(i, json.dumps(r)) for i, r in enumerate(rows)])
    return store, Contexts(lambda provider, model: judge)


# -- the null factory --------------------------------------------------------------------------------


@pytest.mark.parametrize("reason", judgeq.NULL_REASONS)
def test_every_null_keeps_kind_id_and_model(reason: str) -> None:
    question = judgeq.QuestionJob.model_validate(retrieval_rows(1)[0])
    response = judgeq.ResponseJob.model_validate({"id": "a", "input": "i", "output": "o", "model": "m2"})
    common = {"rubric_name": "x", "rubric_version": "1.0.0", "judge_model": "j", "why": "because"}
    q = null_result(index=3, reason=reason, job=question, **common)
    assert (q.status, q.null_reason, q.kind, q.job_id, q.model) == (
        "null",
        reason,
        "question",
        "q-001",
        "bm25",
    )
    assert q.rank == 1 and q.needle_found is True and q.llm_grade is None and q.total_score is None
    r = null_result(index=4, reason=reason, job=response, **common)
    assert (r.kind, r.job_id, r.model, r.overall, r.scores) == ("response", "a", "m2", None, {})
    gone = null_result(index=5, reason=reason, job_id="#5", **common)
    assert (gone.kind, gone.job_id, gone.model) == ("response", "#5", None)


def test_null_raw_is_bounded() -> None:
    r = null_result(
        index=0,
        reason="internal_error",
        why="x" * 10_000,
        rubric_name="x",
        rubric_version="1",
        judge_model="j",
    )
    assert r.raw is not None and len(r.raw) == 500


# -- point 1: nulls by every path stay in their section ------------------------------------------------


def test_retrieval_run_with_an_internal_error_and_a_lost_job_counts_every_question() -> None:
    rows = retrieval_rows(4)
    rows[1]["question"] += " boom"  # grading it raises a bug: internal_error
    judge = Judge()
    store, contexts = setup(rows, "retrieval-relevance", judge)
    assert process_job(store, contexts, RUN, 0) is Outcome.STORED
    assert process_job(store, contexts, RUN, 1) is Outcome.STORED  # a null, stored
    assert process_job(store, contexts, RUN, 2) is Outcome.STORED
    lost, report = finalize_run(store, RUN)  # job 3 never ran
    assert lost == 1
    counts, rt = report["counts"], report["retrieval"]
    assert counts == {
        "total": 4,
        "graded": 2,
        "null": 2,
        "null_by_reason": {"internal_error": 1, "lost": 1},
        "rejected": 0,
    }
    assert rt["questions"] == counts["total"] == 4
    assert rt["null"] == 2 and rt["coverage"] == 50.0
    # ranks need no judge: every question keeps its own rank, the rates are over all 4
    ranks = [r.rank for r in store.results(RUN, 4) if r is not None]
    found = sum(r is not None for r in ranks)
    assert rt["accuracy"] == 100.0 * found / 4
    assert rt["mrr"] == pytest.approx(sum(1 / r for r in ranks if r) / 4, abs=1e-6)
    by_model = report["by_model"]
    assert sum(m["counts"]["total"] for m in by_model.values()) == 4
    assert sum(m["retrieval"]["questions"] for m in by_model.values()) == 4
    # pass rates count a null as not passed, over all questions
    assert rt["pass_rate_7"] <= 50.0


def test_a_result_that_vanished_before_the_reduce_stays_a_question() -> None:
    rows = retrieval_rows(3)
    store, contexts = setup(rows, "retrieval-relevance", Judge())
    for i in range(3):
        process_job(store, contexts, RUN, i)
    store._results[RUN].pop(2)  # expired between the last store and the reduce
    store.put_jobs(RUN, [(2, json.dumps(rows[2]))])
    report = reduce_run(store, RUN)
    assert report["counts"]["null_by_reason"] == {"lost": 1} and report["counts"]["missing"] == 1
    assert report["retrieval"]["questions"] == 3
    assert sum(m["counts"]["total"] for m in report["by_model"].values()) == 3


def test_jobs_never_sent_are_questions_of_a_retrieval_run_when_finalized() -> None:
    # the producer died after sending 2 of 4 jobs: the other 2 have no payload at all, and
    # `finalize --force` records them as lost. They are questions (the run's rubric grades
    # questions only), so accuracy is over 4, not over the 2 survivors (old: 100% of 2)
    rows = retrieval_rows(4)
    store, contexts = setup(rows[:2], "retrieval-relevance", Judge())
    store.set_state(RUN, state="running", enqueue="enqueuing")
    store._specs[RUN] = store._specs[RUN].replace('"total":2', '"total":4')
    assert all(process_job(store, contexts, RUN, i) is Outcome.STORED for i in range(2))
    lost, report = finalize_run(store, RUN)
    assert lost == 2
    rt = report["retrieval"]
    assert report["counts"]["total"] == rt["questions"] == 4
    found = sum(r is not None and r.rank is not None for r in store.results(RUN, 4))
    assert found == 2 and rt["accuracy"] == 50.0
    nulls = [r for r in store.results(RUN, 4) if r is not None and r.status == "null"]
    assert [(r.kind, r.job_id, r.question_id, r.model) for r in nulls] == [
        ("question", "#2", "#2", None),
        ("question", "#3", "#3", None),
    ]


# -- point 3: a grading context that cannot be built holds the jobs -----------------------------------


def test_a_rubric_that_fails_to_load_holds_the_jobs_then_they_become_internal_error_nulls() -> None:
    rows = retrieval_rows(2)
    store, contexts = setup(rows, "retrieval-relevance", Judge())
    store._specs[RUN] = store._specs[RUN].replace("scale:", "scale: 7-3 #", 1)  # a worker can't load it
    held = process_job(store, contexts, RUN, 0)
    assert isinstance(held, Held) and held.reason == "internal_error" and not held.systemic
    assert store.counters(RUN).get("done", 0) == 0 and store.pending_indices(RUN) == [0, 1]
    assert settle_held(store, RUN, [(0, held)], systemic_limit=20, final=False) is Outcome.RETRY
    assert store.counters(RUN).get("done", 0) == 0  # nothing acknowledged away
    both = [(0, held), (1, held)]
    assert settle_held(store, RUN, both, systemic_limit=20, final=True) is Outcome.LAST
    results = list(store.results(RUN, 2))
    assert all(r is not None and r.null_reason == "internal_error" for r in results)
    assert [r.kind for r in results if r] == ["question", "question"]
    assert [r.job_id for r in results if r] == ["q-001", "q-002"]


def test_a_judge_that_fails_to_build_holds_the_jobs() -> None:
    rows = retrieval_rows(1)
    store, _ = setup(rows, "retrieval-relevance", None)

    def factory(provider: str, model: str) -> Any:
        raise judgeq.ConfigError("unknown judge provider 'test'")

    held = process_job(store, Contexts(factory), RUN, 0)
    assert isinstance(held, Held) and "unknown judge provider" in held.message


# -- point 4: systemic judge failures pause the run ---------------------------------------------------


def response_rows(n: int) -> list[dict[str, Any]]:
    return [{"id": f"j{i}", "input": f"q{i}", "output": f"a{i}", "model": "m"} for i in range(n)]


@pytest.mark.parametrize(
    "error",
    [
        JudgeAuthError("401 invalid x-api-key"),
        JudgeModelNotFound("404 model: nope"),
        judgeq.JudgeBillingError("402"),
    ],
)
def test_systemic_failures_in_a_row_pause_the_run_and_nothing_becomes_a_null(error: Exception) -> None:
    judge = Judge()
    judge.error = error
    store, contexts = setup(response_rows(30), "quality", judge)
    outcomes = [process_job(store, contexts, RUN, i) for i in range(5)]
    assert all(isinstance(o, Held) and o.systemic for o in outcomes)
    assert [o.streak for o in outcomes] == [1, 2, 3, 4, 5]  # type: ignore[union-attr]
    held = list(enumerate(outcomes))
    assert settle_held(store, RUN, held[:4], systemic_limit=5, final=False) is Outcome.RETRY  # type: ignore[arg-type]
    assert settle_held(store, RUN, held, systemic_limit=5, final=True) is Outcome.PAUSED  # type: ignore[arg-type]
    state = store.state(RUN)
    assert state["state"] == "paused" and outcomes[-1].reason in state["pause_reason"]  # type: ignore[union-attr]
    assert "5 judge calls in a row" in state["pause_reason"]
    assert store.counters(RUN).get("done", 0) == 0 and len(store.pending_indices(RUN)) == 30
    # later held jobs of a paused run stay pending too, even on their last retry
    assert settle_held(store, RUN, held, systemic_limit=99, final=True) is Outcome.PAUSED  # type: ignore[arg-type]
    # fixed, resumed: the jobs are graded and the streak starts again
    judge.error = None
    assert store.resume(RUN) and store.state(RUN)["state"] == "running"
    assert not store.resume(RUN)
    for i in range(30):
        process_job(store, contexts, RUN, i)
    report = reduce_run(store, RUN)
    assert report["counts"]["graded"] == 30 and report["counts"]["null"] == 0


def test_a_success_resets_the_streak() -> None:
    judge = Judge()
    store, contexts = setup(response_rows(6), "quality", judge)
    judge.error = JudgeAuthError("401")
    assert [process_job(store, contexts, RUN, i).streak for i in range(2)] == [1, 2]  # type: ignore[union-attr]
    judge.error = None
    assert process_job(store, contexts, RUN, 2) is Outcome.STORED
    judge.error = JudgeAuthError("401")
    assert process_job(store, contexts, RUN, 3).streak == 1  # type: ignore[union-attr]


def test_held_systemic_jobs_that_never_pause_end_as_nulls_with_their_reason_and_attempts() -> None:
    judge = Judge()
    store, contexts = setup(response_rows(1), "quality", judge)
    judge.error = JudgeAuthError("403 permission")
    held = process_job(store, contexts, RUN, 0)
    assert isinstance(held, Held)
    assert settle_held(store, RUN, [(0, held)], systemic_limit=20, final=True) is Outcome.LAST
    (result,) = store.results(RUN, 1)
    assert result is not None and result.null_reason == "auth_error" and result.attempts == 1


ERRORS: dict[str, Exception] = {
    "timeout": judgeq.JudgeTimeout("slow"),
    "rate_limited": judgeq.JudgeRateLimited("429"),
    "overloaded": judgeq.JudgeOverloaded("529"),
    "api_error": judgeq.JudgeAPIError("connection refused"),
    "invalid_request": judgeq.JudgeInvalidRequest("400 No connected db."),
    "auth_error": JudgeAuthError("401"),
    "billing_error": judgeq.JudgeBillingError("402"),
    "model_not_found": JudgeModelNotFound("404"),
}
"""Every way a judge call can fail (a reply that fails to parse is the job's own: below)."""

EXPECTED: dict[str, tuple[str | None, str | None]] = {
    # reason: (while the judge answers other jobs, while it answers no one)
    "timeout": (None, "wait"),
    "rate_limited": (None, "wait"),
    "overloaded": (None, "wait"),
    "api_error": (None, "wait"),
    "invalid_request": (None, "pause"),
    "auth_error": ("pause", "pause"),
    "billing_error": ("pause", "pause"),
    "model_not_found": ("pause", "pause"),
}


def _fail_job_after(answering: bool, error: Exception) -> tuple[MemoryStore, Outcome | Held]:
    """Job 1 fails with ``error``; job 0 was graded by the judge just before when ``answering``."""
    judge = Judge()
    store, contexts = setup(response_rows(3), "quality", judge, judge_timeout=0.1, judge_deadline=0.3)
    if answering:
        assert process_job(store, contexts, RUN, 0) is Outcome.STORED
    judge.error = error
    return store, process_job(store, contexts, RUN, 1)


@pytest.mark.parametrize("answering", [True, False], ids=["judge-answers-others", "judge-answers-no-one"])
@pytest.mark.parametrize("reason", sorted(ERRORS))
def test_a_failure_is_the_jobs_own_null_only_while_the_judge_answers_others(
    reason: str, answering: bool
) -> None:
    """The matrix: every failure x whether the judge answers other jobs of the run. A set-up
    failure (key, credit, model) is held toward the pause either way; a per-job 400 or a job out
    of attempts is the job's null while others are answered, else held: a 400 every call gets
    toward the pause (a gateway refusing the key), no answer at all waits for the judge."""
    store, outcome = _fail_job_after(answering, ERRORS[reason])
    expected = EXPECTED[reason][not answering]
    if expected is None:
        assert outcome is Outcome.STORED
        (result,) = [r for r in store.results(RUN, 3) if r is not None and r.index == 1]
        assert result.null_reason == reason
    else:
        assert isinstance(outcome, Held) and outcome.reason == reason
        assert outcome.systemic == (expected == "pause") and outcome.wait == (expected == "wait")
        assert not store.has_result(RUN, 1)  # held: nothing stored, nothing counted


def test_hold_kind_over_every_null_reason() -> None:
    kinds = {(r, a): hold_kind(r, a) for r in judgeq.NULL_REASONS for a in (True, False)}
    for r, (others, no_one) in EXPECTED.items():
        assert (kinds[r, True], kinds[r, False]) == (others, no_one)
    assert set(EXPECTED) == SYSTEMIC_REASONS | UNAVAILABLE_REASONS | {"invalid_request"}
    # answers (a verdict that fails to parse, a refusal) and nulls made outside a call are the job's own
    for r in ("parse_error", "refusal", "internal_error", "lost", "canceled"):
        assert kinds[r, True] is kinds[r, False] is None


def test_the_judge_answers_when_someone_was_answered_since_the_jobs_first_failure() -> None:
    state = {"last_answer_at": "1000.0"}
    assert judge_answering(state, 1000.0 + ANSWER_FLOOR_S, failing_s=0.0)  # refused at once
    assert not judge_answering(state, 1000.0 + ANSWER_FLOOR_S + 1, failing_s=0.0)
    assert judge_answering(state, 1000.0 + 90, failing_s=100)  # answered while this job failed
    # an answer before the job's first failure (the outage began after it) says nothing
    assert not judge_answering(state, 1000.0 + 90, failing_s=80)
    assert not judge_answering({}, 1000.0, 0.0) and not judge_answering({"last_answer_at": "x"}, 1.0, 0.0)


class CheckedJudge(Judge):
    """A scripted judge with a preflight check (the real judges' Models API), which fails
    while ``down``."""

    def __init__(self) -> None:
        super().__init__()
        self.down = False
        self.checks = 0

    def check(self, *, timeout: float) -> None:
        self.checks += 1
        if self.down:
            raise judgeq.JudgeAPIError("Connection error")


@pytest.mark.parametrize("down", [False, True], ids=["check-answers", "check-fails"])
def test_a_judge_that_answers_its_check_is_up_so_the_failure_is_the_jobs_own(down: bool) -> None:
    """The tail of a run: no other job left to be answered; the judge's own check tells an
    outage (wait) from a job that fails for itself (its null)."""
    judge = CheckedJudge()
    store, contexts = setup(response_rows(3), "quality", judge, judge_timeout=0.1, judge_deadline=0.3)
    judge.error, judge.down = judgeq.JudgeTimeout("slow"), down
    outcome = process_job(store, contexts, RUN, 0)
    if down:
        assert isinstance(outcome, Held) and outcome.wait
    else:
        assert outcome is Outcome.STORED
    process_job(store, contexts, RUN, 1)
    assert judge.checks == 1  # asked once per REACHABLE_FOR_S, not once per job


def test_a_429_the_budget_judged_the_jobs_own_is_its_null_even_with_no_one_answered() -> None:
    assert hold_kind("rate_limited", False, own_refusal=True) is None
    assert hold_kind("rate_limited", False, own_refusal=False) == "wait"


def test_a_wait_past_its_limit_pauses_the_run_for_a_person() -> None:
    judge = Judge()
    clock = [5000.0]
    store, contexts = setup(response_rows(2), "quality", judge, judge_timeout=0.1, judge_deadline=0.3)
    store._clock = lambda: clock[0]  # type: ignore[method-assign]
    judge.error = judgeq.JudgeAPIError("Connection error")
    held = [(0, process_job(store, contexts, RUN, 0))]
    assert settle_held(store, RUN, held, systemic_limit=20, final=False, wait_limit=600) is Outcome.WAIT  # type: ignore[arg-type]
    clock[0] += 601
    assert settle_held(store, RUN, held, systemic_limit=20, final=False, wait_limit=600) is Outcome.PAUSED  # type: ignore[arg-type]
    state = store.state(RUN)
    assert state["state"] == "paused" and "answered no job for 10m" in state["pause_reason"]
    assert store.counters(RUN).get("done", 0) == 0  # still nothing nulled


def test_an_outage_holds_every_job_the_run_waits_and_the_first_answer_ends_the_wait() -> None:
    judge = Judge()
    clock = [1000.0]
    store, contexts = setup(response_rows(6), "quality", judge, judge_timeout=0.1, judge_deadline=0.3)
    store._clock = lambda: clock[0]  # type: ignore[method-assign]
    assert process_job(store, contexts, RUN, 0) is Outcome.STORED
    clock[0] += ANSWER_FLOOR_S + 5  # the judge has not answered since: it is down
    judge.error = judgeq.JudgeAPIError("Connection error: connection refused")
    held = [(i, process_job(store, contexts, RUN, i)) for i in range(1, 6)]
    assert all(isinstance(h, Held) and h.wait for _, h in held)
    # held jobs of an outage wait: neither a retry (even the last) nor a null
    assert settle_held(store, RUN, held, systemic_limit=2, final=True) is Outcome.WAIT  # type: ignore[arg-type]
    state = store.state(RUN)
    assert state["state"] == "running" and float(state["waiting_since"]) == clock[0]
    assert "connection refused" in state["waiting_reason"]
    assert store.counters(RUN)["done"] == 1 and len(store.pending_indices(RUN)) == 5
    # while it waits, one message at a time calls the judge (the probe); the others wait
    go, token = claim_probe(store, RUN, state, 30)
    assert go and token is not None
    assert claim_probe(store, RUN, state, 30) == (False, None)
    clock[0] += 40
    assert wait_delay(state, clock[0]) == 10 and wait_delay(state, clock[0] + 1000) == 30
    assert wait_delay(state, clock[0], floor=15) == 15 and wait_delay({}, clock[0]) == 1
    # the judge is back: the probe's answer ends the wait, then every held job is graded
    judge.error = None
    assert process_job(store, contexts, RUN, 1) is Outcome.STORED
    store.release(RUN, "probe", token)
    assert "waiting_since" not in store.state(RUN)
    assert claim_probe(store, RUN, store.state(RUN), 30) == (True, None)
    for i in range(2, 6):
        assert process_job(store, contexts, RUN, i) in (Outcome.STORED, Outcome.LAST)
    report = reduce_run(store, RUN)
    assert report["counts"]["graded"] == 6 and report["counts"]["null"] == 0


def test_a_reply_from_the_cache_does_not_end_a_wait() -> None:
    """Only the judge answering ends a wait: a job graded from the reply cache says nothing."""
    judge = Judge()
    store, _ = setup(response_rows(2), "quality", judge)
    store.wait_for_judge(RUN, "api_error: down")
    common: dict[str, Any] = {"kind": "response", "status": "graded", "rubric_name": "quality"}
    common |= {"rubric_version": "1", "judge_model": "scripted"}
    cached = judgeq.Result(job_id="j0", index=0, cached=True, **common)
    store.store_result(RUN, cached)
    assert store.state(RUN)["waiting_since"]
    answered = judgeq.Result(job_id="j1", index=1, **common)
    answered._served = ["test:scripted"]
    store.store_result(RUN, answered)
    assert "waiting_since" not in store.state(RUN) and store.state(RUN)["last_answer_at"]


def test_a_resume_ends_a_wait() -> None:
    store, _ = setup(response_rows(1), "quality", Judge())
    assert store.wait_for_judge(RUN, "api_error: down") and not store.wait_for_judge(RUN, "again")
    store.pause(RUN, "auth_error: 401")
    assert store.resume(RUN) and "waiting_since" not in store.state(RUN)


def test_a_429_storm_waits_even_when_the_judge_answers_its_check() -> None:
    """A server refusing every Messages call with 429 still answers its Models API: the check
    does not make a 429 the job's own."""
    judge = CheckedJudge()
    store, contexts = setup(response_rows(2), "quality", judge, judge_timeout=0.1, judge_deadline=0.3)
    judge.error = judgeq.JudgeRateLimited("429", retry_after=0.01)
    outcome = process_job(store, contexts, RUN, 0)
    assert isinstance(outcome, Held) and outcome.wait and judge.checks == 0


class Council:
    """Two judges: ``a`` answers (with tokens), ``b`` refuses the key while ``b_refused``."""

    def __init__(self) -> None:
        self.calls = {"a": 0, "b": 0}
        self.b_refused = True

    def judge(self, provider: str, model: str) -> Any:
        council = self

        class One:
            def __init__(self) -> None:
                self.provider, self.model = provider, model

            def complete(self, request: JudgeRequest, *, timeout: float) -> judgeq.JudgeReply:
                council.calls[model] += 1
                if model == "b" and council.b_refused:
                    raise JudgeAuthError("401 invalid x-api-key")
                text = json.dumps(verdict_for_schema(request.output_schema, 8))
                return judgeq.JudgeReply(text=text, input_tokens=100, output_tokens=10)

        return One()


def test_a_held_jobs_answered_calls_are_served_from_the_cache_and_counted_once() -> None:
    """A council job whose second judge refused the key is held; once the key works its first
    judge's reply comes from the reply cache (not paid again), counted as its own spend."""
    council = Council()
    text, source = read_rubric_text("quality")
    store = MemoryStore()
    spec = RunSpec(
        run_id=RUN, rubric_text=text, rubric_source=source, judge_provider="test", judge_model="a",
        council=["test:b"], total=1,
    )  # fmt: skip
    store.register(spec)
    store.set_state(RUN, state="running", enqueue="done")
    store.put_jobs(RUN, [(0, json.dumps(response_rows(1)[0]))])
    contexts = Contexts(council.judge, cache=MemoryCache())
    held = process_job(store, contexts, RUN, 0)
    assert isinstance(held, Held) and held.systemic and council.calls == {"a": 1, "b": 1}
    council.b_refused = False  # the key is fixed; the job is sent again
    assert process_job(store, contexts, RUN, 0) is Outcome.LAST
    assert council.calls == {"a": 1, "b": 2}  # a's reply was not asked (nor paid) again
    (result,) = store.results(RUN, 1)
    assert result is not None and result.status == "graded" and not result.cached
    assert (result.input_tokens, result.output_tokens) == (200, 20)  # both replies, once each
    report = reduce_run(store, RUN)
    assert report["usage"].get("reply_cache", {}).get("hits", 0) == 0  # its own spend, not a saving


def test_an_upstream_key_revoked_behind_a_gateway_pauses_with_no_null() -> None:
    """(issue 29: 401s, then 429s from the gateway made 21 rate_limited nulls and never paused:
    each 429 null was stored and reset the streak.) The 429s of a judge that answers no one are
    held, so the 401s' streak goes on to the pause."""
    judge = Judge()
    store, contexts = setup(response_rows(40), "quality", judge, judge_timeout=0.1, judge_deadline=0.3)
    outcomes: list[Outcome | Held] = []
    for i in range(12):
        judge.error = (
            JudgeAuthError("401 upstream key revoked")
            if i % 2 == 0
            else judgeq.JudgeRateLimited("429", retry_after=0.01)
        )
        held = process_job(store, contexts, RUN, i)
        outcomes.append(held)
        assert isinstance(held, Held)
        settled = settle_held(store, RUN, [(i, held)], systemic_limit=5, final=False)
        if settled is Outcome.PAUSED:
            break
    state = store.state(RUN)
    assert state["state"] == "paused" and "auth_error" in state["pause_reason"], state
    assert store.counters(RUN).get("done", 0) == 0  # nothing nulled, whatever came
    assert len(outcomes) == 9  # the 5th 401 (with four 429s held between them) paused the run

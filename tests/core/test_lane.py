"""The Message Batches lane (judgeq.pipeline.batch_lane) over both stores, with a scripted batch judge: when
batches are sent, what becomes of every kind of batch result, what a dead worker leaves behind."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import fakeredis
import pytest

import judgeq
from judgeq.grading.request import JudgeRequest
from judgeq.judges.anthropic import messages_kwargs
from judgeq.judges.base import JudgeBase
from judgeq.judges.batches import BatchInfo, BatchItem, batch_item_error
from judgeq.pipeline.batch_lane import BatchLane, LaneConfig, index_of, lane_summary
from judgeq.pipeline.stages import Contexts, Outcome, process_job, reduce_run
from judgeq.rubric.model import read_rubric_text
from judgeq.runspec import RunSpec
from judgeq.store.base import MemoryStore, Store, result_cost
from judgeq.store.redis import RedisStore
from judgeq.store.reply_cache import MemoryCache
from judgeq.testing.mock_messages import verdict_for_schema

RUN = "lane-run"
QUALITY_TEXT, _ = read_rubric_text("quality")
MODEL = "claude-haiku-4-5"


class BatchStub(JudgeBase):
    """A batch judge: batches end when the test says so; each request's result follows
    ``outcomes`` (custom_id -> 'succeeded' | 'errored' | 'expired' | 'canceled' | 'missing')."""

    provider = "anthropic"
    model = MODEL

    def as_batch_judge(self) -> BatchStub:
        return self

    def __init__(self) -> None:
        self.batches: dict[str, list[tuple[str, dict[str, Any]]]] = {}
        self.status: dict[str, str] = {}
        self.outcomes: dict[str, str] = {}
        self.refuse: list[judgeq.JudgeError] = []
        self.polls = 0
        self.gone: set[str] = set()
        self.canceled: list[str] = []
        self.result_reads = 0

    def complete(self, request: JudgeRequest, *, timeout: float) -> judgeq.JudgeReply:
        raise AssertionError("the batch lane makes no live judge call")

    def batch_params(self, request: JudgeRequest) -> dict[str, Any]:
        return messages_kwargs(request, self.model)

    def batch_create(self, requests: list[tuple[str, dict[str, Any]]]) -> BatchInfo:
        if self.refuse:
            raise self.refuse.pop(0)
        batch_id = f"msgbatch_{len(self.batches)}"
        self.batches[batch_id] = list(requests)
        self.status[batch_id] = "in_progress"
        return BatchInfo(batch_id, "in_progress", {"processing": len(requests)})

    def batch_retrieve(self, batch_id: str) -> BatchInfo:
        self.polls += 1
        if batch_id in self.gone:
            raise judgeq.JudgeModelNotFound(f"404 no Message Batch {batch_id!r}")
        return BatchInfo(batch_id, self.status[batch_id], {})

    def batch_cancel(self, batch_id: str) -> BatchInfo:
        self.canceled.append(batch_id)
        self.status[batch_id] = "ended"
        return BatchInfo(batch_id, "ended", {})

    def batch_results(self, batch_id: str) -> Iterator[BatchItem]:
        assert self.status[batch_id] == "ended"
        self.result_reads += 1
        for cid, params in reversed(self.batches[batch_id]):  # not in request order
            kind = self.outcomes.get(cid, "succeeded")
            if kind == "missing":
                continue
            if kind != "succeeded":
                yield BatchItem(cid, error=batch_item_error(kind, "overloaded_error: Overloaded"))
                continue
            schema = params["output_config"]["format"]["schema"]
            text = json.dumps(verdict_for_schema(schema, 3 + index_of(cid) % 7))  # type: ignore[operator]
            yield BatchItem(cid, reply=judgeq.JudgeReply(text=text, input_tokens=1000, output_tokens=100))

    def end_all(self) -> None:
        for batch_id in set(self.status) - self.gone:
            self.status[batch_id] = "ended"

    @property
    def requests(self) -> int:
        return sum(len(r) for r in self.batches.values())


class Clock:
    """The lane's clock, moved by the test (process_job stamps buffered jobs with store.now())."""

    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now


@pytest.fixture(params=["memory", "redis"])
def store(request: pytest.FixtureRequest) -> Store:
    if request.param == "memory":
        return MemoryStore()
    return RedisStore(fakeredis.FakeRedis(decode_responses=True))  # type: ignore[arg-type]


def payload(i: int) -> str:
    return json.dumps({"id": f"r{i}", "input": f"question {i}", "output": f"answer {i}", "model": "m"})


def setup(
    store: Store,
    n: int,
    judge: BatchStub,
    *,
    cache: MemoryCache | None = None,
    run_id: str = RUN,
    rubric_text: str = QUALITY_TEXT,
    job: Any = None,
    **config: Any,
) -> tuple[Contexts, BatchLane, Clock, list[str]]:
    spec = RunSpec(
        run_id=run_id,
        rubric_text=rubric_text,
        rubric_source="builtin:quality" if rubric_text is QUALITY_TEXT else "rubric.md",
        judge_provider="anthropic",
        judge_model=MODEL,
        total=n,
        lane="batch",
    )
    store.register(spec)
    store.put_jobs(run_id, [(i, (job or payload)(i)) for i in range(n)])
    store.set_state(run_id, state="running", enqueue="done")
    store.lane_track(run_id, True)
    contexts = Contexts(lambda provider, model: judge, cache=cache)
    reduced: list[str] = []
    clock = Clock()
    defaults: dict[str, Any] = {"flush_interval": 60.0, "poll_interval": 0.001}
    lane = BatchLane(store, contexts, LaneConfig(**{**defaults, **config}), reduced.append, clock=clock)
    return contexts, lane, clock, reduced


def step(lane: BatchLane) -> None:
    """One second later, one tick of the lane."""
    lane.clock.now += 1  # type: ignore[attr-defined]
    lane.tick()


def buffer_all(store: Store, contexts: Contexts, n: int) -> None:
    for i in range(n):
        assert process_job(store, contexts, RUN, i) is Outcome.BATCHED


def test_jobs_wait_in_the_buffer_and_go_in_one_batch_when_nothing_more_can_come(store: Store) -> None:
    judge = BatchStub()
    contexts, lane, _, reduced = setup(store, 5, judge)
    for i in range(4):
        assert process_job(store, contexts, RUN, i) is Outcome.BATCHED
    step(lane)
    assert judge.batches == {}, "4 of 5 jobs buffered, flush interval not reached: nothing sent"
    assert process_job(store, contexts, RUN, 4) is Outcome.BATCHED
    assert process_job(store, contexts, RUN, 4) is Outcome.DUPLICATE, (
        "a redelivered message is not sent twice"
    )
    step(lane)
    assert judge.requests == 5 and len(judge.batches) == 1
    assert sorted(index_of(cid) for cid, _ in judge.batches["msgbatch_0"]) == [0, 1, 2, 3, 4]
    assert store.counters(RUN).get("done", 0) == 0 and not reduced
    assert process_job(store, contexts, RUN, 2) is Outcome.DUPLICATE, "a job in a batch is not buffered again"

    judge.end_all()
    step(lane)
    assert store.counters(RUN)["done"] == 5
    assert reduced == [RUN]
    results = [r for r in store.results(RUN, 5) if r is not None]
    assert all(r.status == "graded" and r.batch and r.attempts == 1 for r in results)
    assert [r.overall for r in results] == [r.overall for r in sorted(results, key=lambda r: r.index)]
    assert store.lane_counts(RUN)[:2] == (0, 0)
    assert store.lane_runs() == [], "a finished run leaves the lane"
    report = reduce_run(store, RUN)
    assert report["usage"]["batch_api"]["jobs"] == 5
    cost = report["usage"]["cost_usd"]
    assert cost["batch_discount"] == pytest.approx(-(cost["input"] + cost["output"]) / 2)
    assert cost["total"] == pytest.approx((5 * 1000 * 1.0 + 5 * 100 * 5.0) / 1e6 / 2)
    assert report["judge"]["lane"] == "batch"


def test_the_flush_interval_and_the_batch_size_bound_a_batch(store: Store) -> None:
    judge = BatchStub()
    contexts, lane, clock, _ = setup(store, 10, judge, max_requests=4, flush_interval=30)
    store.set_state(RUN, enqueue="enqueuing")  # more may come: only size and time send a batch
    for i in range(3):
        process_job(store, contexts, RUN, i)
    step(lane)
    assert judge.batches == {}
    clock.now += 31
    step(lane)
    assert [len(r) for r in judge.batches.values()] == [3], "the oldest job waited the flush interval"
    for i in range(3, 10):  # buffered now, on the lane's clock
        assert store.lane_add(RUN, i, clock.now)
    step(lane)
    assert [len(r) for r in judge.batches.values()] == [3, 4], "a full batch goes at once, 3 stay"
    assert store.lane_counts(RUN)[0] == 3


def test_the_byte_bound_splits_a_batch(store: Store) -> None:
    judge = BatchStub()
    contexts, lane, _, _ = setup(store, 6, judge, max_bytes=20_000)
    buffer_all(store, contexts, 6)
    step(lane)
    sizes = [len(r) for r in judge.batches.values()]
    assert sum(sizes) == 6 and len(sizes) > 1
    for requests in judge.batches.values():
        body = sum(len(json.dumps(p)) + 64 for _, p in requests)
        assert body <= 20_000 or len(requests) == 1
    # the first batch ends alone: only its own jobs are ingested; the jobs that did not fit
    # into it are graded by their own batches, never nulls 'missing from the results'
    judge.status[next(iter(judge.batches))] = "ended"
    step(lane)
    first = {r.index: r.null_reason for r in store.results(RUN, 6) if r is not None}
    assert len(first) == sizes[0] and set(first.values()) == {None}
    judge.end_all()
    step(lane)
    assert [r.null_reason if r else "missing" for r in store.results(RUN, 6)] == [None] * 6


def test_errored_expired_canceled_and_missing_results_become_nulls_with_their_reasons(store: Store) -> None:
    judge = BatchStub()
    judge.outcomes = {"j1": "errored", "j2": "expired", "j3": "canceled", "j4": "missing"}
    contexts, lane, _, reduced = setup(store, 6, judge)
    buffer_all(store, contexts, 6)
    step(lane)
    judge.end_all()
    step(lane)
    results = {r.index: r for r in store.results(RUN, 6) if r is not None}
    assert len(results) == 6 and reduced == [RUN]
    assert {i: r.null_reason for i, r in results.items()} == {
        0: None,
        1: "api_error",
        2: "timeout",
        3: "canceled",
        4: "api_error",
        5: None,
    }
    assert "overloaded_error" in (results[1].raw or "")
    assert "missing" in (results[4].raw or "")
    assert all(
        r.model == "m" and r.kind == "response" and r.job_id == f"r{r.index}" for r in results.values()
    )
    counts = reduce_run(store, RUN)["counts"]
    assert counts["null"] == 4 and counts["total"] == 6


def test_reading_the_results_twice_counts_each_job_once(store: Store) -> None:
    judge = BatchStub()
    contexts, lane, _, reduced = setup(store, 4, judge)
    buffer_all(store, contexts, 4)
    step(lane)
    judge.end_all()
    record = store.lane_batches(RUN)[0]
    spec = store.spec(RUN)
    assert spec is not None
    assert lane.ingest(spec, judge, dict(record)) == 4
    store.release(RUN, f"lane-ingest:{record['token']}")  # as when the first reader died
    assert lane.ingest(spec, judge, dict(record)) == 0
    assert judge.result_reads == 2
    assert store.counters(RUN)["done"] == 4 and reduced == [RUN]


def test_a_worker_that_died_after_sending_leaves_a_batch_another_worker_polls(store: Store) -> None:
    judge = BatchStub()
    contexts, lane, clock, reduced = setup(store, 3, judge)
    buffer_all(store, contexts, 3)
    step(lane)
    assert len(judge.batches) == 1
    # the worker dies; another process (new contexts, new lane) carries on from the store
    other = BatchLane(store, Contexts(lambda p, m: judge), lane.config, reduced.append, clock=clock)
    clock.now += 10_000
    step(other)
    assert len(judge.batches) == 1, "the batch was not sent again"
    judge.end_all()
    step(other)
    assert store.counters(RUN)["done"] == 3 and judge.requests == 3


def test_a_batch_left_creating_by_a_dead_worker_is_sent_again_after_the_timeout(store: Store) -> None:
    judge = BatchStub()
    contexts, lane, clock, _ = setup(store, 3, judge, creating_timeout=600)
    buffer_all(store, contexts, 3)
    assert store.lane_take(RUN, 10, "deadbeef", clock.now) == [0, 1, 2]  # the dead worker took them
    step(lane)  # ...and its batch is neither sent nor given up yet
    assert judge.batches == {}
    clock.now += 601
    step(lane)
    assert judge.requests == 3
    assert {r["state"] for r in store.lane_batches(RUN)} == {"abandoned", "in_progress"}


def test_a_worker_dying_while_it_builds_a_batch_leaves_nothing_stuck(store: Store) -> None:
    judge = BatchStub()
    contexts, lane, clock, _ = setup(store, 5, judge, creating_timeout=600)
    buffer_all(store, contexts, 5)
    real_job = store.job
    calls = {"n": 0}

    def flaky(run_id: str, index: int) -> str | None:
        calls["n"] += 1
        if calls["n"] == 3:
            raise ConnectionError("the worker's Redis connection broke")
        return real_job(run_id, index)

    store.job = flaky  # type: ignore[method-assign]
    step(lane)  # the flush dies half-way through reading the payloads
    store.job = real_job  # type: ignore[method-assign]
    assert judge.batches == {}
    clock.now += 601
    step(lane)
    judge.end_all()
    step(lane)
    assert store.counters(RUN)["done"] == 5 and judge.requests == 5


def test_two_workers_giving_up_the_same_batch_send_its_jobs_once(store: Store) -> None:
    judge = BatchStub()
    contexts, lane, clock, reduced = setup(store, 4, judge, creating_timeout=600)
    buffer_all(store, contexts, 4)
    store.lane_take(RUN, 10, "deadbeef", clock.now)
    other = BatchLane(store, Contexts(lambda p, m: judge), lane.config, reduced.append, clock=clock)
    clock.now += 601
    stale = store.lane_batches(RUN)  # what the second worker read before the first acted
    step(lane)  # the first gives the batch up and sends its jobs in a new batch
    for record in stale:  # the second acts on its stale copy
        other._give_up(RUN, record, ("creating",), "late")
    step(other)
    assert judge.requests == 4, "the jobs were sent once more, not twice"
    judge.end_all()
    step(lane)
    assert store.counters(RUN)["done"] == 4


def test_a_stale_copy_of_a_batch_never_undoes_its_ingestion(store: Store) -> None:
    judge = BatchStub()
    contexts, lane, _, _ = setup(store, 2, judge)
    buffer_all(store, contexts, 2)
    step(lane)
    (record,) = store.lane_batches(RUN)
    judge.end_all()
    step(lane)
    assert store.lane_batch(RUN, record["token"])["state"] == "ingested"  # type: ignore[index]
    lane._poll(store.spec(RUN), judge, record["token"])  # type: ignore[arg-type]
    assert store.lane_batch(RUN, record["token"])["state"] == "ingested"  # type: ignore[index]
    assert judge.result_reads == 1 and store.lane_runs() == []


def test_a_batch_sent_after_it_was_given_up_is_canceled(store: Store) -> None:
    judge = BatchStub()
    contexts, lane, clock, _ = setup(store, 2, judge, creating_timeout=600)
    buffer_all(store, contexts, 2)
    real_create = judge.batch_create

    def slow_create(requests: list[tuple[str, dict[str, Any]]]) -> BatchInfo:
        # while this upload hangs, another worker gives the batch up and sends the jobs again
        clock.now += 601
        for record in store.lane_batches(RUN):
            lane._give_up(RUN, record, ("creating",), "upload too slow")
        judge.batch_create = real_create  # type: ignore[method-assign]
        return real_create(requests)

    judge.batch_create = slow_create  # type: ignore[method-assign]
    step(lane)
    assert judge.status["msgbatch_0"] == "ended" and judge.canceled == ["msgbatch_0"]
    step(lane)
    judge.end_all()
    step(lane)
    assert store.counters(RUN)["done"] == 2


def test_a_transient_refusal_keeps_the_jobs_and_a_later_tick_sends_them(store: Store) -> None:
    judge = BatchStub()
    judge.refuse = [judgeq.JudgeOverloaded("529 overloaded")]
    contexts, lane, _, _ = setup(store, 2, judge)
    buffer_all(store, contexts, 2)
    step(lane)
    assert judge.batches == {} and store.lane_counts(RUN)[0] == 2
    step(lane)
    assert judge.requests == 2


def test_a_systemic_refusal_pauses_the_run_and_sends_nothing_until_resumed(store: Store) -> None:
    judge = BatchStub()
    judge.refuse = [judgeq.JudgeAuthError("401 invalid x-api-key")]
    contexts, lane, _, _ = setup(store, 2, judge)
    buffer_all(store, contexts, 2)
    step(lane)
    assert store.state(RUN)["state"] == "paused" and "auth_error" in store.state(RUN)["pause_reason"]
    step(lane)
    assert judge.batches == {} and store.counters(RUN).get("done", 0) == 0
    store.resume(RUN)
    step(lane)
    assert judge.requests == 2


def test_a_refused_request_makes_its_jobs_nulls(store: Store) -> None:
    judge = BatchStub()
    judge.refuse = [judgeq.JudgeInvalidRequest("400 requests.0.params: bad")]
    contexts, lane, _, reduced = setup(store, 2, judge)
    buffer_all(store, contexts, 2)
    step(lane)
    results = [r for r in store.results(RUN, 2) if r is not None]
    assert [r.null_reason for r in results] == ["invalid_request", "invalid_request"]
    assert reduced == [RUN]


def test_a_cached_reply_grades_at_once_and_a_batch_reply_fills_the_cache(store: Store) -> None:
    cache = MemoryCache()
    judge = BatchStub()
    contexts, lane, _, _ = setup(store, 2, judge, cache=cache)
    buffer_all(store, contexts, 2)
    step(lane)
    judge.end_all()
    step(lane)
    assert store.counters(RUN)["done"] == 2
    # the same batch again, as a new run: every reply is in the cache, no batch is sent
    other = MemoryStore()
    contexts2, _, _, _ = setup(other, 2, judge, cache=cache, run_id="lane-run-2")
    outcomes = [process_job(other, contexts2, "lane-run-2", i) for i in range(2)]
    assert Outcome.BATCHED not in outcomes
    assert len(judge.batches) == 1
    assert all(r is not None and r.cached for r in other.results("lane-run-2", 2))


def test_a_batch_result_costs_half(store: Store) -> None:
    judge = BatchStub()
    contexts, lane, _, _ = setup(store, 1, judge)
    buffer_all(store, contexts, 1)
    step(lane)
    judge.end_all()
    step(lane)
    (result,) = list(store.results(RUN, 1))
    assert result is not None and result.batch
    live = result.model_copy(update={"batch": False})
    assert result_cost(result) == pytest.approx(result_cost(live) / 2)
    assert store.counters(RUN)["cost_usd"] == pytest.approx(result_cost(result))


def test_a_paused_run_sends_no_new_batch_but_stores_the_results_of_the_ones_sent(store: Store) -> None:
    judge = BatchStub()
    contexts, lane, clock, _ = setup(store, 3, judge, max_requests=2, flush_interval=30)
    store.set_state(RUN, enqueue="enqueuing")
    buffer_all(store, contexts, 3)
    step(lane)
    assert [len(r) for r in judge.batches.values()] == [2], "one full batch; one job waits"
    store.pause(RUN, "max_cost: test")
    clock.now += 60
    judge.end_all()
    step(lane)
    assert len(judge.batches) == 1, "a paused run sends no new batch, even past the flush interval"
    assert store.counters(RUN)["done"] == 2, "results already paid for are stored"
    store.resume(RUN)
    step(lane)
    assert [len(r) for r in judge.batches.values()] == [2, 1]


def test_a_batch_the_api_no_longer_knows_is_sent_again(store: Store) -> None:
    judge = BatchStub()
    contexts, lane, _, _ = setup(store, 2, judge)
    buffer_all(store, contexts, 2)
    step(lane)
    judge.gone.add("msgbatch_0")  # deleted by someone: the API answers 404
    step(lane)
    step(lane)
    assert judge.requests == 4 and len(judge.batches) == 2
    judge.end_all()
    step(lane)
    assert store.counters(RUN)["done"] == 2


def test_a_lane_built_as_a_worker_builds_it_decides_on_the_stores_clock(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 18.8: a worker whose wall clock runs 6 minutes ahead gives up no batch that another
    worker is still creating; the creating timeout counts on the store's clock (Redis's TIME)."""
    shared = Clock()  # the store's clock
    store = MemoryStore(clock=shared)
    judge = BatchStub()
    contexts, _, _, _ = setup(store, 3, judge, creating_timeout=600)
    lane = BatchLane(store, contexts, LaneConfig(creating_timeout=600), lambda run_id: None)  # no clock
    buffer_all(store, contexts, 3)
    store.lane_take(RUN, 10, "deadbeef", store.now())  # another worker's batch, being created
    real = time.time
    monkeypatch.setattr(time, "time", lambda: real() + 360)
    lane.tick()
    assert {r["state"] for r in store.lane_batches(RUN)} == {"creating"} and judge.batches == {}
    shared.now += 601  # the timeout, on the store's clock, whatever this machine's says
    lane.tick()
    assert {r["state"] for r in store.lane_batches(RUN)} == {"abandoned", "in_progress"}
    assert judge.requests == 3


# -- the cost limit (issue 18.6): no batch is sent whose cost bound would pass it --------------


class Snapshots(BatchStub):
    """A batch judge that notes, as each batch is created, what the run has spent and what the
    batches in flight hold reserved (this one included)."""

    def __init__(self, store: Store) -> None:
        super().__init__()
        self.store = store
        self.at_send: list[tuple[float, float]] = []

    def batch_create(self, requests: list[tuple[str, dict[str, Any]]]) -> BatchInfo:
        spent = self.store.counters(RUN).get("cost_usd", 0.0)
        self.at_send.append((spent, self.store.lane_reserved(RUN)))
        return super().batch_create(requests)


def request_cost_bound(params: dict[str, Any]) -> float:
    """Haiku 4.5 at the batch price: one input token per byte of the request's JSON at the
    cache-write price, max_tokens output (the bound the lane reserves, computed here anew)."""
    size = len(json.dumps(params, ensure_ascii=False).encode())
    return (size * 1.25 + params["max_tokens"] * 5.0) / 1e6 * 0.5


def test_the_store_reserves_against_the_limit_atomically_and_releases_when_a_batch_leaves_flight(
    store: Store,
) -> None:
    judge = BatchStub()
    contexts, _, clock, _ = setup(store, 4, judge)
    store.set_state(RUN, max_cost_usd=1.0)
    buffer_all(store, contexts, 4)
    tokens = ["t1", "t2", "t3"]
    for i, token in enumerate(tokens):
        assert store.lane_take(RUN, 1, token, clock.now) == [i]
    assert store.lane_reserve(RUN, "t1", 0.6)
    assert not store.lane_reserve(RUN, "t2", 0.5), "0.6 held + 0.5 would pass $1"
    assert store.lane_reserved(RUN) == pytest.approx(0.6)
    # $0.30 spent by a stored result: 0.3 + 0.6 + 0.1 reaches the limit exactly, no more
    spent = judgeq.Result(
        job_id="r3", index=3, status="graded", overall=7.0, input_tokens=600_000, output_tokens=0,
        rubric_name="quality", rubric_version="1.0.0", judge_model=MODEL, batch=True,
    )  # fmt: skip
    store.store_result(RUN, spent)
    assert store.counters(RUN)["cost_usd"] == pytest.approx(0.3)
    assert store.lane_reserve(RUN, "t2", 0.1)
    assert not store.lane_reserve(RUN, "t3", 0.01)
    # a batch leaving flight (ingested, given up, refused, canceled) gives its reservation back
    record = {**store.lane_batch(RUN, "t1"), "state": "in_progress"}  # type: ignore[dict-item]
    assert store.lane_set_batch(RUN, record, ("creating",))
    assert store.lane_reserved(RUN) == pytest.approx(0.7), "in flight: still held"
    assert store.lane_set_batch(RUN, {**record, "state": "ingested"}, ("in_progress",))
    assert store.lane_reserved(RUN) == pytest.approx(0.1)
    assert store.lane_reserve(RUN, "t3", 0.5)
    # only a batch still being created can reserve (not one given up meanwhile)
    assert store.lane_set_batch(RUN, {**record, "token": "t3", "state": "abandoned"}, ("creating",))
    assert store.lane_reserved(RUN) == pytest.approx(0.1)
    assert not store.lane_reserve(RUN, "t3", 0.01) and not store.lane_reserve(RUN, "nope", 0.01)
    # no limit: every reservation is taken (and counted, should a limit come later)
    store.set_state(RUN, max_cost_usd=0)
    assert store.lane_reserve(RUN, "t2", 50.0) and store.lane_reserved(RUN) == pytest.approx(50.0)


def test_under_a_cost_limit_no_batch_is_sent_that_could_pass_it(store: Store) -> None:
    n, limit = 20, 0.02  # a job costs $0.00075 (the stub's usage) and reserves ~$0.0087: 2 fit at first
    judge = Snapshots(store)
    contexts, lane, _, reduced = setup(store, n, judge)
    store.set_state(RUN, max_cost_usd=limit)
    buffer_all(store, contexts, n)
    for _ in range(4 * n):  # send what fits, end every batch, again: until the run pauses
        step(lane)
        if store.state(RUN)["state"] == "paused":
            break
        judge.end_all()
    state = store.state(RUN)
    assert state["state"] == "paused"
    assert state["pause_reason"].startswith("max_cost: $")
    assert "the next Message Batch could cost up to $" in state["pause_reason"]
    assert len(judge.batches) > 2, "batches kept being sent as earlier ones gave back what they did not spend"
    for spent, reserved in judge.at_send:
        assert spent + reserved <= limit, "a batch is sent only when its bound fits under the limit"
    records = {r["id"]: r for r in store.lane_batches(RUN) if r.get("id")}
    assert set(records) == set(judge.batches)
    for batch_id, requests in judge.batches.items():  # each reserved the bound of its requests
        bound = sum(request_cost_bound(p) for _, p in requests)
        assert records[batch_id]["reserved_usd"] == pytest.approx(bound, rel=1e-5)
        assert bound > len(requests) * (1000 * 1.0 + 100 * 5.0) / 1e6 / 2, "above the real cost"
    done = int(store.counters(RUN)["done"])
    spent = store.counters(RUN)["cost_usd"]
    assert 0 < done < n and not reduced
    assert spent <= limit, "the spend never passes the limit"
    assert spent == pytest.approx(done * (1000 * 1.0 + 100 * 5.0) / 1e6 / 2)  # each job's real cost
    assert store.lane_reserved(RUN) == 0, "every reservation was given back"
    assert store.lane_counts(RUN)[0] == n - done, "the rest wait in the buffer"
    summary = lane_summary(store, RUN)
    assert "abandoned" not in summary["batches"], "a batch that sent nothing is not shown"
    # a higher limit continues the run where it stopped
    store.set_state(RUN, max_cost_usd=10.0)
    assert store.resume(RUN)
    step(lane)
    judge.end_all()
    step(lane)
    assert store.counters(RUN)["done"] == n and reduced == [RUN]
    assert judge.requests == n, "every job was sent once"


def test_a_batch_waits_for_the_reservations_of_the_batches_in_flight(store: Store) -> None:
    judge = Snapshots(store)
    contexts, lane, clock, _ = setup(store, 6, judge)
    store.set_state(RUN, max_cost_usd=0.02)  # room for two jobs' bounds, not three
    buffer_all(store, contexts, 6)
    step(lane)
    (first,) = judge.batches.values()
    assert len(first) == 2
    held = store.lane_reserved(RUN)
    assert 0 < held <= 0.02
    clock.now += 120  # past the flush interval: the buffer is due, but nothing fits
    step(lane)
    step(lane)
    assert len(judge.batches) == 1 and store.state(RUN)["state"] == "running", "it waits, not pauses"
    # another worker (a new process: nothing in memory) sees the same reservation in the store
    other = BatchLane(store, Contexts(lambda p, m: judge), lane.config, lambda r: None, clock=clock)
    step(other)
    assert len(judge.batches) == 1
    judge.end_all()
    step(other)  # ingests the first batch: its reservation goes, its real cost counts
    assert store.counters(RUN)["done"] == 2
    step(other)
    assert len(judge.batches) == 2 and judge.at_send[1][0] == pytest.approx(2 * 0.00075)


def test_a_reservation_of_a_dead_worker_is_held_until_its_batch_is_given_up(store: Store) -> None:
    judge = Snapshots(store)
    contexts, lane, clock, _ = setup(store, 3, judge, creating_timeout=600)
    store.set_state(RUN, max_cost_usd=0.02)
    buffer_all(store, contexts, 3)
    # a worker took two jobs, reserved their cost and died before sending the batch
    assert store.lane_take(RUN, 2, "deadbeef", clock.now) == [0, 1]
    assert store.lane_reserve(RUN, "deadbeef", 0.015)
    step(lane)
    assert judge.batches == {} and store.state(RUN)["state"] == "running", "job 2 waits for it"
    clock.now += 601
    step(lane)  # given up: its reservation is released and its jobs are sent again
    assert store.lane_batch(RUN, "deadbeef")["state"] == "abandoned"  # type: ignore[index]
    assert judge.requests == 2 and judge.at_send[0] == (0.0, store.lane_reserved(RUN))


def test_a_refused_batch_gives_its_reservation_back(store: Store) -> None:
    judge = BatchStub()
    judge.refuse = [judgeq.JudgeOverloaded("529 overloaded")]
    contexts, lane, _, _ = setup(store, 2, judge)
    store.set_state(RUN, max_cost_usd=5.0)
    buffer_all(store, contexts, 2)
    step(lane)
    assert judge.batches == {} and store.lane_reserved(RUN) == 0
    step(lane)
    assert judge.requests == 2 and store.lane_reserved(RUN) > 0
    judge.end_all()
    step(lane)
    assert store.lane_reserved(RUN) == 0 and store.counters(RUN)["done"] == 2


class FailsForNow(BatchStub):
    """A batch judge whose first batch the API fails for the moment (OpenAI's
    ``token_limit_exceeded``), as its first poll says."""

    def __init__(self) -> None:
        super().__init__()
        self.failed_once = False

    def batch_retrieve(self, batch_id: str) -> BatchInfo:
        self.polls += 1
        if not self.failed_once:
            self.failed_once = True
            self.status[batch_id] = "ended"
            why = "token_limit_exceeded: Enqueued token limit reached for gpt-test"
            return BatchInfo(batch_id, "ended", {}, error=why, retryable=True)
        return BatchInfo(batch_id, self.status[batch_id], {})

    def batch_results(self, batch_id: str) -> Iterator[BatchItem]:
        if batch_id == "msgbatch_0":
            raise AssertionError("a batch failed for now has no results to read")
        return super().batch_results(batch_id)


def test_a_batch_failed_for_the_moment_sends_its_jobs_again_later_not_as_nulls(store: Store) -> None:
    """Review of issue 21: OpenAI fails a whole batch when the organisation's enqueued-token limit
    for the model is reached; its jobs are not the problem. They go back to the buffer, no batch
    is sent for the backoff, then they are sent again and graded; no null."""
    judge = FailsForNow()
    contexts, lane, clock, reduced = setup(store, 4, judge, failed_backoff=300.0)
    buffer_all(store, contexts, 4)
    step(lane)  # sent
    assert len(judge.batches) == 1
    step(lane)  # polled: failed for now, jobs back in the buffer
    assert store.lane_counts(RUN)[0] == 4 and store.counters(RUN).get("done", 0) == 0
    for _ in range(3):
        step(lane)
    assert len(judge.batches) == 1, "nothing is sent during the backoff"
    clock.now += 300
    step(lane)
    assert len(judge.batches) == 2 and judge.requests == 8
    judge.end_all()
    step(lane)
    results = [r for r in store.results(RUN, 4) if r is not None]
    assert len(results) == 4 and all(r.status == "graded" for r in results)
    assert reduced == [RUN]


TURN_TEXT = (
    "---\nname: turns\nversion: 1.0.0\nscale: 1-10\ndescription: d\njob: conversation\nscope: turn\n"
    "turns: {aggregate: min}\n---\nGrade the marked turn.\n"
)


def conversation(i: int) -> str:
    """Job ``i``: a conversation of ``i % 3 + 1`` assistant turns (its calls in a turn-by-turn run)."""
    messages: list[dict[str, str]] = []
    for k in range(i % 3 + 1):
        messages += [{"role": "user", "content": f"q{i}.{k}"}, {"role": "assistant", "content": f"a{i}.{k}"}]
    return json.dumps({"id": f"c{i}", "messages": messages, "model": "m"})


def test_conversations_graded_turn_by_turn_go_through_the_lane_whole(store: Store) -> None:
    """A job of N turns is N requests: a batch never holds more than max_requests, and a job is
    graded when all of its own calls are in (jobs differ in calls)."""
    judge = BatchStub()
    n = 7
    contexts, lane, _, reduced = setup(
        store, n, judge, rubric_text=TURN_TEXT, job=conversation, max_requests=5
    )
    buffer_all(store, contexts, n)
    for _ in range(6):
        step(lane)
        judge.end_all()
    turns = [i % 3 + 1 for i in range(n)]
    assert judge.requests == sum(turns)
    assert all(len(requests) <= 5 for requests in judge.batches.values())
    results = sorted((r for r in store.results(RUN, n) if r is not None), key=lambda r: r.index)
    assert [r.status for r in results] == ["graded"] * n and reduced == [RUN]
    assert [len(r.turn_scores or []) for r in results] == turns
    assert all(r.overall == min(r.turn_scores or [0]) and r.batch for r in results)


def test_conversations_a_hard_check_settles_never_wait_in_the_lane(store: Store) -> None:
    """A job with no judge call to make is graded at once, cache or not (it would wait in the
    lane for a batch that never holds it)."""
    judge = BatchStub()
    settle = TURN_TEXT.replace(
        "---\nGrade", "checks:\n  - {check: tool_used, tool: search, hard: true}\n---\nGrade"
    )
    contexts, lane, _, _ = setup(store, 3, judge, rubric_text=settle, job=conversation)
    for i in range(3):
        assert process_job(store, contexts, RUN, i) is not Outcome.BATCHED
    step(lane)
    assert judge.requests == 0 and store.lane_counts(RUN)[:2] == (0, 0)
    results = [r for r in store.results(RUN, 3) if r is not None]
    assert [r.settled_by for r in results] == ["checks"] * 3 and store.counters(RUN)["done"] == 3

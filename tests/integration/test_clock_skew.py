"""Issue 18.8: time decisions shared by machines use one clock, Redis's.

Each test plays several machines in one process against a real redis-server: the process's
wall clock (``time.time``) is set 6 minutes behind while one "machine" writes and 6 minutes
ahead while another decides, and Redis's ``TIME`` stays true. The decisions must be those of
machines whose clocks agree: a healthy run's jobs are not re-sent, a lane batch is neither
flushed early nor given up while it is being created, and status does not call a live
producer gone. No test waits on real time.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from click.testing import CliRunner

import judgeq
from judgeq import Result
from judgeq.grading.request import JudgeRequest
from judgeq.judges.anthropic import messages_kwargs
from judgeq.judges.base import JudgeBase
from judgeq.judges.batches import BatchInfo, BatchItem
from judgeq.pipeline.batch_lane import BatchLane, LaneConfig
from judgeq.pipeline.stages import Contexts, Outcome, process_job
from judgeq.pipeline.timing import stall_after
from judgeq.producer.cli import main
from judgeq.producer.enqueue import register_and_enqueue
from judgeq.producer.plan import make_plan
from judgeq.producer.progress import STOPPED, snapshot
from judgeq.rubric.model import read_rubric_text
from judgeq.runspec import RunSpec
from judgeq.settings import load_settings
from judgeq.store.redis import RedisStore
from judgeq.workers.celery_app import GRADE_TASK
from judgeq.workers.repair import repair_stalled_runs

SIX_MINUTES = 360.0
REAL_TIME = time.time
SETTINGS = load_settings()  # stall after 350 s: less than the 720 s between the two clocks


class Skew:
    """This process's wall clock, ``offset`` seconds off the truth (Redis's TIME stays true)."""

    def __init__(self) -> None:
        self.offset = 0.0

    def __call__(self) -> float:
        return REAL_TIME() + self.offset


@pytest.fixture
def skew(monkeypatch: pytest.MonkeyPatch) -> Skew:
    clock = Skew()
    monkeypatch.setattr(time, "time", clock)
    return clock


@pytest.fixture
def store(redis_url: str) -> Iterator[RedisStore]:
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    yield RedisStore(client)
    client.close()


def graded(index: int) -> Result:
    return Result(
        job_id=f"j{index}",
        index=index,
        status="graded",
        overall=8.0,
        rubric_name="quality",
        rubric_version="1.0.0",
        judge_model="lexical-overlap-v1",
    )


class ListQueue:
    """A dispatcher whose messages the workers took at once (the queue is empty)."""

    def __init__(self) -> None:
        self.sent: list[tuple[int, str]] = []

    def send(self, run_id: str, items: list[tuple[int, str]]) -> None:
        self.sent += items

    def depth(self) -> int:
        return 0


def submit(store: RedisStore, tmp_path: Path, n: int, queue: Any, **settings: Any) -> str:
    path = tmp_path / "batch.jsonl"
    path.write_text(
        "".join(json.dumps({"id": f"j{i}", "input": "q", "output": "a"}) + "\n" for i in range(n))
    )
    s = load_settings(**settings)
    plan = make_plan(jobs_path=path, jobs_name=str(path), rubric_ref="quality", settings=s, judge="lexical")
    register_and_enqueue(plan, store, queue, s)
    return plan.spec.run_id


def repair(store: RedisStore, sent: list[Any]) -> dict[str, int]:
    return repair_stalled_runs(store, SETTINGS, lambda *a: sent.append(a), lambda _q: 0)


# -- the stalled-run repair -----------------------------------------------------------------------


def test_a_worker_whose_clock_runs_ahead_resends_no_healthy_runs_jobs(
    store: RedisStore, skew: Skew, tmp_path: Path
) -> None:
    skew.offset = -SIX_MINUTES  # the producer's machine runs 6 minutes behind
    run_id = submit(store, tmp_path, 20, ListQueue())
    skew.offset = +SIX_MINUTES  # a worker's runs 6 minutes ahead: 12 minutes between them
    sent: list[Any] = []
    assert repair(store, sent) == {} and sent == [], "just started, nothing stored yet: not stalled"

    skew.offset = -SIX_MINUTES  # the worker that grades runs behind
    assert store.store_results(run_id, [graded(i) for i in range(4)]) == [1, 2, 3, 4]
    skew.offset = +SIX_MINUTES
    assert repair(store, sent) == {} and sent == [], "a result just stored: not stalled"


def test_a_stalled_run_is_repaired_even_by_a_worker_whose_clock_runs_behind(
    store: RedisStore, skew: Skew, tmp_path: Path
) -> None:
    run_id = submit(store, tmp_path, 20, ListQueue())
    store.store_results(run_id, [graded(i) for i in range(4)])
    # its last result was stored longer ago than the stall period, on Redis's clock
    store.r.hset(f"judgeq:run:{{{run_id}}}:counters", "last_done_at", store.now() - stall_after(SETTINGS) - 5)
    skew.offset = -SIX_MINUTES
    sent: list[Any] = []
    assert repair(store, sent) == {run_id: 16}
    assert {name for name, _ in sent} == {GRADE_TASK}


# -- status and finalize ----------------------------------------------------------------------------


def test_status_on_a_machine_whose_clock_runs_ahead_does_not_call_a_live_producer_gone(
    store: RedisStore, skew: Skew, tmp_path: Path, redis_url: str
) -> None:
    seen: list[str] = []
    printed: list[str] = []

    class Watched(ListQueue):
        def send(self, run_id: str, items: list[tuple[int, str]]) -> None:
            super().send(run_id, items)
            skew.offset = +SIX_MINUTES  # `judgeq status` on another machine, mid-enqueue
            snap = snapshot(store, run_id)
            assert snap is not None
            seen.append(snap.state)
            out = CliRunner().invoke(main, ["status", run_id, "--redis-url", redis_url])
            assert out.exit_code == 0, out.output
            printed.append(out.output)
            skew.offset = -SIX_MINUTES  # back on the producer's machine

    skew.offset = -SIX_MINUTES
    submit(store, tmp_path, 30, Watched(), enqueue_chunk=10)
    assert seen == ["enqueuing"] * 3
    assert all(STOPPED not in text and "enqueuing" in text for text in printed)


def test_finalize_on_a_machine_whose_clock_runs_ahead_refuses_a_run_still_progressing(
    store: RedisStore, skew: Skew, tmp_path: Path, redis_url: str
) -> None:
    skew.offset = -SIX_MINUTES  # producer and worker run behind
    run_id = submit(store, tmp_path, 20, ListQueue())
    store.store_results(run_id, [graded(i) for i in range(4)])
    skew.offset = +SIX_MINUTES  # the operator's machine runs ahead
    out = CliRunner().invoke(main, ["finalize", run_id, "--redis-url", redis_url, "--out", str(tmp_path)])
    assert out.exit_code == 2, out.output
    assert "stored a result" in out.output and "workers may still be grading" in out.output
    assert store.report(run_id) is None and store.counters(run_id)["done"] == 4


# -- the Message Batches lane -------------------------------------------------------------------


MODEL = "claude-haiku-4-5"


class BatchStub(JudgeBase):
    """A batch judge; ``during_create`` runs while a batch is being uploaded."""

    provider = "anthropic"
    model = MODEL

    def as_batch_judge(self) -> BatchStub:
        return self

    def __init__(self) -> None:
        self.batches: dict[str, int] = {}
        self.canceled: list[str] = []
        self.during_create: Any = None

    def complete(self, request: JudgeRequest, *, timeout: float) -> judgeq.JudgeReply:
        raise AssertionError("the batch lane makes no live judge call")

    def batch_params(self, request: JudgeRequest) -> dict[str, Any]:
        return messages_kwargs(request, self.model)

    def batch_create(self, requests: list[tuple[str, dict[str, Any]]]) -> BatchInfo:
        if self.during_create is not None:
            self.during_create()
        batch_id = f"msgbatch_{len(self.batches)}"
        self.batches[batch_id] = len(requests)
        return BatchInfo(batch_id, "in_progress", {"processing": len(requests)})

    def batch_retrieve(self, batch_id: str) -> BatchInfo:
        return BatchInfo(batch_id, "in_progress", {})

    def batch_cancel(self, batch_id: str) -> BatchInfo:
        self.canceled.append(batch_id)
        return BatchInfo(batch_id, "ended", {})

    def batch_results(self, batch_id: str) -> Iterator[BatchItem]:
        return iter(())


def lane_run(store: RedisStore, n: int, enqueue: str) -> RunSpec:
    text, source = read_rubric_text("quality")
    spec = RunSpec(
        run_id="lane-run",
        rubric_text=text,
        rubric_source=source,
        judge_provider="anthropic",
        judge_model=MODEL,
        total=n,
        lane="batch",
    )
    store.register(spec)
    store.put_jobs(
        spec.run_id, [(i, json.dumps({"id": f"r{i}", "input": "q", "output": "a"})) for i in range(n)]
    )
    store.set_state(spec.run_id, state="running", enqueue=enqueue)
    store.lane_track(spec.run_id, True)
    return spec


def test_a_worker_whose_clock_runs_ahead_does_not_flush_a_young_buffer(store: RedisStore, skew: Skew) -> None:
    judge = BatchStub()
    spec = lane_run(store, 10, enqueue="enqueuing")  # more jobs may come: only age or size send
    contexts = Contexts(lambda provider, model: judge)
    skew.offset = -SIX_MINUTES  # the worker that buffers the jobs runs behind
    for i in range(3):
        assert process_job(store, contexts, spec.run_id, i) is Outcome.BATCHED
    skew.offset = +SIX_MINUTES  # the worker whose lane loop ticks runs ahead
    lane = BatchLane(store, contexts, LaneConfig(flush_interval=60.0), lambda run_id: None)
    lane.tick()
    assert judge.batches == {}, "the oldest job has waited seconds, not the 60 s flush interval"
    assert store.lane_counts(spec.run_id)[:2] == (3, 3)


def test_a_worker_whose_clock_runs_ahead_does_not_give_up_a_batch_being_created(
    store: RedisStore, skew: Skew
) -> None:
    judge = BatchStub()
    spec = lane_run(store, 3, enqueue="done")
    config = LaneConfig(creating_timeout=600.0)
    sender = BatchLane(store, Contexts(lambda provider, model: judge), config, lambda run_id: None)
    other = BatchLane(store, Contexts(lambda provider, model: judge), config, lambda run_id: None)
    skew.offset = -SIX_MINUTES  # the sending worker runs behind
    for i in range(3):
        assert process_job(store, sender.contexts, spec.run_id, i) is Outcome.BATCHED

    def another_worker_ticks() -> None:  # while the upload is under way, 12 minutes ahead
        skew.offset = +SIX_MINUTES
        other.tick()
        skew.offset = -SIX_MINUTES

    # a lane built as a worker builds it reads Redis's clock (a default bound to time.time would
    # escape the patched clock above, and follow a skewed machine's clock in production)
    assert sender.clock == store.now and other.clock == store.now
    judge.during_create = another_worker_ticks
    assert sender.flush(spec, judge)
    (record,) = store.lane_batches(spec.run_id)
    assert record["state"] == "in_progress", record.get("error")
    assert judge.batches == {"msgbatch_0": 3} and judge.canceled == [], "sent once, not paid twice"
    assert store.lane_counts(spec.run_id)[:2] == (0, 3)

"""The stalled-run repair over a fakeredis store: when it re-sends, and when it must not."""

from __future__ import annotations

import json
import time
from pathlib import Path

import fakeredis
import pytest

from judgeq import Result
from judgeq.pipeline.timing import stall_after
from judgeq.rubric.model import read_rubric_text
from judgeq.runspec import RunSpec
from judgeq.settings import load_settings
from judgeq.store.redis import RedisStore
from judgeq.workers.celery_app import GRADE_TASK, REDUCE_TASK
from judgeq.workers.repair import repair_stalled_runs

SETTINGS = load_settings(visibility_timeout=10)  # stall after 10 + 2 x 1.67 + 10 s


def depth(queue: str) -> int:
    return 0


@pytest.fixture
def store() -> RedisStore:
    return RedisStore(fakeredis.FakeRedis(decode_responses=True))


def setup_run(
    store: RedisStore, total: int = 20, done: int = 4, state: str = "running", provider: str = "lexical"
) -> None:
    text, source = read_rubric_text("quality")
    spec = RunSpec(
        run_id="r1",
        rubric_text=text,
        rubric_source=source,
        judge_provider=provider,
        judge_model="lexical-overlap-v1" if provider == "lexical" else "claude-x",
        total=total,
    )
    store.register(spec)
    store.set_state(
        "r1",
        state="running",
        enqueue="enqueuing" if state == "enqueuing" else "done",
        started_epoch=time.time(),
    )
    if state not in ("running", "enqueuing"):
        store.set_state("r1", state=state)
    store.put_jobs("r1", [(i, json.dumps({"id": f"job-{i}"})) for i in range(total)])
    for i in range(done):
        store.store_result(
            "r1",
            Result(
                job_id=f"job-{i}",
                index=i,
                status="graded",
                overall=5.0,
                rubric_name="quality",
                rubric_version="1.0.0",
                judge_model="x",
            ),
        )


def test_stalled_run_gets_its_pending_jobs_again(store: RedisStore) -> None:
    setup_run(store)
    sent: list[tuple[str, list]] = []
    later = time.time() + stall_after(SETTINGS) + 1
    assert repair_stalled_runs(store, SETTINGS, lambda *a: sent.append(a), depth, now=later) == {"r1": 16}
    assert [name for name, _ in sent] == [GRADE_TASK, GRADE_TASK]
    assert [len(args[1]) for _, args in sent] == [8, 8]
    assert sent[0][1][1][:2] == [4, 5] and sent[0][1][2][:2] == ["job-4", "job-5"]
    # one repair per stall period, across workers
    assert repair_stalled_runs(store, SETTINGS, lambda *a: sent.append(a), depth, now=later) == {}


def test_no_repair_before_the_stall_period(store: RedisStore) -> None:
    setup_run(store)
    soon = time.time() + stall_after(SETTINGS) - 5
    assert repair_stalled_runs(store, SETTINGS, lambda *a: None, depth, now=soon) == {}


def test_no_repair_while_messages_wait_or_enqueuing_or_done(store: RedisStore) -> None:
    setup_run(store, state="enqueuing")
    later = time.time() + stall_after(SETTINGS) + 1
    assert repair_stalled_runs(store, SETTINGS, lambda *a: None, lambda q: store.r.llen(q), now=later) == {}
    store.set_state("r1", enqueue="done")
    store.r.rpush(SETTINGS.queue, "a message")
    assert repair_stalled_runs(store, SETTINGS, lambda *a: None, lambda q: store.r.llen(q), now=later) == {}
    store.r.delete(SETTINGS.queue)
    store.set_state("r1", state="finished")
    assert repair_stalled_runs(store, SETTINGS, lambda *a: None, lambda q: store.r.llen(q), now=later) == {}


def test_a_complete_run_with_its_report_is_left_alone(store: RedisStore) -> None:
    setup_run(store, total=4, done=4)
    store.save_report("r1", {"counts": {}})
    later = time.time() + stall_after(SETTINGS) + 1
    assert repair_stalled_runs(store, SETTINGS, lambda *a: None, lambda q: store.r.llen(q), now=later) == {}


def test_a_complete_run_without_a_report_gets_its_reducer_once_per_stall_period(store: RedisStore) -> None:
    setup_run(store, total=4, done=4)  # the worker's reduce message was lost
    sent: list[tuple[str, list]] = []
    soon = time.time() + stall_after(SETTINGS) - 5
    assert repair_stalled_runs(store, SETTINGS, lambda *a: sent.append(a), depth, now=soon) == {}
    later = time.time() + stall_after(SETTINGS) + 1
    assert repair_stalled_runs(store, SETTINGS, lambda *a: sent.append(a), depth, now=later) == {"r1": 0}
    assert sent == [(REDUCE_TASK, ["r1"])]
    assert repair_stalled_runs(store, SETTINGS, lambda *a: sent.append(a), depth, now=later) == {}
    assert len(sent) == 1


def test_a_lost_reducer_is_sent_again_while_other_runs_fill_the_queue(store: RedisStore) -> None:
    setup_run(store, total=4, done=4)  # its reduce message was lost; other runs' jobs wait
    store.r.rpush(SETTINGS.queue, *["another run's job"] * 50)
    sent: list[tuple[str, list]] = []
    later = time.time() + stall_after(SETTINGS) + 1
    busy = lambda q: store.r.llen(q)  # noqa: E731
    assert repair_stalled_runs(store, SETTINGS, lambda *a: sent.append(a), busy, now=later) == {"r1": 0}
    assert sent == [(REDUCE_TASK, ["r1"])]


def test_a_paused_run_is_left_alone(store: RedisStore) -> None:
    setup_run(store)
    assert store.pause("r1", "auth_error: refused")
    later = time.time() + stall_after(SETTINGS) + 1
    assert repair_stalled_runs(store, SETTINGS, lambda *a: None, depth, now=later) == {}


def test_the_bounds_the_readme_states() -> None:
    """The manual: lost jobs re-sent after 350 s without progress; a missing report healed within 380 s."""
    from judgeq.pipeline.timing import check_interval

    defaults = load_settings()
    assert stall_after(defaults) == 350.0
    assert stall_after(defaults) + check_interval(defaults) == 380.0
    docs = Path(__file__).parent.parent.parent / "docs"
    readme = "".join(page.read_text() for page in sorted(docs.glob("*.md")))  # (the manual)
    assert "350 s by default" in readme and "**380 s** of its last result" in readme


def test_a_routed_run_is_judged_by_its_own_queue(store: RedisStore) -> None:
    # an Anthropic run's messages wait in judgeq.anthropic: other queues' messages neither hold
    # its repair back nor do its own waiting messages let it be declared lost
    setup_run(store, provider="anthropic")
    later = time.time() + stall_after(SETTINGS) + 1
    own = f"{SETTINGS.queue}.anthropic"
    asked: list[str] = []

    def depth_of(queue: str) -> int:
        asked.append(queue)
        return int(store.r.llen(queue))

    store.r.rpush(own, "its message")
    assert repair_stalled_runs(store, SETTINGS, lambda *a: None, depth_of, now=later) == {}
    assert asked == [own]
    store.r.delete(own)
    store.r.rpush(SETTINGS.queue, *["another run's job"] * 5)
    sent: list[tuple[str, list]] = []
    assert repair_stalled_runs(store, SETTINGS, lambda *a: sent.append(a), depth_of, now=later) == {"r1": 16}
    assert {name for name, _ in sent} == {GRADE_TASK}

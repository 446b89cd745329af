"""The producer's enqueue: chunks, back-pressure on queue depth, re-submission."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from judgeq import ConfigError, MemoryStore, load_settings
from judgeq.producer.enqueue import register_and_enqueue
from judgeq.producer.plan import make_plan


class SlowQueue:
    """A dispatcher whose queue drains by 40 jobs every time the producer sleeps."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, int, str]] = []
        self.waiting = 0
        self.max_seen = 0

    def send(self, run_id: str, items: list[tuple[int, str]]) -> None:
        self.sent += [(run_id, i, j) for i, j in items]
        self.waiting += len(items)
        self.max_seen = max(self.max_seen, self.waiting)

    def depth(self) -> int:
        return self.waiting

    def drain(self, _seconds: float) -> None:
        self.waiting = max(0, self.waiting - 40)


def batch(tmp_path: Path, n: int) -> Path:
    path = tmp_path / "b.jsonl"
    path.write_text(
        "".join(json.dumps({"id": f"j{i}", "input": "q", "output": "a"}) + "\n" for i in range(n))
    )
    return path


def plan_for(path: Path, settings, run_id: str | None = None):  # type: ignore[no-untyped-def]
    return make_plan(
        batch_path=path,
        batch_name=str(path),
        rubric_ref="quality",
        settings=settings,
        judge="lexical",
        run_id=run_id,
    )


def test_back_pressure_bounds_the_queue(tmp_path: Path) -> None:
    settings = load_settings(max_queue_depth=100, enqueue_chunk=25)
    store, queue = MemoryStore(), SlowQueue()
    plan = plan_for(batch(tmp_path, 1000), settings)
    stats = register_and_enqueue(plan, store, queue, settings, sleep=queue.drain)
    assert stats.enqueued == 1000 and stats.paused_s > 0
    assert queue.max_seen <= 100 + 25  # never more than the bound plus one chunk
    assert [i for _, i, _ in queue.sent] == list(range(1000))
    assert store.state(plan.spec.run_id)["enqueue"] == "done"
    assert store.state(plan.spec.run_id)["enqueued"] == "1000"


def test_resubmission_sends_only_what_was_never_sent(tmp_path: Path) -> None:
    settings = load_settings(enqueue_chunk=10)
    store, queue = MemoryStore(), SlowQueue()
    path = batch(tmp_path, 50)
    plan = plan_for(path, settings, run_id="again")
    register_and_enqueue(plan, store, queue, settings, sleep=queue.drain)
    # the first producer died after 30 jobs: pretend so, then re-submit
    store.set_state("again", enqueue="enqueuing", enqueued=30)
    queue2 = SlowQueue()
    stats = register_and_enqueue(plan_for(path, settings, run_id="again"), store, queue2, settings)
    assert [i for _, i, _ in queue2.sent] == list(range(30, 50))
    assert stats.skipped == 30


def test_resubmission_with_other_settings_is_refused(tmp_path: Path) -> None:
    settings = load_settings()
    store, queue = MemoryStore(), SlowQueue()
    path = batch(tmp_path, 5)
    register_and_enqueue(plan_for(path, settings, run_id="r"), store, queue, settings)
    other = load_settings(judge_deadline=60)
    with pytest.raises(ConfigError, match=r"judge_deadline 120\.0"):
        register_and_enqueue(plan_for(path, other, run_id="r"), store, queue, other)

"""The producer's enqueue: chunks, back-pressure on queue depth, re-submission."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest

from judgeq import ConfigError
from judgeq.producer.enqueue import HEARTBEAT_EVERY, register_and_enqueue
from judgeq.producer.plan import make_plan
from judgeq.producer.progress import PRODUCER_GONE_AFTER, STOPPED, snapshot, state_text
from judgeq.settings import load_settings
from judgeq.store.base import MemoryStore


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
        jobs_path=path,
        jobs_name=str(path),
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


# -- issue 9.7: the producer's heartbeat ----------------------------------------------------


class Clock:
    """Fake epoch time: only ``sleep`` (or ``tick``) moves it."""

    def __init__(self, t: float = 1_700_000_000.0, tick: float = 0.0) -> None:
        self.t, self.tick = t, tick

    def __call__(self) -> float:
        self.t += self.tick
        return self.t

    def sleep(self, seconds: float) -> None:
        self.t += seconds


class Died(BaseException):
    """The producer process is killed (nothing after it runs)."""


class DyingQueue(SlowQueue):
    """Accepts ``chunks`` sends, then the producer dies in the middle of the next one."""

    def __init__(self, chunks: int) -> None:
        super().__init__()
        self.chunks = chunks

    def send(self, run_id: str, items: list[tuple[int, str]]) -> None:
        if self.chunks == 0:
            raise Died
        self.chunks -= 1
        super().send(run_id, items)


def test_a_producer_killed_mid_enqueue_is_shown_stopped_and_a_resubmit_revives_it(tmp_path: Path) -> None:
    settings = load_settings(enqueue_chunk=25)
    clock = Clock()
    store = MemoryStore(clock=clock)  # the store's clock: what the heartbeat is written on
    path = batch(tmp_path, 100)
    with pytest.raises(Died):
        register_and_enqueue(
            plan_for(path, settings, run_id="dead"), store, DyingQueue(2), settings, clock=clock
        )
    died_at = clock.t
    assert float(store.state("dead")["producer_heartbeat"]) == died_at
    soon = snapshot(store, "dead", now=died_at + PRODUCER_GONE_AFTER)
    assert soon is not None and soon.state == "enqueuing" and soon.enqueued == 50
    later = snapshot(store, "dead", now=died_at + PRODUCER_GONE_AFTER + 1)
    assert later is not None and later.state == STOPPED
    assert state_text(later) == (
        "stopped while enqueuing (50/100 sent; the producer is gone: re-run the same submit with "
        "--run-id dead to send the rest)"
    )
    # the same submit again, much later: shown alive from its start, then fully enqueued
    clock.t += 3600
    seen: list[str] = []

    class Watching(SlowQueue):
        def send(self, run_id: str, items: list[tuple[int, str]]) -> None:
            seen.append(snapshot(store, run_id, now=clock.t).state)  # type: ignore[union-attr]
            super().send(run_id, items)

    queue = Watching()
    stats = register_and_enqueue(plan_for(path, settings, run_id="dead"), store, queue, settings, clock=clock)
    assert stats.enqueued == 50 and [i for _, i, _ in queue.sent] == list(range(50, 100))
    assert seen == ["enqueuing", "enqueuing"]
    final = snapshot(store, "dead", now=clock.t + 86400)
    assert final is not None and final.state == "running" and final.enqueued == 100


def test_the_producer_beats_while_it_waits_on_back_pressure(tmp_path: Path) -> None:
    """A queue that stays full for 10 minutes: the producer waits, and is never shown as gone."""
    settings = load_settings(max_queue_depth=10, enqueue_chunk=10)
    clock = Clock()
    store = MemoryStore(clock=clock)  # the store's clock: what the heartbeat is written on
    start = clock.t
    states: list[str] = []

    class Stuck(SlowQueue):
        def depth(self) -> int:
            return self.waiting if clock.t - start < 600 else 0

    def sleep(seconds: float) -> None:
        clock.sleep(seconds)
        snap = snapshot(store, plan.spec.run_id, now=clock.t)
        assert snap is not None
        states.append(snap.state)

    plan = plan_for(batch(tmp_path, 30), settings)
    stats = register_and_enqueue(plan, store, Stuck(), settings, sleep=sleep, clock=clock)
    assert stats.enqueued == 30 and stats.paused_s >= 600
    assert set(states) == {"enqueuing (paused: queue full)"}  # never "stopped while enqueuing"
    assert float(store.state(plan.spec.run_id)["producer_heartbeat"]) == clock.t


def test_the_producer_beats_while_it_reads_a_long_batch(tmp_path: Path) -> None:
    """One chunk that takes long to read: a heartbeat at least every HEARTBEAT_EVERY seconds."""
    settings = load_settings(enqueue_chunk=1000)
    clock = Clock(tick=3.0)  # every clock reading is 3 s later
    beats: list[float] = []

    class Recording(MemoryStore):
        def set_state(self, run_id: str, **fields: object) -> None:
            if "producer_heartbeat" in fields:
                beats.append(float(fields["producer_heartbeat"]))  # type: ignore[arg-type]
            super().set_state(run_id, **fields)

    store = Recording(clock=clock)
    register_and_enqueue(plan_for(batch(tmp_path, 100), settings), store, SlowQueue(), settings, clock=clock)
    assert len(beats) > 10
    assert max(b - a for a, b in itertools.pairwise(beats)) <= HEARTBEAT_EVERY + 3.0


def test_a_run_is_routed_to_the_queue_of_the_providers_it_needs() -> None:
    # (issue 29: a mixed fleet bounced jobs: 2 Anthropic-only workers took an OpenAI run's
    # messages and sent them back, 2,121 times in one run)
    from judgeq.pipeline.messages import all_queues, grade_queue, is_routed, routed, worker_queues

    assert grade_queue("judgeq", [("lexical", "x")]) == "judgeq"
    assert grade_queue("judgeq", [("openai", "gpt"), ("anthropic", "c"), ("openai", "mini")]) == (
        "judgeq.anthropic+openai"
    )
    anthropic_only = worker_queues("judgeq", ["anthropic", "lexical"])
    both = worker_queues("judgeq", ["openai", "anthropic", "lexical"])
    assert anthropic_only == ["judgeq", "judgeq.anthropic"]
    assert set(both) == {"judgeq", "judgeq.anthropic", "judgeq.openai", "judgeq.anthropic+openai"}
    # a run reaches exactly the workers that can call every judge it needs
    for judges, takers in [
        ([("openai", "gpt")], [both]),
        ([("anthropic", "c")], [anthropic_only, both]),
        ([("anthropic", "c"), ("openai", "g")], [both]),
        ([("lexical", "")], [anthropic_only, both]),
    ]:
        queue = grade_queue("judgeq", judges)
        assert [q for q in (anthropic_only, both) if queue in q] == takers, judges
    assert not is_routed("judgeq") and is_routed("judgeq.openai") and is_routed("a.b.anthropic+openai")
    # every set of the providers that call an API: 2 ** (their number) queues, the base one first
    assert not is_routed("judgeq.staging") and len(all_queues("judgeq")) == 2 ** len(routed())

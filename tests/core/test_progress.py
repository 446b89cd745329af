"""The live progress line of --wait and the status snapshot."""

from __future__ import annotations

import io
from datetime import UTC, datetime

import pytest

from judgeq.jobs.kinds import make_result
from judgeq.producer.progress import (
    PRODUCER_GONE_AFTER,
    STOPPED,
    Snapshot,
    eta_text,
    progress_line,
    snapshot,
    state_text,
    stopped_text,
    wait_for_report,
)
from judgeq.rubric.model import read_rubric_text
from judgeq.runspec import RunSpec
from judgeq.store.base import MemoryStore


def test_progress_line_shows_counts_rate_eta_and_nulls() -> None:
    snap = Snapshot(
        run_id="r",
        state="running",
        total=200,
        done=50,
        enqueued=200,
        nulls={"timeout": 2, "parse_error": 1},
        rate=12.5,
        eta_s=12.0,
    )
    line = progress_line(snap)
    assert "50/200" in line and " 25.0%" in line and "12.5 jobs/s" in line
    assert "ETA 12s" in line and "nulls 3" in line and "hit@1" not in line


def test_progress_line_shows_running_retrieval_metrics() -> None:
    snap = Snapshot(
        run_id="r",
        state="running",
        total=10,
        done=4,
        enqueued=10,
        nulls={},
        rate=None,
        eta_s=None,
        questions=4,
        hit1=3,
        rr_sum=3.5,
        pass7=2,
    )
    line = progress_line(snap)
    assert "hit@1 75.0%" in line and "MRR 0.875" in line and "pass@7 50.0%" in line


def test_snapshot_and_wait_from_a_store() -> None:
    store = MemoryStore()
    text, source = read_rubric_text("retrieval-relevance")
    store.register(
        RunSpec(
            run_id="r",
            rubric_text=text,
            rubric_source=source,
            judge_provider="lexical",
            judge_model="x",
            total=2,
        )
    )
    store.set_state("r", state="running", enqueue="enqueuing", enqueued=1)
    for i, (rank, total_score) in enumerate([(1, 9.0), (2, 6.65)]):
        store.store_result(
            "r",
            make_result(
                job_id=f"q{i}",
                index=i,
                kind="question",
                status="graded",
                overall=9.0,
                rank=rank,
                total_score=total_score,
                rubric_name="retrieval-relevance",
                rubric_version="1.0.0",
                judge_model="x",
            ),
        )
    snap = snapshot(store, "r")
    assert snap is not None and snap.state == "enqueuing" and snap.done == 2
    assert (snap.questions, snap.hit1, snap.rr_sum, snap.pass7) == (2, 1, 1.5, 1)
    store.save_report("r", {"run_id": "r"})
    out = io.StringIO()
    assert wait_for_report(store, "r", stream=out, sleep=lambda _: None) == {"run_id": "r"}


# -- issue 9.7: a finished run's final rate; a producer that died mid-enqueue ------------------

T0 = 1_700_000_000.0  # an arbitrary epoch: every test below drives time through ``now``


def iso(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def response_run(store: MemoryStore, run_id: str, total: int, done: int) -> None:
    text, source = read_rubric_text("quality")
    store.register(
        RunSpec(
            run_id=run_id,
            rubric_text=text,
            rubric_source=source,
            judge_provider="lexical",
            judge_model="x",
            total=total,
        )
    )
    for i in range(done):
        store.store_result(
            run_id,
            make_result(
                job_id=f"j{i}",
                index=i,
                status="graded",
                overall=8.0,
                rubric_name="quality",
                rubric_version="1.0.0",
                judge_model="x",
            ),
        )


def test_a_finished_run_keeps_its_final_rate() -> None:
    store = MemoryStore()
    response_run(store, "r", total=50, done=50)
    store.set_state("r", state="running", enqueue="done", enqueued=50, started_epoch=T0)
    running = snapshot(store, "r", now=T0 + 50)
    assert running is not None and running.rate == 1.0  # still running: jobs / (now - started)
    store.set_state("r", state="finished", finished_at=iso(T0 + 100))
    for later in (T0 + 100, T0 + 3600, T0 + 7 * 86400):  # the rate no longer decays with time
        snap = snapshot(store, "r", now=later)
        assert snap is not None and snap.state == "finished"
        assert snap.rate == pytest.approx(0.5) and snap.eta_s == 0.0
        assert "0.5 jobs/s" in progress_line(snap)


def test_an_incomplete_run_rate_uses_its_finished_at_too() -> None:
    store = MemoryStore()
    response_run(store, "r", total=10, done=8)
    store.set_state("r", state="incomplete", started_epoch=T0, finished_at=iso(T0 + 16))
    snap = snapshot(store, "r", now=T0 + 10_000)
    assert snap is not None and snap.rate == pytest.approx(0.5) and snap.eta_s == 0.0


def test_a_canceled_runs_rate_counts_only_the_jobs_it_graded() -> None:
    # 10 graded in 20 s, then canceled: its 90 canceled nulls took no time (old: 5 jobs/s)
    store = MemoryStore()
    response_run(store, "r", total=100, done=10)
    for i in range(10, 100):
        store.store_result(
            "r",
            make_result(job_id=f"j{i}", index=i, status="null", null_reason="canceled", rubric_name="quality",
                   rubric_version="1.0.0", judge_model="x"),
        )  # fmt: skip
    store.set_state("r", state="canceled", started_epoch=T0, finished_at=iso(T0 + 20))
    snap = snapshot(store, "r", now=T0 + 100)
    assert snap is not None and snap.done == 100 and snap.rate == pytest.approx(0.5)


def enqueuing_run(store: MemoryStore, **state: object) -> None:
    response_run(store, "dead", total=100, done=10)
    fields: dict[str, object] = dict(
        state="running", enqueue="enqueuing", enqueued=50, started_epoch=T0, producer_heartbeat=T0 + 5
    )
    fields.update(state)
    store.set_state("dead", **fields)


def test_a_producer_gone_for_longer_than_the_bound_is_shown_stopped() -> None:
    store = MemoryStore()
    enqueuing_run(store)
    alive = snapshot(store, "dead", now=T0 + 5 + PRODUCER_GONE_AFTER)
    assert alive is not None and alive.state == "enqueuing" and not alive.producer_gone
    gone = snapshot(store, "dead", now=T0 + 5 + PRODUCER_GONE_AFTER + 1)
    assert gone is not None and gone.state == STOPPED == "stopped while enqueuing" and gone.producer_gone
    expected = (
        "stopped while enqueuing (50/100 sent; the producer is gone: re-run the same submit "
        "with --run-id dead to send the rest)"
    )
    assert state_text(gone) == expected and stopped_text(gone) == expected
    assert expected in progress_line(gone) and "enqueuing (" not in progress_line(gone).replace(expected, "")
    # no ETA: the run cannot finish until its other jobs are sent (issue 29: it showed one)
    assert "ETA – (not all jobs sent)" in progress_line(gone) and eta_text(gone) == "– (not all jobs sent)"
    assert eta_text(alive) != eta_text(gone)
    # a producer killed while it waited on a full queue is gone too
    store.set_state("dead", enqueue="paused")
    paused = snapshot(store, "dead", now=T0 + 1000)
    assert paused is not None and paused.state == STOPPED
    assert snapshot(store, "dead", now=T0 + 10).state == "enqueuing (paused: queue full)"  # type: ignore[union-attr]


def test_no_heartbeat_or_fully_enqueued_is_never_stopped() -> None:
    store = MemoryStore()
    enqueuing_run(store, producer_heartbeat="")  # an older producer: nothing tells, so enqueuing
    assert snapshot(store, "dead", now=T0 + 86400).state == "enqueuing"  # type: ignore[union-attr]
    store.set_state("dead", producer_heartbeat=T0, enqueue="done", enqueued=100)
    done = snapshot(store, "dead", now=T0 + 86400)
    assert done is not None and done.state == "running" and not done.producer_gone
    store.set_state("dead", enqueue="enqueuing", state="finished", finished_at=iso(T0 + 50))
    over = snapshot(store, "dead", now=T0 + 86400)  # finalized with --force: over, not stopped
    assert over is not None and over.state == "finished" and not over.producer_gone


def test_a_paused_run_keeps_its_reason_even_when_its_producer_is_gone() -> None:
    store = MemoryStore()
    enqueuing_run(store)
    assert store.pause("dead", "the judge refused the API key (auth_error)")
    snap = snapshot(store, "dead", now=T0 + 1000)
    assert snap is not None and snap.state == "paused" and snap.producer_gone
    assert snap.pause_reason == "the judge refused the API key (auth_error)"
    assert "PAUSED: the judge refused the API key (auth_error)" in progress_line(snap)
    assert "judgeq resume dead" in progress_line(snap)


def test_the_reducer_is_nudged_less_often_while_a_long_reduce_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every job done, no report yet: nudge after 20 s, then 40, 80, 160, 320, 320 s apart
    (a million-result reduce takes a minute; a nudge every 20 s would queue duplicate reduces)."""
    import judgeq.producer.progress as progress

    store = MemoryStore()
    response_run(store, "r", total=3, done=3)
    clock = [0.0]
    monkeypatch.setattr(progress.time, "monotonic", lambda: clock[0])
    nudges: list[float] = []

    def sleep(seconds: float) -> None:
        clock[0] += 1.0  # one simulated second per poll, whatever the interval asked
        if clock[0] >= 1300:
            store.save_report("r", {"run_id": "r"})

    report = wait_for_report(
        store, "r", stream=io.StringIO(), nudge=lambda: nudges.append(clock[0]), sleep=sleep
    )
    assert report == {"run_id": "r"}
    gaps = [b - a for a, b in zip([0.0, *nudges], nudges, strict=False)]
    assert gaps == [20.0, 40.0, 80.0, 160.0, 320.0, 320.0, 320.0]


def test_status_says_when_no_worker_consumes_the_queue_or_none_finishes_a_job() -> None:
    from types import SimpleNamespace

    import fakeredis

    from judgeq.producer.cli.status import WORKERS_QUIET_AFTER, worker_lines
    from judgeq.store.redis import RedisStore

    store = RedisStore(fakeredis.FakeRedis(decode_responses=True))
    snap = SimpleNamespace(last_done_s=5.0, lane="", total=10, done=4)
    (line,) = worker_lines(store, "judgeq", snap)
    assert line.startswith("WARNING: no worker is consuming queue 'judgeq'")
    store.worker_heartbeat("judgeq", "w1@host", 30)
    store.worker_heartbeat("other", "w2@host", 30)  # another queue's worker does not count
    assert worker_lines(store, "judgeq", snap) == ["workers  1 consuming queue 'judgeq'"]
    quiet = SimpleNamespace(last_done_s=WORKERS_QUIET_AFTER + 60, lane="", total=10, done=4)
    lines = worker_lines(store, "judgeq", quiet)
    assert len(lines) == 2 and lines[1].startswith("WARNING: no job has been finished for 3m")
    assert "6 wait" in lines[1]
    # a Message Batches run waits on its batches, not on the workers: no warning
    assert (
        len(worker_lines(store, "judgeq", SimpleNamespace(**{**vars(quiet), "lane": "1 in_progress"}))) == 1
    )

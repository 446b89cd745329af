"""The live progress line of --wait and the status snapshot."""

from __future__ import annotations

import io
import json

from judgeq import MemoryStore, Result
from judgeq._rubric import read_rubric_text
from judgeq._run import RunSpec
from judgeq.producer.progress import Snapshot, progress_line, snapshot, wait_for_report


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
            Result(
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
    assert json.dumps(store.report("r")) == '{"run_id": "r"}'

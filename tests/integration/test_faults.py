"""Fault tolerance with real parts: killed workers, a Redis restart, judge faults at scale, a
lost reducer, lost messages (finalize) and redelivery. Quick variants of benchmarks/chaos.py."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from judgeq.testing.fake_anthropic import FakeMessagesAPI
from judgeq.testing.faults import expected_nulls, fault_plan, response_rows

from .harness import SUBMIT, RedisServer, Worker, judgeq_cli, strip_volatile, write_batch

pytestmark = pytest.mark.integration

FAST = {"JUDGEQ_JUDGE_TIMEOUT": "1", "JUDGEQ_JUDGE_DEADLINE": "3", "JUDGEQ_VISIBILITY_TIMEOUT": "6"}


def start_submit(batch: Path, env: dict[str, str], out: Path, *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "judgeq", "submit", str(batch), *SUBMIT, "--wait", "--out", str(out), *extra],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def finish(proc: subprocess.Popen[str], out: Path, timeout: float = 180) -> tuple[str, dict]:
    stdout, stderr = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, stderr[-3000:]
    run_id = stdout.splitlines()[0].strip()
    return run_id, json.loads((out / run_id / "report.json").read_text())


def verdict_ids(out: Path, run_id: str) -> list[str]:
    return [json.loads(x)["job_id"] for x in (out / run_id / "verdicts.jsonl").read_text().splitlines()]


def embedded_report(batch: Path, env: dict[str, str], out: Path) -> dict:
    proc = judgeq_cli("run", str(batch), *SUBMIT, "--out", str(out), env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    (run_dir,) = out.iterdir()
    return json.loads((run_dir / "report.json").read_text())


def wait_for(predicate: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(what)
        time.sleep(0.05)


def test_killed_workers_lose_nothing_and_count_nothing_twice(
    tmp_path: Path,
    env: dict[str, str],
    fake_api: FakeMessagesAPI,
    redis_server: RedisServer,
    start_worker: Callable[..., Worker],
) -> None:
    env = {**env, **FAST}
    fake_api.latency = 0.05
    batch = write_batch(tmp_path / "b.jsonl", response_rows(400))
    start_worker("steady", env=FAST)
    victim = start_worker("victim", env=FAST)
    proc = start_submit(batch, env, tmp_path / "out")
    client = redis_server.client()
    for _ in range(2):
        # kill while it holds work: after some results exist, before the run is done
        wait_for(
            lambda: sum(int(float(v)) for k, v in _counters(client).items() if k == "done") >= 60,
            60,
            "progress",
        )
        victim.kill()
        time.sleep(0.5)
        victim.start()
    run_id, report = finish(proc, tmp_path / "out")
    ids = verdict_ids(tmp_path / "out", run_id)
    assert len(ids) == len(set(ids)) == 400
    assert report["counts"]["graded"] == 400 and report["counts"]["null"] == 0
    undisturbed = embedded_report(batch, env, tmp_path / "emb")
    assert strip_volatile(report) == strip_volatile(undisturbed)


def _counters(client) -> dict[str, str]:  # type: ignore[no-untyped-def]
    keys = list(client.scan_iter("judgeq:run:*:counters"))
    return client.hgetall(keys[0]) if keys else {}


def test_redis_restart_mid_run(
    tmp_path: Path,
    env: dict[str, str],
    fake_api: FakeMessagesAPI,
    redis_server: RedisServer,
    start_worker: Callable[..., Worker],
) -> None:
    env = {**env, **FAST}
    fake_api.latency = 0.05
    batch = write_batch(tmp_path / "b.jsonl", response_rows(300))
    start_worker("w1", env=FAST)
    start_worker("w2", env=FAST)
    proc = start_submit(batch, env, tmp_path / "out")
    client = redis_server.client()
    wait_for(lambda: int(float(_counters(client).get("done", 0))) >= 50, 60, "progress")
    redis_server.stop()  # AOF with appendfsync always: nothing acknowledged is lost
    time.sleep(2)
    redis_server.start()
    run_id, report = finish(proc, tmp_path / "out")
    ids = verdict_ids(tmp_path / "out", run_id)
    assert len(ids) == len(set(ids)) == 300
    assert report["counts"] == {"total": 300, "graded": 300, "null": 0, "null_by_reason": {}, "rejected": 0}


def test_judge_faults_at_scale_end_as_injected(
    tmp_path: Path, env: dict[str, str], fake_api: FakeMessagesAPI, start_worker: Callable[..., Worker]
) -> None:
    env = {**env, **FAST}
    plan = fault_plan(300, 0.3)
    batch = write_batch(tmp_path / "b.jsonl", response_rows(300, plan))
    start_worker("w1", env=FAST, concurrency=48)
    start_worker("w2", env=FAST, concurrency=48)
    run_id, report = finish(start_submit(batch, env, tmp_path / "out"), tmp_path / "out")
    assert report["counts"]["null_by_reason"] == dict(sorted(expected_nulls(plan).items()))
    assert report["counts"]["graded"] == 300 - sum(expected_nulls(plan).values())
    verdicts = {
        json.loads(x)["index"]: json.loads(x)
        for x in (tmp_path / "out" / run_id / "verdicts.jsonl").read_text().splitlines()
    }
    for i, directive in plan.items():
        if "*" in directive:
            assert verdicts[i]["status"] == "graded", (directive, verdicts[i])
            assert verdicts[i]["attempts"] >= 2
        if directive.startswith("score="):
            assert "clamped" in verdicts[i]["flags"]


SLOW_REDUCER = """
import os, time
from pathlib import Path
import judgeq._pipeline as p

_real = p.reduce_run

def reduce_run(store, run_id):
    marker = Path(os.environ["TEST_REDUCE_MARKER"])
    if not marker.exists():
        marker.write_text("started")
        time.sleep(60)  # the test kills the worker here, mid-aggregation
    return _real(store, run_id)

p.reduce_run = reduce_run
"""


def test_lost_reducer_runs_again(
    tmp_path: Path, env: dict[str, str], redis_server: RedisServer, start_worker: Callable[..., Worker]
) -> None:
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(textwrap.dedent(SLOW_REDUCER))
    marker = tmp_path / "reduce-started"
    extra = {**FAST, "PYTHONPATH": str(hook), "TEST_REDUCE_MARKER": str(marker)}
    worker = start_worker("reducer", env=extra)
    batch = write_batch(tmp_path / "b.jsonl", response_rows(40))
    proc = start_submit(batch, {**env, **FAST}, tmp_path / "out")
    wait_for(marker.exists, 60, "the reducer to start")
    worker.kill()  # mid-aggregation
    worker.start()  # the message comes back after the visibility timeout; the marker stays
    run_id, report = finish(proc, tmp_path / "out")
    assert report["counts"]["total"] == 40 and report["counts"]["graded"] == 40
    assert len(verdict_ids(tmp_path / "out", run_id)) == 40


def test_lost_message_is_re_enqueued_by_the_workers(
    tmp_path: Path, env: dict[str, str], redis_server: RedisServer, start_worker: Callable[..., Worker]
) -> None:
    env = {**env, **FAST}
    batch = write_batch(tmp_path / "b.jsonl", response_rows(40))
    proc = judgeq_cli("submit", str(batch), *SUBMIT, "--run-id", "healed", env=env)
    assert proc.returncode == 0, proc.stderr
    client = redis_server.client()
    assert json.loads(client.lpop("judgeq"))["headers"]["task"] == "judgeq.grade"  # lost in transit
    w = start_worker("w1", env=FAST)
    # stall detection: visibility 6 s + 2 sweeps of 1 s + 6 s margin, checked every ~5 s
    wait_for(lambda: int(float(_counters(client).get("done", 0))) >= 40, 60, "the repair")
    assert "re-enqueued them" in w.log.read_text()
    report = judgeq_cli("report", "healed", "--out", str(tmp_path / "o"), env=env)
    assert report.returncode == 0 and "40/40 graded" in report.stdout


def test_finalize_closes_a_run_with_lost_messages(
    tmp_path: Path, env: dict[str, str], redis_server: RedisServer, start_worker: Callable[..., Worker]
) -> None:
    env = {**env, **FAST}
    batch = write_batch(tmp_path / "b.jsonl", response_rows(40))
    proc = judgeq_cli("submit", str(batch), *SUBMIT, "--run-id", "lossy", env=env)
    assert proc.returncode == 0, proc.stderr
    client = redis_server.client()
    lost = json.loads(client.lpop("judgeq"))  # one grade message (8 jobs) vanishes
    assert lost["headers"]["task"] == "judgeq.grade"
    start_worker("w1", env={**FAST, "JUDGEQ_REPAIR_STALLED": "false"})  # finalize, not the repair
    wait_for(lambda: int(float(_counters(client).get("done", 0))) >= 32, 60, "the other jobs")
    time.sleep(1)
    report = judgeq_cli("report", "lossy", "--out", str(tmp_path / "o1"), env=env)
    assert report.returncode == 1 and "has no report yet (32/40 done" in report.stderr
    early = judgeq_cli("finalize", "lossy", env=env)
    assert early.returncode == 2 and "workers may still be grading" in early.stderr
    fin = judgeq_cli("finalize", "lossy", "--force", "--out", str(tmp_path / "o2"), env=env)
    assert fin.returncode == 0, fin.stderr
    assert "8 job(s) had no result and were recorded as lost" in fin.stderr
    data = json.loads((tmp_path / "o2" / "lossy" / "report.json").read_text())
    assert data["counts"]["null_by_reason"] == {"lost": 8} and data["counts"]["graded"] == 32
    status = judgeq_cli("status", "lossy", env=env)
    assert "incomplete" in status.stdout or "finished" in status.stdout


def test_redelivered_message_counts_once(
    tmp_path: Path,
    env: dict[str, str],
    fake_api: FakeMessagesAPI,
    redis_server: RedisServer,
    start_worker: Callable[..., Worker],
) -> None:
    from celery import Celery

    env = {**env, **FAST}
    start_worker("w1", env=FAST)
    batch = write_batch(tmp_path / "b.jsonl", response_rows(16))
    _run_id, first = finish(start_submit(batch, env, tmp_path / "out", "--run-id", "twice"), tmp_path / "out")
    calls = len(fake_api.requests)
    app = Celery(broker=env["JUDGEQ_REDIS_URL"])
    for _ in range(2):  # the same message delivered twice more
        app.send_task("judgeq.grade", args=["twice", list(range(8)), []], queue="judgeq")
    client = redis_server.client()
    wait_for(lambda: client.llen("judgeq") == 0 and not client.hlen("unacked"), 30, "drain")
    time.sleep(0.5)
    assert len(fake_api.requests) == calls  # nothing graded again
    assert int(float(_counters(client)["done"])) == 16
    again = judgeq_cli("report", "twice", "--out", str(tmp_path / "o2"), env=env)
    assert again.returncode == 0
    second = json.loads((tmp_path / "o2" / "twice" / "report.json").read_text())
    assert strip_volatile(second) == strip_volatile(first)

"""Operating judgeq: plain `celery worker`, a prefork pool, Ctrl-C while waiting, dry-run token
counting through the API, per-question debug logs."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
import redis

from judgeq.testing.fake_anthropic import FakeMessagesAPI

from .harness import SUBMIT, RedisServer, Worker, judgeq_cli, response_rows, wait_for, write_batch

pytestmark = pytest.mark.integration
ROOT = Path(__file__).parent.parent.parent


def submit_wait(batch: Path, env: dict[str, str], out: Path, *extra: str) -> dict:
    proc = judgeq_cli("submit", str(batch), *SUBMIT, "--wait", "--out", str(out), *extra, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    run_id = proc.stdout.splitlines()[0]
    return json.loads((out / run_id / "report.json").read_text())


def test_plain_celery_worker_command(
    tmp_path: Path, env: dict[str, str], start_worker: Callable[..., Worker]
) -> None:
    start_worker(
        "plain",
        argv=[
            "celery",
            "-A",
            "judgeq.workers",
            "worker",
            "-P",
            "threads",
            "-c",
            "2",
            "-n",
            "plain@%h",
            "-l",
            "INFO",
        ],
    )
    report = submit_wait(write_batch(tmp_path / "b.jsonl", response_rows(24)), env, tmp_path / "out")
    assert report["counts"]["graded"] == 24


def test_prefork_pool(tmp_path: Path, env: dict[str, str], start_worker: Callable[..., Worker]) -> None:
    w = start_worker("forked", pool="prefork", concurrency=16)  # 2 processes x 8 jobs per message
    report = submit_wait(write_batch(tmp_path / "b.jsonl", response_rows(40)), env, tmp_path / "out")
    assert report["counts"]["graded"] == 40
    assert "concurrency: 2 (prefork)" in w.log.read_text()  # 16 judge calls = 2 slots x 8 jobs


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_ctrl_c_stops_waiting_not_the_run(
    tmp_path: Path, env: dict[str, str], start_worker: Callable[..., Worker]
) -> None:
    batch = write_batch(tmp_path / "b.jsonl", response_rows(48))
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "judgeq",
            "submit",
            str(batch),
            *SUBMIT,
            "--wait",
            "--run-id",
            "interrupted",
            "--out",
            str(tmp_path / "out"),
        ],
        env={**env, "PYTHONFAULTHANDLER": "1"},  # SIGABRT then dumps every thread's stack
        # as a terminal's foreground job: a shell starts background jobs with SIGINT ignored, and
        # Python then installs no KeyboardInterrupt handler (the suite run with `&` inherits that)
        preexec_fn=_default_sigint,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines: list[str] = []

    def read_stderr() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            lines.append(line)

    reader = threading.Thread(target=read_stderr, daemon=True)
    reader.start()
    try:
        # No worker yet, so the run cannot finish before the interrupt. The first progress line
        # ("[....] 0/48 ...") is written inside the wait loop: the producer waits now.
        wait_for(lambda: any(x.startswith("[") for x in lines) or proc.poll() is not None, 60, "waiting")
        assert proc.poll() is None, "".join(lines)
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=120)  # generous: a loaded machine exits slowly, a hang still fails
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGABRT)  # the stacks of the hung producer, for the message
            proc.wait(timeout=30)
            reader.join(timeout=10)
            raise AssertionError("the producer did not exit on SIGINT:\n" + "".join(lines)) from None
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
        reader.join(timeout=10)
    stderr = "".join(lines)
    assert proc.returncode == 130, stderr
    assert "stopped waiting; run interrupted goes on" in stderr and "Traceback" not in stderr
    start_worker("w1")
    client = redis.Redis.from_url(env["JUDGEQ_REDIS_URL"])  # the run finishes without the producer
    wait_for(lambda: client.exists("judgeq:run:{interrupted}:report") == 1, 180, "the run's report")
    status = judgeq_cli("status", "interrupted", env=env)
    assert "finished" in status.stdout and "done     48/48" in status.stdout
    report = judgeq_cli("report", "interrupted", "--out", str(tmp_path / "later"), env=env)
    assert report.returncode == 0 and "48/48 graded" in report.stdout


def test_dry_run_counts_tokens_with_the_api(
    tmp_path: Path, env: dict[str, str], fake_api: FakeMessagesAPI
) -> None:
    proc = judgeq_cli(
        "run",
        str(ROOT / "examples" / "responses.jsonl"),
        "--rubric",
        "quality",
        "--judge",
        "anthropic:claude-sonnet-4-5",
        "--dry-run",
        env=env,
    )
    assert proc.returncode == 0, proc.stderr
    assert "the token counting API on 20 sampled requests" in proc.stdout
    assert fake_api.request_count == 0  # no judge call: only count_tokens
    assert "estimated cost for claude-sonnet-4-5" in proc.stdout


def test_questions_are_logged_at_debug(
    tmp_path: Path, env: dict[str, str], start_worker: Callable[..., Worker]
) -> None:
    w = start_worker("dbg", loglevel="DEBUG")
    proc = judgeq_cli(
        "submit",
        str(ROOT / "examples" / "retrieval.jsonl"),
        "--rubric",
        "retrieval-relevance",
        "--judge",
        "anthropic:claude-test",
        "--wait",
        "--out",
        str(tmp_path / "out"),
        env=env,
    )
    assert proc.returncode == 0, proc.stderr
    log = w.log.read_text()
    line = next(x for x in log.splitlines() if "question q-002 " in x)
    assert "retrieved=[" in line and "rank=4" in line and "grade=" in line and "total=" in line
    assert "reasoning=" in line


def test_unreachable_redis_is_one_clear_line(env: dict[str, str], redis_server: RedisServer) -> None:
    bad = {**env, "JUDGEQ_REDIS_URL": "redis://:hunter2@127.0.0.1:1/0"}
    for args in (["status"], ["report", "x"], ["finalize", "x"]):
        proc = judgeq_cli(*args, env=bad)
        assert proc.returncode == 1
        assert proc.stderr.startswith("judgeq: error: cannot reach Redis at redis://:***@127.0.0.1:1/0")
        assert "hunter2" not in proc.stderr and "Traceback" not in proc.stderr


def test_dry_run_counts_the_calls_the_reply_cache_answers(
    tmp_path: Path, env: dict[str, str], fake_api: FakeMessagesAPI, start_worker: Callable[..., Worker]
) -> None:
    # --dry-run's "with and without cache": the reply cache of the command that would run the
    # batch (the workers' in Redis for submit; judgeq run's SQLite file) is looked up per call
    batch = str(ROOT / "examples" / "responses.jsonl")
    grading = ["--rubric", "quality", "--judge", "anthropic:claude-sonnet-4-5"]
    before = judgeq_cli("submit", batch, *grading, "--dry-run", env=env)
    assert before.returncode == 0, before.stderr
    assert "reply cache: 0 of 30 calls to claude-sonnet-4-5 are answered already" in before.stdout
    start_worker("w1")
    graded = judgeq_cli("submit", batch, *grading, "--wait", "--out", str(tmp_path / "out"), env=env)
    assert graded.returncode == 0, graded.stderr
    after = judgeq_cli("submit", batch, *grading, "--dry-run", env=env)
    assert "reply cache: 30 of 30 calls to claude-sonnet-4-5 are answered already" in after.stdout
    assert "every cost above is 0.0% of its figure" in after.stdout
    # another rubric version's requests are not answered by this cache
    other = judgeq_cli("submit", batch, "--rubric", "helpfulness", *grading[2:], "--dry-run", env=env)
    assert "reply cache: 0 of 30 calls" in other.stdout
    # judgeq run looks in its own cache (a file of this test's XDG_CACHE_HOME): none yet
    run = judgeq_cli("run", batch, *grading, "--dry-run", env=env)
    assert "no reply cache to look in: every call is counted" in run.stdout


def test_submit_wait_returns_when_its_run_pauses_and_keep_waiting_waits_for_resume(
    tmp_path: Path, env: dict[str, str], start_worker: Callable[..., Worker]
) -> None:
    # (issue 29: `submit --wait` never returned once the run paused on its cost cap: a CI step hung)
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"claude-test": {"input": 3.0, "output": 15.0}}))
    env = {**env, "JUDGEQ_PRICES": str(prices)}
    start_worker("w1", concurrency=2)
    batch = write_batch(tmp_path / "b.jsonl", response_rows(60))
    out = tmp_path / "out"
    args = ("submit", str(batch), *SUBMIT, "--run-id", "capped", "--max-cost", "0.01", "--out", str(out))
    proc = judgeq_cli(*args, "--wait", env=env, timeout=300)
    assert proc.returncode == 3, proc.stderr[-3000:]
    line = proc.stderr.strip().splitlines()[-1]
    assert line.startswith("judgeq: error: run capped paused: max_cost: $"), line
    assert "judgeq resume capped --max-cost" in line and "Traceback" not in proc.stderr
    # --keep-waiting: waits through the pause (it shows it) until a resume lets the run finish
    waiting = subprocess.Popen(
        [sys.executable, "-m", "judgeq", "wait", "capped", "--keep-waiting", "--out", str(out)],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(waiting.stderr or []), daemon=True)
    reader.start()
    try:
        wait_for(
            lambda: any("PAUSED" in x for x in lines) or waiting.poll() is not None, 60, "the pause shown"
        )
        assert waiting.poll() is None, "".join(lines)
        resumed = judgeq_cli("resume", "capped", "--max-cost", "100", env=env)
        assert resumed.returncode == 0, resumed.stderr
        waiting.wait(timeout=240)
    finally:
        if waiting.poll() is None:
            waiting.kill()
            waiting.wait(timeout=10)
        reader.join(timeout=10)
    assert waiting.returncode == 0, "".join(lines)[-3000:]
    assert "60/60 graded" in (waiting.stdout.read() if waiting.stdout else "")


@pytest.mark.parametrize("entry", ["judgeq worker", "celery worker"])
def test_every_line_of_a_json_logging_worker_is_json(
    entry: str, tmp_path: Path, env: dict[str, str], start_worker: Callable[..., Worker]
) -> None:
    # (issue 29: 21 of 61 lines were plain text: Celery's banner, a SecurityWarning, "Warm shutdown")
    argv = (
        ["celery", "-A", "judgeq.workers", "worker", "-l", "INFO", "-c", "2"]
        if entry == "celery worker"
        else None
    )
    w = start_worker("w1", env={"JUDGEQ_LOG_FORMAT": "json"}, argv=argv)
    submit_wait(
        write_batch(tmp_path / "b.jsonl", response_rows(6, directive={2: "garbage"})), env, tmp_path / "o"
    )
    w.stop()  # a warm shutdown: Celery's own notice
    lines = [x for x in w.output().splitlines() if x.strip()]
    records = []
    for line in lines:
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            raise AssertionError(f"not JSON: {line!r}\n" + "\n".join(lines[:60])) from None
    messages = " ".join(r["message"] for r in records)
    assert "judgeq worker ready" in messages and "Warm shutdown" in messages
    assert any(r.get("event") == "job_stored" for r in records) and all("level" in r for r in records)


def test_a_worker_stopped_on_purpose_is_no_longer_counted(
    env: dict[str, str], redis_server: RedisServer, start_worker: Callable[..., Worker]
) -> None:
    # (issue 29: status counted a gracefully stopped worker for 40 s, its heartbeat's life)
    w = start_worker("w1")
    r = redis_server.client()
    wait_for(lambda: any(r.scan_iter("judgeq:worker:judgeq:*")), 30, "its heartbeat")
    w.stop()  # a warm shutdown
    assert list(r.scan_iter("judgeq:worker:judgeq:*")) == []

"""Issue 9.7, CLI paper cuts from the trial, against a real redis-server: ``judgeq status |
head`` exits quietly, a bad Redis URL is one line with exit 2, ``status`` of a finished run
keeps its final rate, and a producer's heartbeat shows whether it is still enqueuing."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from judgeq.producer.progress import PRODUCER_GONE_AFTER
from judgeq.redis_connect import connect
from judgeq.rubric.model import read_rubric_text
from judgeq.runspec import RunSpec
from judgeq.store.redis import RedisStore
from judgeq.testing.fake_anthropic import FakeMessagesAPI

from .harness import RedisServer, judgeq_cli

ROOT = Path(__file__).parent.parent.parent
RESPONSES = ROOT / "examples" / "responses.jsonl"


def iso(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def register(store: RedisStore, run_id: str, total: int = 10, **state: object) -> None:
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
    store.set_state(run_id, **({"state": "running", "enqueue": "done", "enqueued": total} | state))


@pytest.fixture
def many_runs(redis_url: str) -> RedisStore:
    store = RedisStore(connect(redis_url))
    for i in range(25):
        register(store, f"run-{i:02d}")
    return store


def assert_quiet(proc: subprocess.CompletedProcess[bytes] | subprocess.Popen[bytes], stderr: bytes) -> None:
    assert proc.returncode == 0, stderr
    for noise in (b"BrokenPipe", b"Broken pipe", b"Traceback", b"internal error", b"Exception ignored"):
        assert noise not in stderr, stderr


# -- 1: `judgeq status | head` --------------------------------------------------------------------


@pytest.mark.parametrize("args", [["status"], ["status", "run-03"]], ids=["listing", "one-run"])
def test_status_into_a_reader_that_already_closed_exits_quietly(
    env: dict[str, str], many_runs: RedisStore, args: list[str]
) -> None:
    """The reader is gone before judgeq writes its first line: the first write fails with
    EPIPE every time (no race), and judgeq ends quietly with 0, as the shell's tools do."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "judgeq", *args],
            env=env,
            stdout=write_end,
            stderr=subprocess.PIPE,
            timeout=120,
        )
    finally:
        os.close(write_end)
    assert_quiet(proc, proc.stderr)


def test_status_piped_into_head_exits_quietly(env: dict[str, str], many_runs: RedisStore) -> None:
    status = subprocess.Popen(
        [sys.executable, "-m", "judgeq", "status"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert status.stdout is not None and status.stderr is not None
    head = subprocess.run(["head", "-n", "1"], stdin=status.stdout, capture_output=True, timeout=120)
    status.stdout.close()
    stderr = status.stderr.read()
    status.wait(timeout=120)
    assert head.returncode == 0 and head.stdout.startswith(b"run-24  running"), head.stdout
    assert_quiet(status, stderr)


# -- 2: a bad Redis URL is one line with exit 2 ------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("redis://127.0.0.1:{port}/99", "judgeq: error: Redis URL redis://127.0.0.1:{port}/99: "),
        ("redis://host:notaport/0", "judgeq: error: invalid Redis URL redis://host:notaport/0 "),
        ("http://x", "judgeq: error: invalid Redis URL http://x "),
        (
            "redis://127.0.0.1:{port}/abc",
            "judgeq: error: Redis URL redis://127.0.0.1:{port}/abc: the database",
        ),
        (
            "redis://127.0.0.1:{port}/1/2",
            "judgeq: error: Redis URL redis://127.0.0.1:{port}/1/2: the database",
        ),
        ("redis://:p@ss/word@127.0.0.1:{port}/0", "judgeq: error: invalid Redis URL redis://:***@127.0.0.1"),
    ],
    ids=["db-index-99", "port-not-a-number", "not-redis", "db-not-a-number", "db-path", "password-slash"],
)
def test_a_bad_redis_url_is_one_line_and_exit_2(
    env: dict[str, str], redis_server: RedisServer, url: str, expected: str
) -> None:
    url, expected = (x.format(port=redis_server.port) for x in (url, expected))
    bad = {**env, "JUDGEQ_REDIS_URL": url}
    submit = ["submit", str(RESPONSES), "--rubric", "quality", "--judge", "lexical"]
    for args in (["status"], ["report", "x"], submit):
        proc = judgeq_cli(*args, env=bad)
        assert proc.returncode == 2, (args, proc.stderr)
        assert proc.stderr.startswith(expected), (args, proc.stderr)
        assert len(proc.stderr.splitlines()) == 1, (args, proc.stderr)
        assert "Traceback" not in proc.stderr and "s3cr3t" not in proc.stderr
    assert redis_server.client().dbsize() == 0  # nothing was registered or enqueued


# -- 3 and 4 through the real CLI and Redis -----------------------------------------------------------


def test_status_of_a_finished_run_shows_its_final_rate(env: dict[str, str], redis_url: str) -> None:
    store = RedisStore(connect(redis_url))
    started = time.time() - 86400  # finished a day ago, after 100 s
    register(store, "old", total=50, state="finished", started_epoch=started, finished_at=iso(started + 100))
    store.r.hset("judgeq:run:{old}:counters", mapping={"done": 50, "graded": 50})
    proc = judgeq_cli("status", "old", env=env)
    assert proc.returncode == 0, proc.stderr
    assert "run old: finished" in proc.stdout
    assert "rate     0.5 jobs/s, ETA 0s" in proc.stdout, proc.stdout


def test_submit_writes_a_heartbeat_and_a_dead_producer_is_shown_stopped(
    env: dict[str, str], redis_url: str
) -> None:
    before = time.time()
    proc = judgeq_cli(
        "submit", str(RESPONSES), "--rubric", "quality", "--judge", "lexical", "--run-id", "hb", env=env
    )
    assert proc.returncode == 0, proc.stderr
    store = RedisStore(connect(redis_url))
    state = store.state("hb")
    assert state["enqueue"] == "done" and float(state["producer_heartbeat"]) >= before
    # a producer killed after 20 of 30 jobs, long ago (as a SIGKILL leaves the state)
    long_ago = time.time() - 100 * PRODUCER_GONE_AFTER
    store.set_state("hb", enqueue="enqueuing", enqueued=20, producer_heartbeat=long_ago)
    proc = judgeq_cli("status", "hb", env=env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[0] == (
        "run hb: stopped while enqueuing (20/30 sent; the producer is gone: re-run the same submit "
        "with --run-id hb to send the rest)"
    )
    assert "stopped while enqueuing" in judgeq_cli("status", env=env).stdout
    # the advice works: the same submit again sends the rest and the run is enqueued
    proc = judgeq_cli(
        "submit", str(RESPONSES), "--rubric", "quality", "--judge", "lexical", "--run-id", "hb", env=env
    )
    assert proc.returncode == 0, proc.stderr
    assert store.state("hb")["enqueue"] == "done"
    proc = judgeq_cli("status", "hb", env=env)
    assert proc.stdout.splitlines()[0] == "run hb: running", proc.stdout


@pytest.mark.parametrize(
    ("extra", "flags", "expected"),
    [
        pytest.param(
            {"ANTHROPIC_API_KEY": "sk-ant-wrong"},
            [],
            "judgeq: error: judge preflight failed: the API key was refused: check ANTHROPIC_API_KEY",
            id="refused-key",
        ),
        pytest.param(
            {},
            ["--judge", "anthropic:claude-no-such-model"],
            "judgeq: error: judge preflight failed: the judge rejected model 'claude-no-such-model'",
            id="unknown-model",
        ),
    ],
)
def test_a_broken_judge_set_up_is_one_error_before_anything_is_enqueued(
    env: dict[str, str],
    fake_api: FakeMessagesAPI,
    redis_server: RedisServer,
    extra: dict[str, str],
    flags: list[str],
    expected: str,
) -> None:
    fake_api.models = ["claude-test"]
    proc = judgeq_cli(
        "submit", str(RESPONSES), "--rubric", "quality", "--judge", "anthropic:claude-test", *flags,
        env={**env, **extra},
    )  # fmt: skip
    assert proc.returncode == 2 and proc.stderr.startswith(expected), proc.stderr
    assert len(proc.stderr.splitlines()) == 1 and "sk-ant-wrong" not in proc.stderr
    # the Models API first (no tokens); a model it does not know is asked of the Messages API
    # too (a gateway may not serve the Models API), which refuses it: nothing is spent
    assert fake_api.model_checks >= 1 and fake_api.by_status.get(200, 0) == 0
    assert redis_server.client().dbsize() == 0  # nothing registered or enqueued

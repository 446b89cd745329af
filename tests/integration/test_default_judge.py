"""One default judge for run, submit, worker and the API (issue 20, point 2), with real worker
processes: a worker without a key serves the offline judge; a run whose judge it cannot call
is neither graded nor turned into nulls by it, ``judgeq status`` says which judge the run needs
and that no worker serves it, and a worker with the key then grades it."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from judgeq.testing.fake_anthropic import FakeMessagesAPI

from .harness import (
    SUBMIT,
    RedisServer,
    Worker,
    judgeq_cli,
    response_rows,
    wait_for,
    wait_for_log,
    write_batch,
)

pytestmark = pytest.mark.integration

NO_KEY = {"ANTHROPIC_API_KEY": ""}


def test_without_a_key_submit_and_the_worker_both_take_the_offline_judge(
    tmp_path: Path, env: dict[str, str], redis_server: RedisServer, start_worker: Callable[..., Worker]
) -> None:
    # 'How it works' without a key: start a worker, submit (no --judge): the run is graded
    w = start_worker("w1", env=NO_KEY)
    wait_for_log(w, "judges it serves: the offline lexical judge only", 60)
    batch = write_batch(tmp_path / "b.jsonl", response_rows(6))
    out = str(tmp_path / "o")
    args = ("submit", str(batch), "--rubric", "quality", "--run-id", "nokey", "--wait", "--out", out)
    proc = judgeq_cli(*args, env={**env, **NO_KEY})
    assert proc.returncode == 0, proc.stderr
    assert "offline 'lexical' judge" in proc.stderr  # the producer says which judge it uses
    report = json.loads((tmp_path / "o" / "nokey" / "report.json").read_text())
    assert report["judge"]["provider"] == "lexical" and report["counts"]["graded"] == 6


def test_a_run_no_worker_can_serve_waits_and_status_says_why(
    tmp_path: Path,
    env: dict[str, str],
    fake_api: FakeMessagesAPI,
    redis_server: RedisServer,
    start_worker: Callable[..., Worker],
) -> None:
    keyless = start_worker("w1", env=NO_KEY)
    wait_for_log(keyless, "judges it serves", 60)
    batch = write_batch(tmp_path / "b.jsonl", response_rows(8))
    proc = judgeq_cli("submit", str(batch), *SUBMIT, "--run-id", "needskey", env=env)
    assert proc.returncode == 0, proc.stderr
    assert fake_api.request_count == 0  # no Messages call: the worker called no judge

    def status() -> str:
        return judgeq_cli("status", "needskey", env=env).stdout

    wait_for(lambda: "no worker serves it" in status(), 60, "status to name the missing judge")
    out = status()
    assert "needs judge anthropic:claude-test and no worker serves it" in out
    assert "done     0/8" in out and "nulls    0" in out  # nothing graded, nothing null
    start_worker("w2")  # with the key
    client = redis_server.client()
    wait_for(lambda: client.get("judgeq:run:{needskey}:report") is not None, 120, "the report")
    report = json.loads(client.get("judgeq:run:{needskey}:report"))
    assert report["counts"]["graded"] == 8 and report["counts"]["null"] == 0
    # routed to the workers with a key: the keyless one never received a message to send back
    assert "go back to the queue" not in keyless.output()

"""Systemic failures hold the jobs, never null them (real Redis, real workers, the real SDK
against the fake Messages API):

the judge's server goes away mid-run (connection refused): the jobs are held, the run waits
for its judge and says so, and goes on by itself when the server is back: every job graded, no
null. (A key refused with a gateway's 400 for every call pauses the run instead:
tests/integration/test_self_healing.py.)
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from judgeq.testing.fake_anthropic import FakeMessagesAPI

from .harness import (
    API_KEY,
    SUBMIT,
    RedisServer,
    Worker,
    free_port,
    judgeq_cli,
    response_rows,
    wait_for,
    wait_for_log,
    write_batch,
)

pytestmark = pytest.mark.integration


def _submit(tmp_path: Path, env: dict[str, str], run_id: str, n: int, *extra: str) -> subprocess.Popen[str]:
    """``judgeq submit --wait`` in the background, its stderr in ``tmp_path/RUN.err``."""
    batch = write_batch(tmp_path / f"{run_id}.jsonl", response_rows(n))
    return subprocess.Popen(
        [sys.executable, "-m", "judgeq", "submit", str(batch), *SUBMIT, "--run-id", run_id, "--wait",
         "--out", str(tmp_path / "out"), *extra],
        env=env, stdout=subprocess.DEVNULL, stderr=(tmp_path / f"{run_id}.err").open("w"), text=True,
    )  # fmt: skip


@pytest.mark.timeout(240)
def test_an_outage_holds_the_jobs_and_the_run_goes_on_when_the_judge_is_back(
    tmp_path: Path, env: dict[str, str], redis_server: RedisServer, start_worker: Callable[..., Worker]
) -> None:
    port = free_port()
    api = FakeMessagesAPI(api_key=API_KEY, latency=0.2).start(port)
    env = {**env, "ANTHROPIC_BASE_URL": api.base_url, "JUDGEQ_JUDGE_DEADLINE": "3"}
    proc: subprocess.Popen[str] | None = None
    try:
        worker = start_worker("w1", env=env, concurrency=4)
        n = 200
        proc = _submit(tmp_path, env, "outage", n)
        client = redis_server.client()
        state, counters = "judgeq:run:{outage}:state", "judgeq:run:{outage}:counters"
        wait_for(lambda: float(client.hget(counters, "done") or 0) >= 8, 90, "the first results")
        api.stop()  # the server goes away: every call is refused
        wait_for(lambda: bool(client.hget(state, "waiting_since")), 90, "the run waiting for its judge")
        status = judgeq_cli("status", "outage", env=env)
        assert status.returncode == 0
        line = next(x for x in status.stdout.splitlines() if "WAITING" in x)
        assert "api_error" in line and "held, not nulled" in line, status.stdout
        nulls = {k: v for k, v in client.hgetall(counters).items() if k.startswith("null:")}
        assert nulls == {}, nulls  # jobs failed all their attempts and none became a null
        wait_for_log(worker, "waits for its judge", 30)
        said = tmp_path / "outage.err"
        wait_for(lambda: "WAITING for the judge" in said.read_text(), 60, "--wait saying so")
        before = float(client.hget(counters, "done") or 0)
        api.start(port)  # back
        proc.wait(timeout=180)
        err = said.read_text()
    finally:
        api.stop()
        if proc is not None and proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err[-3000:]
    report = json.loads((tmp_path / "out" / "outage" / "report.json").read_text())
    assert report["counts"]["graded"] == n and report["counts"]["null"] == 0
    assert before < n  # the outage came while jobs were left
    assert "answers again" in worker.output()
    assert "waiting_since" not in redis_server.client().hgetall("judgeq:run:{outage}:state")

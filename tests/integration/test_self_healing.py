"""A run heals or pauses by itself, with no process waiting on it (real Redis, real workers, the
real SDK against the fake Messages API):

* a lost reduce message: the workers' repair loop sends the reducer again;
* a rubric that fails to load on the workers: jobs are retried, then internal_error nulls;
* a worker started with a refused key says so at ERROR and takes no job until the key works;
* a run whose judge calls all fail the same systemic way (a refused key: the API's 401 or a
  gateway's 400) pauses, says why, and resumes.
"""

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

from .harness import (
    API_KEY,
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

FAST = {"JUDGEQ_JUDGE_TIMEOUT": "1", "JUDGEQ_JUDGE_DEADLINE": "3", "JUDGEQ_VISIBILITY_TIMEOUT": "6"}


DROP_FIRST_REDUCE = """
import os
from pathlib import Path
from celery.app.base import Celery

_send = Celery.send_task

def send_task(self, name, *args, **kwargs):
    marker = Path(os.environ["TEST_DROP_MARKER"])
    if name == "judgeq.reduce" and not marker.exists():
        marker.write_text("dropped")  # lost in transit: never reaches the broker
        return None
    return _send(self, name, *args, **kwargs)

Celery.send_task = send_task
"""


def test_a_lost_reduce_message_heals_with_no_one_waiting(
    tmp_path: Path, env: dict[str, str], redis_server: RedisServer, start_worker: Callable[..., Worker]
) -> None:
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(textwrap.dedent(DROP_FIRST_REDUCE))
    marker = tmp_path / "dropped"
    w = start_worker("w1", env={**FAST, "PYTHONPATH": str(hook), "TEST_DROP_MARKER": str(marker)})
    batch = write_batch(tmp_path / "b.jsonl", response_rows(24))
    proc = judgeq_cli("submit", str(batch), *SUBMIT, "--run-id", "healme", env={**env, **FAST})
    assert proc.returncode == 0, proc.stderr  # and nobody waits for the run
    client = redis_server.client()
    wait_for(marker.exists, 60, "the reduce message to be lost")
    assert client.get("judgeq:run:{healme}:report") is None
    # stall_after with these settings: 6 s + 2 sweeps of 1 s + 6 s, checked every ~4.7 s
    wait_for(lambda: client.get("judgeq:run:{healme}:report") is not None, 120, "the healed report")
    wait_for_log(w, "sent its reducer again")  # the report may be saved before this line is logged
    report = json.loads(client.get("judgeq:run:{healme}:report"))
    assert report["counts"]["graded"] == 24 and report["counts"]["total"] == 24
    assert judgeq_cli("status", "healme", env=env).stdout.startswith("run healme: finished")


@pytest.mark.parametrize("broker", ["redis", "rabbitmq"])
def test_a_rubric_that_fails_to_load_on_the_workers_is_retried_then_internal_error(
    tmp_path: Path,
    env: dict[str, str],
    redis_server: RedisServer,
    start_worker: Callable[..., Worker],
    broker: str,
    request: pytest.FixtureRequest,
) -> None:
    # the retries are sent with a countdown: on RabbitMQ, its native delayed delivery (quorum
    # queues cannot hold messages back otherwise)
    extra: dict[str, str] = {}
    if broker == "rabbitmq":
        rabbit = request.getfixturevalue("rabbit_server")
        if rabbit.proc is None:
            rabbit.start()
        rabbit.reset()
        extra = {"JUDGEQ_BROKER_URL": rabbit.url}
    env = {**env, **extra}
    batch = write_batch(tmp_path / "b.jsonl", response_rows(10))
    proc = judgeq_cli("submit", str(batch), *SUBMIT, "--run-id", "badrubric", env=env)
    assert proc.returncode == 0, proc.stderr
    client = redis_server.client()
    key = "judgeq:run:{badrubric}:spec"
    spec = json.loads(client.get(key))
    spec["rubric_text"] = spec["rubric_text"].replace("scale:", "scale: 9-2 #", 1)  # unloadable
    client.set(key, json.dumps(spec), keepttl=True)
    w = start_worker("w1", env=extra)
    wait_for(lambda: client.get("judgeq:run:{badrubric}:report") is not None, 120, "the report")
    report = json.loads(client.get("judgeq:run:{badrubric}:report"))
    assert report["counts"]["null_by_reason"] == {"internal_error": 10}
    assert report["counts"]["total"] == 10
    log = w.log.read_text()
    assert "retry 1 of 3" in log and "retry 3 of 3" in log  # retried before giving up
    out = tmp_path / "out"
    assert judgeq_cli("report", "badrubric", "--out", str(out), env=env).returncode == 0
    verdicts = [json.loads(x) for x in (out / "badrubric" / "verdicts.jsonl").read_text().splitlines()]
    assert [v["job_id"] for v in verdicts] == [f"j{i:05d}" for i in range(10)]
    assert all(v["model"] in ("sys-a", "sys-b") and "RubricError" in v["raw"] for v in verdicts)


def test_a_worker_with_a_refused_key_says_so_and_takes_no_job_until_it_works(
    tmp_path: Path,
    env: dict[str, str],
    fake_api: FakeMessagesAPI,
    redis_server: RedisServer,
    start_worker: Callable[..., Worker],
) -> None:
    wrong = "sk-ant-test-WRONG-key"
    w = start_worker("w1", env={"ANTHROPIC_API_KEY": wrong, "JUDGEQ_JUDGE_CHECK_INTERVAL": "0.5"})
    log = w.log.read_text()
    assert "ERROR" in log and "judge set-up broken" in log and "auth_error" in log
    assert wrong not in log
    batch = write_batch(tmp_path / "b.jsonl", response_rows(16))
    proc = judgeq_cli("submit", str(batch), *SUBMIT, "--run-id", "waits", env=env)
    assert proc.returncode == 0, proc.stderr
    client = redis_server.client()
    calls = fake_api.request_count
    time.sleep(1)  # a consuming worker would take messages now; this one must not
    assert client.llen("judgeq.anthropic") == 2  # both grade messages (8 jobs each) still queued
    assert fake_api.request_count == calls
    try:
        fake_api.api_key = wrong  # the key works now (e.g. the organisation re-enabled it)
        wait_for(lambda: client.get("judgeq:run:{waits}:report") is not None, 60, "the report")
    finally:
        fake_api.api_key = API_KEY
    report = json.loads(client.get("judgeq:run:{waits}:report"))
    assert report["counts"]["graded"] == 16 and report["counts"]["null"] == 0
    assert fake_api.by_status.get(401, 0) == 0  # no job was ever tried with the refused key
    assert "taking jobs" in w.log.read_text()


def test_a_worker_without_a_key_says_so_at_start(
    env: dict[str, str], start_worker: Callable[..., Worker]
) -> None:
    # issue 20: without a key a worker serves the offline judge (the default judge everywhere);
    # it says so, and is not broken (an Anthropic run's jobs wait for a worker with the key)
    w = start_worker("nokey", env={"ANTHROPIC_API_KEY": ""})
    log = w.log.read_text()
    # (every provider a key alone lets a worker call, as the registry lists them)
    assert (
        "judges it serves: the offline lexical judge only (no ANTHROPIC_API_KEY or OPENAI_API_KEY or " in log
    )
    assert "judge set-up broken" not in log


@pytest.mark.parametrize(
    ("refused", "reason"),
    [
        (None, "auth_error"),  # the API: 401
        # a gateway refusing the key with a 400 for every call (LiteLLM with a master key and no
        # database; issue 29: 300 of 300 jobs became invalid_request nulls in 1.3 s)
        ((400, "No connected db."), "invalid_request"),
    ],
    ids=["401", "gateway-400"],
)
def test_a_run_whose_calls_all_fail_systemically_pauses_and_resumes(
    tmp_path: Path,
    env: dict[str, str],
    fake_api: FakeMessagesAPI,
    redis_server: RedisServer,
    start_worker: Callable[..., Worker],
    refused: tuple[int, str] | None,
    reason: str,
) -> None:
    start_worker("w1", env={"JUDGEQ_SYSTEMIC_FAILURES": "5"}, concurrency=4)
    rotated = "sk-ant-test-ROTATED"
    fake_api.api_key = rotated  # the workers' key is revoked; the producer has the new one
    fake_api.refused_key = refused
    try:
        batch = write_batch(tmp_path / "b.jsonl", response_rows(40))
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "judgeq",
                "submit",
                str(batch),
                *SUBMIT,
                "--run-id",
                "paused",
                "--wait",
                "--keep-waiting",  # through the pause, to the resume (without it: exit 3)
                "--out",
                str(tmp_path / "out"),
            ],
            env={**env, "ANTHROPIC_API_KEY": rotated},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        client = redis_server.client()
        state = "judgeq:run:{paused}:state"
        wait_for(lambda: client.hget(state, "state") == "paused", 60, "the pause")
        wait_for(lambda: client.hget(state, "enqueue") == "done", 60, "enqueuing")
        assert int(float(client.hget("judgeq:run:{paused}:counters", "done") or 0)) == 0  # no null
        status = judgeq_cli("status", "paused", env=env)
        lines = [x for x in status.stdout.splitlines() if "PAUSED" in x]
        assert len(lines) == 1 and reason in lines[0] and "judgeq resume paused" in lines[0]
        assert refused is None or refused[1] in lines[0]
        assert judgeq_cli("resume", "nope", env=env).returncode == 2
        fake_api.api_key = API_KEY  # fixed
        resumed = judgeq_cli("resume", "paused", env=env)
        assert resumed.returncode == 0 and "40 pending job(s) enqueued again" in resumed.stderr
        _, stderr = proc.communicate(timeout=120)
    finally:
        fake_api.api_key, fake_api.refused_key = API_KEY, None
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, stderr[-2000:]
    assert f"PAUSED: {reason}" in stderr  # --wait said why
    report = json.loads((tmp_path / "out" / "paused" / "report.json").read_text())
    assert report["counts"]["graded"] == 40 and report["counts"]["null"] == 0
    again = judgeq_cli("resume", "paused", env=env)
    assert again.returncode == 2 and "is not paused" in again.stderr

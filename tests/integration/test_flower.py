"""Flower against the test Redis: tasks visible with run and job ids, never without auth."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

import pytest

from .harness import (
    API_KEY,
    SUBMIT,
    Worker,
    free_port,
    judgeq_cli,
    listen_addresses,
    response_rows,
    write_batch,
)

pytestmark = pytest.mark.integration

USER, PASSWORD = "ops", "flower-pass-123"


def get(url: str, auth: tuple[str, str] | None = None) -> tuple[int, str]:
    req = urllib.request.Request(url)
    if auth:
        token = base64.b64encode(f"{auth[0]}:{auth[1]}".encode()).decode()
        req.add_header("Authorization", f"Basic {token}")
    try:
        with urllib.request.urlopen(req, timeout=5) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode(errors="replace")


@pytest.fixture
def flower(env: dict[str, str], tmp_path: Path):
    port = free_port()
    log = (tmp_path / "flower.log").open("wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "judgeq", "flower", "--port", str(port)],  # loopback by default
        env={**env, "JUDGEQ_FLOWER_USER": USER, "JUDGEQ_FLOWER_PASSWORD": PASSWORD},
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:
        try:
            get(f"{base}/healthcheck")
            break
        except OSError:
            if time.monotonic() > deadline or proc.poll() is not None:
                proc.kill()
                raise RuntimeError((tmp_path / "flower.log").read_text()[-3000:]) from None
            time.sleep(0.2)
    assert listen_addresses(port) == {"127.0.0.1"}, "loopback only unless told (JUDGEQ_LISTEN_ADDRESS)"
    yield base, proc
    proc.terminate()
    proc.wait(timeout=10)


def test_flower_lists_grading_tasks_with_auth(
    flower, tmp_path: Path, env: dict[str, str], start_worker: Callable[..., Worker]
) -> None:
    base, _ = flower
    start_worker("w1")
    # Flower's event consumer has attached once it has seen the worker's events (worker-online
    # or a heartbeat, every 2 s): only then are the tasks' events sure to reach it
    deadline = time.monotonic() + 60
    while True:
        status, body = get(f"{base}/api/workers?status=true", auth=(USER, PASSWORD))
        assert status == 200, body
        if any(name.startswith("w1@") and alive for name, alive in json.loads(body).items()):
            break
        assert time.monotonic() < deadline, f"Flower never saw worker w1: {body}"
        time.sleep(0.2)
    batch = write_batch(tmp_path / "b.jsonl", response_rows(12))
    proc = judgeq_cli(
        "submit",
        str(batch),
        *SUBMIT,
        "--run-id",
        "flower-run",
        "--wait",
        "--out",
        str(tmp_path / "out"),
        env=env,
    )
    assert proc.returncode == 0, proc.stderr
    tasks: dict = {}
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        status, body = get(f"{base}/api/tasks?limit=200", auth=(USER, PASSWORD))
        assert status == 200, body
        tasks = json.loads(body)
        grades = [t for t in tasks.values() if t.get("name") == "judgeq.grade"]
        if (
            grades
            and all(t["state"] == "SUCCESS" for t in grades)
            and any(t.get("name") == "judgeq.reduce" for t in tasks.values())
        ):
            break
        time.sleep(0.5)
    grades = [t for t in tasks.values() if t.get("name") == "judgeq.grade"]
    assert grades and all(t["state"] == "SUCCESS" for t in grades)
    shown = " ".join(t["args"] for t in grades)
    assert "flower-run" in shown
    for i in range(12):
        assert f"j{i:05d}" in shown  # every job id is visible
    dump = json.dumps(tasks)
    assert "Question number" not in dump and "Answer number" not in dump  # no job text
    assert API_KEY not in dump


def test_flower_refuses_without_credentials(flower) -> None:
    base, _ = flower
    for path in ("/api/tasks", "/api/workers", "/"):
        status, _ = get(f"{base}{path}")
        assert status == 401, path
    status, _ = get(f"{base}/api/tasks", auth=(USER, "wrong"))
    assert status == 401


@pytest.mark.parametrize(
    "extra", [[], ["--auth_provider=x"], ["--auth-provider=flower.views.auth.GithubLoginHandler"]]
)
def test_flower_will_not_start_open(env: dict[str, str], extra: list[str]) -> None:
    """Both entry points refuse, and an option that merely looks like auth is not auth."""
    proc = judgeq_cli("flower", "--port", str(free_port()), *extra, env=env, timeout=60)
    assert proc.returncode == 2, proc.stderr
    assert "Flower would run without authentication" in proc.stderr and "Traceback" not in proc.stderr
    celery = subprocess.run(
        [sys.executable, "-m", "celery", "-A", "judgeq.workers", "flower", f"--port={free_port()}", *extra],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert celery.returncode == 2 and "would run without authentication" in celery.stderr


def test_a_run_named_flower_is_a_run_like_any_other(env: dict[str, str]) -> None:
    proc = judgeq_cli("status", "flower", env=env)
    assert proc.returncode == 2 and "run 'flower' is unknown or expired" in proc.stderr

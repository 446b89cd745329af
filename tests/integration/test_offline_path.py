"""The README's "Try the distributed path without a key" (issue 20, point 8), as written: the
stand-in judge from ``judgeq dev fake-judge``, a Redis, a worker and ``submit --wait`` with the
Anthropic judge, no real key anywhere."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from .harness import RedisServer, Worker, free_port, judgeq_cli, wait_for, worker_env

pytestmark = pytest.mark.integration

ROOT = Path(__file__).parent.parent.parent


def test_the_readme_offline_path_grades_with_the_anthropic_judge(
    tmp_path: Path, redis_server: RedisServer, start_worker: Callable[..., Worker]
) -> None:
    port = free_port()
    log = (tmp_path / "fake.log").open("w")
    fake = subprocess.Popen(
        [sys.executable, "-m", "judgeq", "dev", "fake-judge", "--port", str(port), "--latency", "0.01"],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        url = f"http://127.0.0.1:{port}"
        wait_for(
            lambda: f"export ANTHROPIC_BASE_URL={url}" in (tmp_path / "fake.log").read_text(), 60, "ready"
        )
        env = worker_env(redis_server.url, url, ANTHROPIC_API_KEY="fake-key")
        start_worker("w1", env=env)
        out = tmp_path / "out"
        proc = judgeq_cli(
            "submit", str(ROOT / "examples" / "responses.jsonl"), "--rubric", "quality",
            "--judge", "anthropic:claude-haiku-4-5", "--wait", "--run-id", "offline", "--out", str(out),
            env=env,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        report = json.loads((out / "offline" / "report.json").read_text())
        assert report["judge"]["model"] == "claude-haiku-4-5"
        assert report["counts"]["graded"] == 30 and report["usage"]["input_tokens"] > 0
    finally:
        fake.terminate()
        fake.wait(timeout=30)
        log.close()

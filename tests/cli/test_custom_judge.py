"""A custom judge (issue 21, point 6): examples/custom_judge.py, a judge calling an in-house
HTTP service, loaded by ``--judge python:custom_judge:make_judge``, gets judgeq's retries,
reports and nulls; a module not allowed by JUDGEQ_JUDGE_MODULES is never imported."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest

from judgeq.testing.fake_anthropic import generate_from_schema

ROOT = Path(__file__).parent.parent.parent


class Service(BaseHTTPRequestHandler):
    calls: ClassVar[list[dict[str, Any]]] = []

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        Service.calls.append(body)
        if "[[busy]]" in body["user"] and sum("[[busy]]" in c["user"] for c in Service.calls) == 1:
            self.send_response(429)  # the first call of that job: busy; judgeq retries it
            self.send_header("retry-after", "0")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if "[[down]]" in body["user"]:
            self.send_response(500)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        verdict = generate_from_schema(body["schema"], body["user"], score=6)
        out = json.dumps(
            {"verdict": verdict, "model": "inhouse-v7", "usage": {"input_tokens": 11, "output_tokens": 5}}
        )
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out.encode())


class Backlogged(ThreadingHTTPServer):
    request_queue_size = 64  # a real service's backlog: the default 5 resets connections when
    # judgeq's 16 calls arrive at once on a loaded machine


@pytest.fixture
def service() -> Iterator[str]:
    Service.calls = []
    server = Backlogged(("127.0.0.1", 0), Service)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/grade"
    server.shutdown()


def run(tmp_path: Path, jobs: Path, **extra: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "JUDGEQ_", "OPENAI_"))}
    env.update(
        HOME=str(tmp_path), JUDGEQ_RESULTS_DIR=str(tmp_path / "r"), PYTHONPATH=str(ROOT / "examples"), **extra
    )
    return subprocess.run(
        [sys.executable, "-m", "judgeq", "run", str(jobs), "--rubric", "quality",
         "--judge", "python:custom_judge:make_judge", "--run-id", "custom", "--judge-deadline", "10"],
        capture_output=True, text=True, env=env, timeout=180,
    )  # fmt: skip


def test_a_custom_judge_grades_with_judgeqs_retries_and_nulls(tmp_path: Path, service: str) -> None:
    rows = [json.loads(x) for x in (ROOT / "examples" / "responses.jsonl").read_text().splitlines() if x]
    rows[0]["output"] += " [[busy]]"
    rows[1]["output"] += " [[down]]"
    jobs = tmp_path / "jobs.jsonl"
    jobs.write_text("".join(json.dumps(r) + "\n" for r in rows))
    proc = run(tmp_path, jobs, JUDGE_SERVICE_URL=service, JUDGEQ_JUDGE_MODULES="custom_judge")
    assert proc.returncode == 0, proc.stderr
    report = json.loads((tmp_path / "r" / "custom" / "report.json").read_text())
    assert report["judge"]["provider"] == "python" and report["judge"]["model"] == "custom_judge:make_judge"
    # (the deadline bounds the failing job's retries; 3 s was too short for a loaded machine:
    # three other jobs once ended as nulls)
    assert report["counts"]["graded"] == len(rows) - 1, report["counts"]
    assert report["counts"]["null_by_reason"] == {"api_error": 1}  # retried, then its null
    assert report["overall"]["mean"] == pytest.approx(6.0)
    busy = [c for c in Service.calls if "[[busy]]" in c["user"]]
    assert len(busy) == 2  # refused once (429), then graded


def test_a_module_not_allowed_is_never_imported(tmp_path: Path, service: str) -> None:
    marker = tmp_path / "imported"
    proc = run(tmp_path, ROOT / "examples" / "responses.jsonl", JUDGE_SERVICE_URL=service)
    assert proc.returncode == 2 and len(proc.stderr.splitlines()) == 1, proc.stderr
    assert "set JUDGEQ_JUDGE_MODULES=custom_judge" in proc.stderr
    assert not marker.exists() and Service.calls == []


def test_a_worker_serves_a_custom_judge_only_from_a_module_it_allows(monkeypatch: pytest.MonkeyPatch) -> None:
    from judgeq.judges import can_serve
    from judgeq.settings import load_settings

    monkeypatch.syspath_prepend(str(ROOT / "examples"))
    assert not can_serve(load_settings(), "python", "custom_judge:make_judge")  # not allowed here
    monkeypatch.setenv("JUDGEQ_JUDGE_MODULES", "custom_judge")
    assert can_serve(load_settings(), "python", "custom_judge:make_judge")
    monkeypatch.setenv("JUDGEQ_JUDGE_MODULES", "custom_judge,no_such_module_here")
    assert not can_serve(load_settings(), "python", "no_such_module_here:make")  # allowed, not installed
    assert not can_serve(load_settings(), "plugin", "no-such-plugin")


def test_the_repair_leaves_alone_a_run_no_live_worker_can_serve() -> None:
    import fakeredis

    from judgeq.store.redis import RedisStore
    from workers.repair import _served

    store = RedisStore(fakeredis.FakeRedis(decode_responses=True))
    judges = [("openai", "gpt-x")]
    assert _served(store, "judgeq", judges)  # no worker says anything: taken as able
    store.worker_heartbeat("judgeq", "w1@h", 30, serves=("anthropic", "lexical"))
    assert not _served(store, "judgeq", judges)  # its messages bounce; none is lost
    store.worker_heartbeat("judgeq", "w2@h", 30, serves=("openai", "lexical"))
    assert _served(store, "judgeq", judges)

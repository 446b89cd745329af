"""Shared pieces of the benchmarks: a private redis-server, the fake judge API in its own
process, worker processes. Everything on loopback; every process is stopped on exit."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

API_KEY = "bench-key"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def redis_server(
    workdir: Path, *, aof: bool = False
) -> Iterator[tuple[str, subprocess.Popen[bytes], list[str]]]:
    if shutil.which("redis-server") is None:
        sys.exit("benchmarks need redis-server on the PATH (apt-get install redis-server)")
    port = free_port()
    args = [
        "redis-server",
        "--port",
        str(port),
        "--bind",
        "127.0.0.1",
        "--dir",
        str(workdir),
        "--save",
        "",
        "--appendonly",
        "yes" if aof else "no",
        "--maxmemory-policy",
        "noeviction",
        "--logfile",
        str(workdir / "redis.log"),
    ]
    proc = subprocess.Popen(args)
    url = f"redis://127.0.0.1:{port}/0"
    import redis

    client = redis.Redis.from_url(url)
    for _ in range(200):
        try:
            client.ping()
            break
        except redis.ConnectionError:
            time.sleep(0.05)
    try:
        yield url, proc, args
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@contextlib.contextmanager
def fake_api(
    latency: float,
    *,
    timeout_sleep: float = 5.0,
    rpm: int | None = None,
    headers: bool = True,
    limit_model: str = "token_bucket",
    procs: list[subprocess.Popen[str]] | None = None,
) -> Iterator[str]:
    """The fake judge API in its own process; its base URL. ``limit_model``: how ``rpm`` is
    enforced, ``token_bucket``, ``sliding_window`` or ``per_second`` (see
    :mod:`judgeq.testing.fake_anthropic`); ``headers=False``: no ``anthropic-ratelimit-*``;
    ``procs``: the server's process is appended to it (to read its CPU time)."""
    limits = (["--rpm", str(rpm)] if rpm else []) + ([] if headers else ["--no-limit-headers"])
    limits += ["--limit-model", limit_model]
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "judgeq.testing.fake_anthropic",
            *limits,
            "--port",
            "0",
            "--latency",
            str(latency),
            "--api-key",
            API_KEY,
            "--timeout-sleep",
            str(timeout_sleep),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    if procs is not None:
        procs.append(proc)
    line = proc.stdout.readline()
    if not line.startswith("READY "):
        proc.kill()
        sys.exit(f"fake judge did not start: {line!r}")
    try:
        yield line.split()[1]
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def cpu_seconds(pid: int) -> float:
    """User and system CPU seconds a live process (all its threads) has used (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def fake_stats(url: str, what: str = "stats") -> dict:
    with urllib.request.urlopen(f"{url}/_fake/{what}", timeout=5) as r:
        return json.loads(r.read())


def env_for(redis_url: str, api_url: str, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JUDGEQ_", "ANTHROPIC_"))}
    env.update(
        JUDGEQ_REDIS_URL=redis_url,
        ANTHROPIC_API_KEY=API_KEY,
        ANTHROPIC_BASE_URL=api_url,
        PYTHONUNBUFFERED="1",
        JUDGEQ_LOG_LEVEL="WARNING",
    )
    env.update(extra)
    return env


class Worker:
    def __init__(self, env: dict[str, str], logdir: Path, name: str, concurrency: int) -> None:
        self.env, self.name, self.concurrency = env, name, concurrency
        self.log = logdir / f"{name}.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> Worker:
        fh = self.log.open("ab")
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "judgeq",
                "worker",
                "-c",
                str(self.concurrency),
                "-n",
                f"{self.name}@%h",
                "-l",
                self.env.get("JUDGEQ_LOG_LEVEL", "INFO"),
            ],
            env=self.env,
            stdout=fh,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        deadline = time.monotonic() + 60
        while b"judgeq worker ready" not in self.log.read_bytes():
            if time.monotonic() > deadline or self.proc.poll() is not None:
                raise RuntimeError(f"worker {self.name} did not start:\n{self.log.read_text()[-2000:]}")
            time.sleep(0.1)
        return self

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        self.proc = None

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.kill()
        self.proc = None


def judgeq_cmd(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """Run the judgeq CLI; exits the benchmark with its stderr when it fails."""
    proc = subprocess.run([sys.executable, "-m", "judgeq", *args], env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"judgeq {args[0]} failed:\n{proc.stderr[-3000:]}")
    return proc


def submit_and_wait(batch: Path, out: Path, env: dict[str, str], judge: str) -> tuple[str, dict]:
    """``judgeq submit --wait`` with the quality rubric; (run id, report)."""
    proc = judgeq_cmd(
        "submit", str(batch), "--rubric", "quality", "--judge", judge, "--wait", "--out", str(out), env=env
    )
    run_id = proc.stdout.splitlines()[0].strip()
    return run_id, json.loads((out / run_id / "report.json").read_text())


def write_batch(path: Path, n: int, directives: dict[int, str] | None = None) -> Path:
    directives = directives or {}
    with path.open("w") as f:
        for i in range(n):
            extra = f" [[fake:{directives[i]}]]" if i in directives else ""
            f.write(
                json.dumps(
                    {
                        "id": f"b{i:07d}",
                        "input": f"Question {i}: what is {i} + {i}?",
                        "output": f"The answer is {2 * i}.{extra}",
                        "expected_answer": str(2 * i),
                        "model": f"sys-{i % 3}",
                    }
                )
                + "\n"
            )
    return path


@contextlib.contextmanager
def workdir(prefix: str) -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix=prefix) as d:
        yield Path(d)

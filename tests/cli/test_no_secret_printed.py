"""No secret ever printed: a marker secret in every setting that can hold one, every command
that reads it, every error path it takes; stdout and stderr scanned for the marker (issue 29:
a malformed Redis URL, a judge URL and a base URL with a password were printed whole).

Stored state is scanned where it is written: Redis, logs and reports by
tests/integration/test_pipeline.py::test_api_key_never_reaches_redis_logs_or_reports, the
reply cache and JSON logs here (a successful run with the marker as the key)."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from judgeq.store.reply_cache import decode_reply
from judgeq.testing.canned import canned_server
from judgeq.testing.fake_anthropic import FakeMessagesAPI

ROOT = Path(__file__).parent.parent.parent
BATCH = str(ROOT / "examples" / "responses.jsonl")
MARK = "Zq7MARKERsecret9"
"""The secret: a password, a key, a token; never in anything a command prints."""


DOWN = 1
"""A port nobody listens on (binding it needs root): every connection refused."""

REDIS_URLS = {
    "unreachable": f"redis://:{MARK}@127.0.0.1:{DOWN}/0",
    "user and password": f"redis://ops:{MARK}@127.0.0.1:{DOWN}/0",
    "scheme without colon": f"rediss//:{MARK}@127.0.0.1:{DOWN}/0",
    "scheme without slashes": f"redis:{MARK}@127.0.0.1:{DOWN}/0",
    "slash in password": f"redis://:{MARK}/x@127.0.0.1:{DOWN}/0",
    "at in password": f"redis://:{MARK}@x@127.0.0.1:{DOWN}/0",
    "port not a number": f"redis://:{MARK}@127.0.0.1:port/0",
    "bad host": f"redis://:{MARK}@[bad/0",
    "bad database": f"redis://:{MARK}@127.0.0.1:{DOWN}/db",
    "unknown scheme": f"redsi://:{MARK}@127.0.0.1:{DOWN}/0",
    "bad query": f"redis://:{MARK}@127.0.0.1:{DOWN}/0?socket_timeout=soon",
    "sentinel": f"sentinel://:{MARK}@127.0.0.1:{DOWN}/0?master_name=m",
    "sentinel without master": f"sentinel://:{MARK}@127.0.0.1:{DOWN}/0",
}

FLOWER_SHAPES = ("scheme without colon", "scheme without slashes", "bad database", "user and password")
"""Flower runs until stopped: the shapes that reached Celery (printed by Flower) before."""

COMMANDS = {
    "status": ["status", "some-run"],
    "runs": ["runs"],
    "submit": ["submit", BATCH, "--rubric", "quality", "--judge", "lexical"],
    "resume": ["resume", "some-run"],
    "budget list": ["budget", "list"],
    "exporter": ["exporter", "--port", "0"],
    "flower": ["flower", "--port", "0"],
}


def env_with(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "JUDGEQ_", "OPENAI_"))}
    env.update(JUDGEQ_FLOWER_USER="ops", JUDGEQ_FLOWER_PASSWORD=MARK, **extra)
    return env


def judgeq(
    *args: str, env: dict[str, str], cwd: Path, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "judgeq", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=timeout,
    )


def assert_clean(proc: subprocess.CompletedProcess[str]) -> None:
    out = proc.stdout + proc.stderr
    assert MARK not in out, out[-3000:]
    assert "Traceback" not in out, out[-3000:]


def serve_briefly(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run a serving command until it exits or has run 8 s (its broker unreachable: retrying)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "judgeq", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=cwd,
    )
    try:
        out, err = proc.communicate(timeout=8)
    except subprocess.TimeoutExpired:
        proc.terminate()
        try:
            out, err = proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
    return subprocess.CompletedProcess(args, proc.returncode, out, err)


SLOW = pytest.mark.slow
CELLS = [
    pytest.param(command, shape, id=f"{command}-{shape}", marks=[] if command == "status" else [SLOW])
    for command in COMMANDS
    for shape in REDIS_URLS
    if command != "flower" or shape in FLOWER_SHAPES
]


@pytest.mark.parametrize(("command", "shape"), CELLS)
def test_a_redis_url_with_a_password_is_never_printed(command: str, shape: str, tmp_path: Path) -> None:
    url = REDIS_URLS[shape]
    # the flag as well as the variable where a command has the flag and reads it its own way
    for how in ("env", "flag") if command in ("status", "submit") else ("env",):
        args = list(COMMANDS[command])
        env = env_with(JUDGEQ_RESULTS_DIR=str(tmp_path))
        if how == "env":
            env["JUDGEQ_REDIS_URL"] = url
        else:
            args += ["--redis-url", url]
        if command == "flower":  # Flower waits for its broker: read what it says, then stop it
            assert_clean(serve_briefly(args, env, tmp_path))
            continue
        proc = judgeq(*args, env=env, cwd=tmp_path)
        # (runs: lists the results folders when Redis cannot be reached, and says so)
        assert proc.returncode != 0 or command == "runs", (command, shape, proc.stdout[-500:])
        assert_clean(proc)


@pytest.mark.parametrize(
    "broker",
    [
        f"amqp://guest:{MARK}@127.0.0.1:{DOWN}//",
        f"amqp//guest:{MARK}@127.0.0.1:{DOWN}//",
        f"amqp://guest:{MARK}@[x",
    ],
    ids=["unreachable", "scheme without colon", "bad host"],
)
def test_a_broker_url_with_a_password_is_never_printed(broker: str, tmp_path: Path) -> None:
    env = env_with(JUDGEQ_BROKER_URL=broker, JUDGEQ_REDIS_URL=f"redis://127.0.0.1:{DOWN}/0")
    for args in (["submit", BATCH, "--rubric", "quality", "--judge", "lexical"], ["status", "x"]):
        assert_clean(judgeq(*args, env=env, cwd=tmp_path))


@pytest.fixture
def html_server() -> Iterator[str]:
    """A server answering every request with an HTML page (a proxy's login page, a wrong port)."""
    with canned_server(b"<html><body>Sign in</body></html>") as url:
        yield url.removeprefix("http://")


def test_judge_urls_and_keys_with_a_secret_are_never_printed(html_server: str, tmp_path: Path) -> None:
    run = ["run", BATCH, "--rubric", "quality", "--max-cost", "1"]
    cases = [
        # a judge URL holding credentials: refused, never echoed
        (["--judge", f"openai-compatible:m@http://user:{MARK}@{html_server}/v1"], {}),
        (["--judge", f"openai-compatible:m@http://{html_server}/v1?key={MARK}"], {"JUDGEQ_JUDGE_URLS": "http://"}),
        # a base URL with a password, the server answering HTML: the preflight's error
        (["--judge", "openai:gpt-test"], {"OPENAI_API_KEY": MARK, "OPENAI_BASE_URL": f"http://u:{MARK}@{html_server}/v1"}),
        (["--judge", "openai:gpt-test"], {"OPENAI_API_KEY": MARK, "OPENAI_BASE_URL": f"http://{html_server}/v1"}),
        (["--judge", "anthropic:claude-x"], {"ANTHROPIC_API_KEY": MARK, "ANTHROPIC_BASE_URL": f"http://{html_server}"}),
        (["--judge", "anthropic:claude-x"], {"ANTHROPIC_API_KEY": "k", "ANTHROPIC_BASE_URL": f"http://a:{MARK}@{html_server}"}),
        # unreachable servers
        (["--judge", "anthropic:claude-x"], {"ANTHROPIC_API_KEY": MARK, "ANTHROPIC_BASE_URL": f"http://127.0.0.1:{DOWN}"}),
        (["--judge", f"openai-compatible:m@http://127.0.0.1:{DOWN}/v1"],
         {"OPENAI_COMPATIBLE_API_KEY": MARK, "JUDGEQ_JUDGE_URLS": "http://127.0.0.1"}),
    ]  # fmt: skip
    for extra_args, extra_env in cases:
        env = env_with(JUDGEQ_RESULTS_DIR=str(tmp_path / "r"), JUDGEQ_JUDGE_DEADLINE="5", **extra_env)
        for args in ([*run, *extra_args], [*run, *extra_args, "--dry-run"]):
            proc = judgeq(*args, env=env, cwd=tmp_path, timeout=120)
            assert_clean(proc)
    for f in (tmp_path / "r").rglob("*"):
        if f.is_file():
            assert MARK not in f.read_text(errors="replace"), f


def test_a_run_with_the_marker_as_its_key_keeps_it_out_of_logs_reports_and_the_cache(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    with FakeMessagesAPI(api_key=MARK) as fake:
        batch = tmp_path / "b.jsonl"
        rows = Path(BATCH).read_text().splitlines()
        rows[3] = rows[3].replace('"output": "', '"output": "[[fake:garbage]] ', 1)
        batch.write_text("\n".join(rows) + "\n")
        env = env_with(
            ANTHROPIC_API_KEY=MARK,
            ANTHROPIC_BASE_URL=fake.base_url,
            JUDGEQ_LOG_FORMAT="json",
            JUDGEQ_CACHE_DIR=str(cache),
            JUDGEQ_RESULTS_DIR=str(tmp_path / "r"),
        )
        proc = judgeq(
            "run", str(batch), "--rubric", "quality", "--judge", "anthropic:claude-x", env=env, cwd=tmp_path
        )
        assert_clean(proc)
        # a key the server refuses: the preflight's error
        env["ANTHROPIC_API_KEY"] = MARK[::-1]
        refused = judgeq(
            "run", str(batch), "--rubric", "quality", "--judge", "anthropic:claude-x", env=env, cwd=tmp_path
        )
        assert refused.returncode != 0 and MARK[::-1] not in refused.stdout + refused.stderr
        assert_clean(refused)
    files = [f for f in (tmp_path / "r").rglob("*") if f.is_file()]
    assert any(f.name == "report.json" for f in files), proc.stderr[-2000:]
    for f in files:
        assert MARK.encode() not in f.read_bytes(), f
    dbs = list(cache.rglob("*.sqlite3"))
    assert dbs, "the run wrote its reply cache"
    for db in dbs:  # every entry, unpacked
        with sqlite3.connect(db) as conn:
            rows = conn.execute("select key, reply from replies").fetchall()
        assert len(rows) >= 29
        for key, packed in rows:
            reply = decode_reply(packed)
            assert MARK not in key and MARK not in repr(reply)


def test_a_judge_error_quoting_a_secret_reaches_neither_the_terminal_nor_the_files(tmp_path: Path) -> None:
    # (a second reviewer's case: a judge whose error quotes a header: judgeq run printed the key
    # in every traceback and wrote it into verdicts.jsonl and report.html)
    (tmp_path / "leaky_judge.py").write_text(
        "import os\n"
        "class Judge:\n"
        "    provider, model = 'python', 'leaky'\n"
        "    def complete(self, request, *, timeout):\n"
        "        raise RuntimeError('bad header x-api-key=' + os.environ['MYCORP_API_KEY'])\n"
    )
    env = env_with(
        MYCORP_API_KEY=MARK, JUDGEQ_JUDGE_MODULES="leaky_judge", PYTHONPATH=str(tmp_path),
        JUDGEQ_RESULTS_DIR=str(tmp_path / "r"),
    )  # fmt: skip
    proc = judgeq(
        "run", BATCH, "--rubric", "quality", "--judge", "python:leaky_judge:Judge", env=env, cwd=tmp_path
    )
    assert_clean_of_mark(proc)
    files = [f for f in (tmp_path / "r").rglob("*") if f.is_file()]
    assert any(f.name == "verdicts.jsonl" for f in files), proc.stderr[-2000:]
    for f in files:
        assert MARK.encode() not in f.read_bytes(), f


def assert_clean_of_mark(proc: subprocess.CompletedProcess[str]) -> None:
    """The marker is nowhere in what the command printed (a traceback of a judge's bug may be)."""
    assert MARK not in proc.stdout + proc.stderr, (proc.stdout + proc.stderr)[-3000:]

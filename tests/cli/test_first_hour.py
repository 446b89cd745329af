"""A new user's first hour (issue 20): what the README leads to must never end in an internal
error, a silent default or a misleading figure. Each test runs the real CLI (a subprocess, the
installed SDKs: no constructor is mocked)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent.parent
RESPONSES = ROOT / "examples" / "responses.jsonl"
CLOSED = "redis://127.0.0.1:1/0"  # nothing listens: a command that got this far would fail on Redis


def env_with(tmp_path: Path, **extra: str) -> dict[str, str]:
    """The environment without any JUDGEQ_/ANTHROPIC_ setting and with no credential the
    Anthropic SDK could find on disk (a new user's: no config folder)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "JUDGEQ_", "XDG_CONFIG"))}
    env.update(HOME=str(tmp_path), JUDGEQ_RESULTS_DIR=str(tmp_path / "r"))
    env.update(extra)
    return env


def judgeq(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "judgeq", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        cwd=env["HOME"],
    )


def only_error_line(proc: subprocess.CompletedProcess[str]) -> str:
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("judgeq: error: "), proc.stderr
    assert "Traceback" not in proc.stderr and "TypeError" not in proc.stderr
    return lines[0]


# -- 1/3: missing credentials are one line and exit 2, before anything is sent or enqueued -------

KEYS = pytest.mark.parametrize("key", [None, "", "   ", "\t"], ids=["no-variable", "empty", "spaces", "tab"])


@KEYS
@pytest.mark.parametrize("command", ["run", "submit"])
def test_an_anthropic_judge_without_a_usable_key_is_one_line_and_exit_2(
    tmp_path: Path, key: str | None, command: str
) -> None:
    env = env_with(tmp_path) if key is None else env_with(tmp_path, ANTHROPIC_API_KEY=key)
    extra = ["--redis-url", CLOSED] if command == "submit" else []
    proc = judgeq(env, command, str(RESPONSES), "--rubric", "quality", "--judge", "anthropic", *extra)
    line = only_error_line(proc)
    assert "anthropic:claude-sonnet-4-5 needs an Anthropic API key" in line
    assert ("is not set" if key is None else "is blank") in line
    assert "Redis" not in line  # refused before the store was ever reached
    assert not (tmp_path / "r").exists() or not any((tmp_path / "r").iterdir())  # no run folder


def test_every_judge_of_a_council_is_checked(tmp_path: Path) -> None:
    env = env_with(tmp_path)
    proc = judgeq(
        env, "submit", str(RESPONSES), "--rubric", "quality", "--judge", "lexical",
        "--judge", "anthropic:claude-haiku-4-5", "--redis-url", CLOSED,
    )  # fmt: skip
    assert "anthropic:claude-haiku-4-5 needs an Anthropic API key" in only_error_line(proc)


def test_the_installed_sdk_builds_a_client_without_a_key_and_the_judge_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # what made this an internal error: anthropic 2.x builds a client with no credential and
    # only fails (TypeError) when a request is built. The judge must see it up front.
    import anthropic

    from judgeq.errors import JudgeAuthError
    from judgeq.grading.request import JudgeRequest
    from judgeq.judges.anthropic import AnthropicJudge

    for name in [k for k in os.environ if k.startswith("ANTHROPIC_")]:
        monkeypatch.delenv(name)
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    anthropic.Anthropic()  # the SDK itself does not refuse ...
    for key in (None, "  "):
        if key is not None:
            monkeypatch.setenv("ANTHROPIC_API_KEY", key)
        judge = AnthropicJudge("claude-sonnet-4-5", base_url="http://127.0.0.1:1")
        assert not judge.has_credentials
        with pytest.raises(JudgeAuthError, match="no Anthropic API key"):  # ... and no request leaves
            judge.complete(JudgeRequest(system=("s",), user="u", output_schema={}), timeout=1.0)
        with pytest.raises(JudgeAuthError):
            judge.check(timeout=1.0)
    assert AnthropicJudge("m", api_key="sk-x", base_url="http://127.0.0.1:1").has_credentials

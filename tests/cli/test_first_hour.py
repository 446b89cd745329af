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


# -- 2: one default judge, decided in one place ----------------------------------------------


def test_one_default_judge_for_run_submit_worker_and_the_api(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from judgeq.judges import default_judge, served_providers
    from judgeq.producer.plan import resolve_judge
    from judgeq.settings import load_settings
    from workers.health import judge_setup_problem

    for name in [k for k in os.environ if k.startswith(("ANTHROPIC_", "JUDGEQ_"))]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    for key, expected in ((None, "lexical"), ("  ", "lexical"), ("sk-test", "anthropic:claude-sonnet-4-5")):
        if key is not None:
            monkeypatch.setenv("ANTHROPIC_API_KEY", key)
        settings = load_settings()
        judge, _ = default_judge(settings)
        assert str(judge) == expected
        assert str(resolve_judge(None, settings)[0]) == expected  # run, submit and the API
        assert ("anthropic" in served_providers(settings)) == (expected != "lexical")
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    assert judge_setup_problem(load_settings()) is None  # a worker without a key serves the offline judge
    monkeypatch.setenv("JUDGEQ_JUDGE", "anthropic:claude-x")
    assert str(default_judge(load_settings())[0]) == "anthropic:claude-x"
    assert "needs ANTHROPIC_API_KEY set" in (judge_setup_problem(load_settings()) or "")  # asked for, cannot


def test_status_names_the_judge_no_worker_serves() -> None:
    from types import SimpleNamespace

    import fakeredis

    from judgeq.producer.cli.status import worker_lines
    from judgeq.store.redis import RedisStore

    store = RedisStore(fakeredis.FakeRedis(decode_responses=True))
    snap = SimpleNamespace(last_done_s=5.0, lane="", total=10, done=0)
    judges = [("anthropic", "claude-x")]
    store.worker_heartbeat("judgeq", "w1@host", 30, serves=("lexical",))
    lines = worker_lines(store, "judgeq", snap, judges)
    assert lines[-1] == (
        "WARNING: the run needs judge anthropic:claude-x and no worker serves it (1 serve the "
        "offline lexical judge only): start a worker with ANTHROPIC_API_KEY set"
    )
    assert worker_lines(store, "judgeq", snap, [("lexical", "lexical-overlap-v1")]) == [
        "workers  1 consuming queue 'judgeq'"
    ]
    store.worker_heartbeat("judgeq", "w2@host", 30, serves=("anthropic", "lexical"))
    assert len(worker_lines(store, "judgeq", snap, judges)) == 1


# -- 5: compare is a safe gate ------------------------------------------------------------------


@pytest.fixture(scope="module")
def graded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Results folders of offline runs: 'a' and 'b' (the example jobs, rubric quality), 'other'
    (the same jobs under other ids), 'helpful' (rubric helpfulness), 'judge2' (a copy of 'a'
    whose report names another judge)."""
    import json
    import shutil

    root = tmp_path_factory.mktemp("graded")
    env = env_with(root)
    renamed = root / "renamed.jsonl"
    rows = [json.loads(line) for line in RESPONSES.read_text().splitlines() if line.strip()]
    renamed.write_text("".join(json.dumps({**r, "id": f"other-{r['id']}"}) + "\n" for r in rows))
    for run_id, jobs, rubric in (
        ("a", RESPONSES, "quality"),
        ("b", RESPONSES, "quality"),
        ("other", renamed, "quality"),
        ("helpful", RESPONSES, "helpfulness"),
    ):
        proc = judgeq(env, "run", str(jobs), "--rubric", rubric, "--run-id", run_id)
        assert proc.returncode == 0, proc.stderr
    results = root / "r"
    shutil.copytree(results / "a", results / "judge2")
    report = json.loads((results / "judge2" / "report.json").read_text())
    report["run_id"], report["judge"]["provider"], report["judge"]["model"] = (
        "judge2",
        "anthropic",
        "claude-x",
    )
    (results / "judge2" / "report.json").write_text(json.dumps(report))
    return root


def test_compare_shows_both_runs_rubric_and_judge(graded: Path) -> None:
    proc = judgeq(env_with(graded), "compare", "a", "b", "--fail-on-regression")
    assert proc.returncode == 0, proc.stderr
    fingerprint = __import__("json").loads((graded / "r" / "a" / "report.json").read_text())["rubric"][
        "fingerprint"
    ]
    assert f"- A: rubric quality 1.0.0 (fingerprint {fingerprint}), judge lexical" in proc.stdout
    assert f"- B: rubric quality 1.0.0 (fingerprint {fingerprint}), judge lexical" in proc.stdout


@pytest.mark.parametrize(
    ("other", "what"),
    [
        ("helpful", "differ in rubric (quality 1.0.0"),
        ("judge2", "differ in judge (lexical vs anthropic:claude-x)"),
    ],
)
def test_compare_refuses_runs_of_another_rubric_or_judge_unless_allowed(
    graded: Path, other: str, what: str
) -> None:
    env = env_with(graded)
    line = only_error_line(judgeq(env, "compare", "a", other, "--fail-on-regression"))
    assert what in line and "--allow-different" in line
    allowed = judgeq(env, "compare", "a", other, "--allow-different")
    assert allowed.returncode == 0, allowed.stderr
    assert "**Compared though they differ** in" in allowed.stdout


def test_the_gate_refuses_runs_that_share_too_few_jobs(graded: Path) -> None:
    env = env_with(graded)
    proc = judgeq(env, "compare", "a", "other", "--fail-on-regression")
    line = only_error_line(proc)
    assert "only 0 of run A's 30 jobs matched a job of the other run by id (0%; --min-matched is 90%)" in line
    assert judgeq(env, "compare", "a", "other").returncode == 0  # not a gate: it only shows
    assert judgeq(env, "compare", "a", "other", "--fail-on-regression", "--min-matched", "0").returncode == 0
    shown = judgeq(env, "compare", "a", "other").stdout
    assert (
        "Nothing compared: no job of A matched a job of B by id." in shown
        and "No significant drop" not in shown
    )


# -- 6: rubrics and flags -----------------------------------------------------------------------


def test_rubrics_show_pairwise_renders_both_outputs(tmp_path: Path) -> None:
    proc = judgeq(env_with(tmp_path), "rubrics", "show", "pairwise")
    assert proc.returncode == 0, proc.stderr
    user = proc.stdout.split("--- user message (per job) ---")[1].split("--- output schema ---")[0]
    assert "Output A:" in user and "Output B:" in user and "<output_a-" in user and "<output_b-" in user


BROKEN = """---
name: Bad Name
version: one
description: several problems
scale: 1-10
pass_threshold: 42
dimensions:
  - {name: accuracy, weight: 0.5, description: a, anchors: {"0-3": x}}
  - {name: accuracy, weight: 0.5, description: b}
---
Body.
"""


def test_rubrics_validate_lists_every_problem_in_one_run(tmp_path: Path) -> None:
    path = tmp_path / "broken.md"
    path.write_text(BROKEN)
    proc = judgeq(env_with(tmp_path), "rubrics", "validate", str(path))
    assert proc.returncode == 1
    lines = proc.stdout.splitlines()
    for problem in (
        "name: 'Bad Name' must be lowercase",
        "version: 'one' is not semver",
        "pass_threshold: 42.0 is outside the scale 1-10",
        "dimensions: duplicate name 'accuracy'",
        "dimensions.accuracy.anchors: band '0-3' is not within the scale 1-10",
    ):
        assert sum(problem in line for line in lines) == 1, (problem, proc.stdout)
    assert all(line.startswith(f"INVALID {path}: ") for line in lines)


def test_a_misspelt_rubric_name_gets_a_suggestion(tmp_path: Path) -> None:
    line = only_error_line(judgeq(env_with(tmp_path), "run", str(RESPONSES), "--rubric", "qualty"))
    assert line.endswith("Did you mean 'quality'?")


def test_pair_jobs_with_a_response_rubric_are_refused_for_their_kind_not_their_labels(tmp_path: Path) -> None:
    import json

    pairs = tmp_path / "pairs.jsonl"
    rows = [{"id": f"p{i}", "input": "q", "output_a": "a", "output_b": "b", "label": "a"} for i in range(10)]
    pairs.write_text("".join(json.dumps(r) + "\n" for r in rows))
    line = only_error_line(judgeq(env_with(tmp_path), "run", str(pairs), "--rubric", "quality"))
    assert "has 10 pair jobs: use --rubric pairwise" in line


def test_help_has_no_doubled_percent_and_a_bad_flag_is_named_as_given(tmp_path: Path) -> None:
    env = env_with(tmp_path)
    for command in ("run", "submit", "worker", "compare"):
        assert "%%" not in judgeq(env, command, "--help").stdout
    line = only_error_line(judgeq(env, "run", str(RESPONSES), "--rubric", "quality", "-c", "0"))
    assert line.startswith("judgeq: error: --concurrency: ")
    env_line = only_error_line(
        judgeq({**env, "JUDGEQ_CONCURRENCY": "0"}, "run", str(RESPONSES), "--rubric", "quality")
    )
    assert env_line.startswith("judgeq: error: JUDGEQ_CONCURRENCY: ")


def test_a_max_cost_pause_says_what_was_spent_in_all_and_promises_no_eta() -> None:
    import dataclasses

    from judgeq.producer.progress import Snapshot, pause_line, progress_line
    from judgeq.store.base import cost_pause_reason

    reason = cost_pause_reason(0.1014, 0.1) + " (raise it with: judgeq resume RUN --max-cost USD)"
    snap = Snapshot(
        run_id="r1", state="paused", total=100, done=40, enqueued=100, nulls={}, rate=2.0, eta_s=30.0,
        pause_reason=reason, cost_usd=0.5432,
    )  # fmt: skip
    line = pause_line(snap)
    assert "$0.1014 spent of the $0.1000 allowed when it paused; $0.5432 spent in all" in line
    assert "judgeq resume r1" in line
    assert "ETA – (paused)" in progress_line(snap) and "ETA 30s" not in progress_line(snap)
    # nothing more was spent after the pause: the line stays as it was
    assert "in all" not in pause_line(dataclasses.replace(snap, cost_usd=0.1014))


def test_the_api_says_which_judge_it_chose(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    import logging

    import judgeq

    for name in [k for k in os.environ if k.startswith("ANTHROPIC_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("HOME", str(tmp_path))
    rows = [{"id": "a", "input": "q", "output": "o"}]
    with caplog.at_level(logging.INFO, logger="judgeq"):
        report = judgeq.grade(rows, rubric="quality", out=tmp_path / "out")
    assert report["judge"]["provider"] == "lexical"
    assert any("offline 'lexical' judge" in r.getMessage() for r in caplog.records)

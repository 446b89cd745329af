"""The judge budget across worker processes: a stand-in that answers 429 beyond its
requests-per-minute limit, two workers, and no job ends rate_limited."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from judgeq.testing.fake_anthropic import FakeMessagesAPI

from .harness import SUBMIT, Worker, judgeq_cli, response_rows, write_batch

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("given", [True, False], ids=["rpm-given", "rpm-learned-from-headers"])
def test_workers_share_the_judge_budget_and_no_job_is_rate_limited(
    tmp_path: Path,
    env: dict[str, str],
    fake_api: FakeMessagesAPI,
    start_worker: Callable[..., Worker],
    given: bool,
) -> None:
    rpm = 600  # the stand-in's bucket holds 600; the budget paces 10 a second (x PACE) from the start
    fake_api.set_limits(rpm=rpm)
    # a short deadline: waiting for budget must not eat it
    extra = {"JUDGEQ_JUDGE_DEADLINE": "2", "JUDGEQ_JUDGE_TIMEOUT": "1"}
    start_worker("w1", env=extra)  # -c 8: 8 judge calls in flight at most
    start_worker("w2", env=extra)
    in_flight = 2 * 8
    batch = write_batch(tmp_path / "b.jsonl", response_rows(120))
    flags = ["--rpm", str(rpm)] if given else []
    out = tmp_path / "out"
    proc = judgeq_cli(
        "submit", str(batch), *SUBMIT, *flags, "--wait", "--out", str(out), env={**env, **extra}
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    report = json.loads((out / proc.stdout.splitlines()[0] / "report.json").read_text())
    assert report["counts"]["graded"] == 120 and report["counts"]["null"] == 0
    # the server admitted every job's call once
    assert len(fake_api.accepted_times()) >= 120
    if given:
        # The budget mirrors the server's bucket, so a 429 comes only from a call the budget let
        # through at a clock edge of the two buckets (at most the calls in flight: 2 workers x 8):
        # never a storm.
        assert fake_api.by_status.get(429, 0) <= in_flight, fake_api.by_status


def test_a_job_refused_for_itself_costs_ten_calls_and_no_other_job(
    tmp_path: Path,
    env: dict[str, str],
    fake_api: FakeMessagesAPI,
    start_worker: Callable[..., Worker],
) -> None:
    # a gateway without rate-limit headers that refuses five requests for themselves, every time
    fake_api.limit_headers = False
    start_worker("w1")
    start_worker("w2")
    bad = {3, 17, 29, 41, 55}
    rows = response_rows(60, directive=dict.fromkeys(bad, "429,retry_after=0"))
    batch = write_batch(tmp_path / "b.jsonl", rows)
    out = tmp_path / "out"
    proc = judgeq_cli("submit", str(batch), *SUBMIT, "--wait", "--out", str(out), env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    run_id = proc.stdout.splitlines()[0]
    report = json.loads((out / run_id / "report.json").read_text())
    assert report["counts"]["graded"] == 55
    assert report["counts"]["null_by_reason"] == {"rate_limited": 5}
    # each refused job made JUDGEQ_MAX_RATE_LIMITED (10) calls a pass, never 20 in one. A job
    # refused at the run's tail, when no other job had just been answered, is held and given a
    # second pass (the judge looked unavailable to everyone: judgeq.pipeline.holds.hold_kind):
    # on a loaded machine that happened once in a full CI run (60), so timing decides how many
    # passes, and the test holds what must be true of each
    injected = fake_api.stats()["injected_429"]
    assert injected >= 50 and injected % 10 == 0, injected
    # the judge's budget counted every call once, as the workers made them (whether a few
    # refused jobs at once looked like congestion depends on timing: benchmarks/refused.py
    # measures what that costs the others)
    budget = judgeq_cli("budget", env=env)
    assert budget.returncode == 0, budget.stderr
    counted = f"{55 + injected} requests sent, 55 served, {injected} refused (429)"
    assert counted in budget.stdout, budget.stdout


def test_judgeq_budget_sets_shows_and_resets_a_judges_limits(
    tmp_path: Path, env: dict[str, str], fake_api: FakeMessagesAPI, start_worker: Callable[..., Worker]
) -> None:
    set_ = judgeq_cli("budget", "set", "anthropic:claude-test", "--rpm", "6000", "--otpm", "900000", env=env)
    assert set_.returncode == 0, set_.stderr
    assert "6,000 rpm, 900,000 otpm" in set_.stdout
    # a run submitted without any flag obeys the judge's limits, and its calls are counted there
    start_worker("w1")
    batch = write_batch(tmp_path / "b.jsonl", response_rows(12))
    proc = judgeq_cli("submit", str(batch), *SUBMIT, "--wait", "--out", str(tmp_path / "o"), env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    shown = judgeq_cli("budget", "--redis-url", env["JUDGEQ_REDIS_URL"], "anthropic:claude-test", env=env)
    assert shown.returncode == 0, shown.stderr
    assert "6,000/min set" in shown.stdout and "900,000/min set" in shown.stdout
    assert "12 requests sent, 12 served, 0 refused" in shown.stdout, shown.stdout
    assert "SECRET" not in shown.stdout  # the key never shows, only a hash of it
    reset = judgeq_cli("budget", "reset", "anthropic:claude-test", env=env)
    assert reset.returncode == 0, reset.stderr
    assert "no judge budgets yet" in judgeq_cli("budget", env=env).stdout
    # bad input: one line, exit 2
    bad = judgeq_cli("budget", "set", "anthropic:claude-test", env=env)
    assert bad.returncode == 2 and bad.stderr.startswith("judgeq: error:") and "Traceback" not in bad.stderr

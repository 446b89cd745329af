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

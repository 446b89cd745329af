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
    rpm = 120  # a full bucket of 120, then 2 a second
    fake_api.set_limits(rpm=rpm)
    # a short deadline: waiting for budget must not eat it
    extra = {"JUDGEQ_JUDGE_DEADLINE": "2", "JUDGEQ_JUDGE_TIMEOUT": "1"}
    start_worker("w1", env=extra)
    start_worker("w2", env=extra)
    batch = write_batch(tmp_path / "b.jsonl", response_rows(160))
    flags = ["--rpm", str(rpm)] if given else []
    out = tmp_path / "out"
    proc = judgeq_cli(
        "submit", str(batch), *SUBMIT, *flags, "--wait", "--out", str(out), env={**env, **extra}
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    report = json.loads((out / proc.stdout.splitlines()[0] / "report.json").read_text())
    assert report["counts"]["graded"] == 160 and report["counts"]["null"] == 0
    # the server admitted every job's call once (plus the producer's preflight)
    assert len(fake_api.accepted_times()) >= 161
    if given:  # the budget mirrors the server's bucket: a 429 is rare (a clock edge), never a storm
        assert fake_api.by_status.get(429, 0) <= 8, fake_api.by_status

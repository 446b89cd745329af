"""``judgeq rubrics calibrate``: goldens and a labelled batch through the pipeline, agreement
printed, exit 1 below the threshold; with the lexical judge it says it measures no LLM; with the
real SDK against the fake API it calibrates an LLM judge."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from judgeq.testing.fake_anthropic import FakeMessagesAPI


def judgeq(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "judgeq", *args],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        timeout=120,
    )


def test_lexical_calibration_runs_and_says_it_measures_no_llm(tmp_path: Path) -> None:
    out = judgeq(
        "rubrics",
        "calibrate",
        "pairwise",
        "--judge",
        "lexical",
        "--min-accuracy",
        "50",
        "--out",
        str(tmp_path),
    )
    assert out.returncode == 0, out.stderr
    assert "not an LLM" in out.stdout and "3 goldens" in out.stdout and "PASS" in out.stdout
    assert "accuracy 100.0%" in out.stdout  # the goldens' outputs overlap their references as labelled


def labelled(tmp_path: Path, rows: list[dict[str, object]]) -> Path:
    path = tmp_path / "labels.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_below_the_threshold_exits_1_and_lists_the_disagreements(tmp_path: Path) -> None:
    # the lexical judge passes outputs that repeat the expected answer; these labels say otherwise
    rows = [
        {"id": f"x{i}", "input": "q", "output": "Paris", "expected_answer": "Paris", "label": "fail"}
        for i in range(6)
    ]
    out = judgeq(
        "rubrics", "calibrate", "quality", "--judge", "lexical", "--labels", str(labelled(tmp_path, rows)),
        "--min-accuracy", "90", "--out", str(tmp_path / "out"),
    )  # fmt: skip
    assert out.returncode == 1, out.stderr
    assert "FAIL: accuracy" in out.stdout and "disagrees: x0: label fail, judge pass" in out.stdout
    assert "5 goldens + 6 labelled" in out.stdout


def test_a_labelled_batch_with_a_bad_line_is_refused(tmp_path: Path) -> None:
    rows: list[dict[str, object]] = [
        {"id": "a", "input": "q", "output": "x", "label": 7},
        {"id": "b", "input": "q", "output": "x", "label": 42},
    ]
    out = judgeq(
        "rubrics", "calibrate", "quality", "--judge", "lexical", "--labels", str(labelled(tmp_path, rows))
    )
    assert (
        out.returncode == 2 and "labels.jsonl:2: label: 42 is outside the rubric's scale 1-10" in out.stderr
    )
    rows = [{"id": "a", "input": "q", "output": "x"}]
    out = judgeq(
        "rubrics", "calibrate", "quality", "--judge", "lexical", "--labels", str(labelled(tmp_path, rows))
    )
    assert out.returncode == 2 and "labels.jsonl:1: label: required for calibration" in out.stderr
    assert "Traceback" not in out.stderr


@pytest.fixture
def fake() -> Iterator[FakeMessagesAPI]:
    with FakeMessagesAPI(api_key="test-key") as server:
        yield server


def test_an_llm_judge_is_calibrated_through_the_real_sdk(tmp_path: Path, fake: FakeMessagesAPI) -> None:
    env = {
        "ANTHROPIC_API_KEY": "test-key",
        "ANTHROPIC_BASE_URL": fake.base_url,
        "JUDGEQ_CACHE_DIR": str(tmp_path / "cache"),
    }

    def calibrate(min_kappa: str) -> tuple[subprocess.CompletedProcess[str], float]:
        out = judgeq(
            "rubrics", "calibrate", "pairwise", "--judge", "anthropic:claude-test", "--min-kappa", min_kappa,
            "--out", str(tmp_path), env=env,
        )  # fmt: skip
        kappa = re.search(r"kappa (-?[0-9.]+)", out.stdout)
        assert kappa is not None, out.stdout + out.stderr
        return out, float(kappa.group(1))

    out, kappa = calibrate("0.99")
    assert "not an LLM" not in out.stdout and "position consistency" in out.stdout
    assert fake.request_count == 3 * 2, "each golden pair in both orders (the preflight: Models API)"
    # the gate follows the figure it printed: below the threshold exit 1, at or above exit 0
    assert kappa < 0.99  # the stand-in answers at random: it cannot agree with the goldens
    assert out.returncode == 1 and "FAIL: kappa " in out.stdout and "< 0.99" in out.stdout, out.stdout
    out, again = calibrate("-1")  # kappa is never below -1
    assert again == kappa and out.returncode == 0 and "PASS" in out.stdout, out.stdout


def test_nulls_count_as_misses_and_too_few_grades_fail_the_gate(
    tmp_path: Path, fake: FakeMessagesAPI
) -> None:
    rows = [
        {"id": f"x{i}", "input": "q", "output": f"a {i} [[fake:garbage]]" if i < 6 else f"a {i}", "label": 5}
        for i in range(8)
    ]
    env = {
        "ANTHROPIC_API_KEY": "test-key",
        "ANTHROPIC_BASE_URL": fake.base_url,
        "JUDGEQ_CACHE_DIR": str(tmp_path / "c"),
    }
    batch = str(labelled(tmp_path, rows))
    out = judgeq(
        "rubrics", "calibrate", "quality", "--judge", "anthropic:claude-test", "--labels", batch,
        "--out", str(tmp_path / "out"), env=env,
    )  # fmt: skip
    assert out.returncode == 1, out.stdout + out.stderr
    assert "of the labelled jobs graded" in out.stdout and "nulls count as misses" in out.stdout


@pytest.mark.parametrize("cache", ["true", "false"])
def test_a_calibration_stopped_by_its_cost_cap_says_so_without_a_resume_it_cannot_have(
    tmp_path: Path, fake: FakeMessagesAPI, cache: str
) -> None:
    # (issue 29: exit 3 with "raise it with: judgeq resume RUN --max-cost", for a run that lived
    # and died in the calibrate process)
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"claude-test": {"input": 3.0, "output": 15.0}}))
    env = {
        "ANTHROPIC_API_KEY": "test-key",
        "ANTHROPIC_BASE_URL": fake.base_url,
        "JUDGEQ_CACHE_DIR": str(tmp_path / "cache"),
        "JUDGEQ_PRICES": str(prices),
        "JUDGEQ_MAX_COST": "0.001",
        "JUDGEQ_CACHE": cache,
    }
    out = judgeq(
        "rubrics", "calibrate", "pairwise", "--judge", "anthropic:claude-test", "--out", str(tmp_path),
        env=env,
    )  # fmt: skip
    assert out.returncode == 3, out.stdout + out.stderr
    line = out.stderr.strip().splitlines()[-1]
    assert line.startswith("judgeq: error: calibration stopped: max_cost: $"), line
    assert "Run it again with a higher --max-cost" in line and "judgeq resume" not in out.stderr
    promise = "the replies already paid for come from the reply cache"
    assert (promise in line) == (cache == "true") and ("paid for again" in line) == (cache == "false")
    assert "kappa" not in out.stdout and "Traceback" not in out.stderr


@pytest.mark.parametrize("rubric", ["task-success", "conversation-quality", "tool-use-appropriateness"])
def test_the_conversation_rubrics_calibrate_through_the_real_sdk(
    tmp_path: Path, fake: FakeMessagesAPI, rubric: str
) -> None:
    """Issue 30, point 5: a conversation rubric's goldens (conversations) are graded by an LLM
    judge through the real SDK: every golden reaches the judge (one call each) and is graded."""
    from judgeq import load_rubric

    env = {
        "ANTHROPIC_API_KEY": "test-key",
        "ANTHROPIC_BASE_URL": fake.base_url,
        "JUDGEQ_CACHE_DIR": str(tmp_path / "cache"),
    }
    out = judgeq(
        "rubrics", "calibrate", rubric, "--judge", "anthropic:claude-test", "--min-accuracy", "0",
        "--out", str(tmp_path), env=env,
    )  # fmt: skip
    goldens = len(load_rubric(rubric).goldens)
    assert out.returncode == 0, out.stdout + out.stderr
    assert f"jobs: {goldens} goldens + 0 labelled; {goldens} graded, 0 null" in out.stdout, out.stdout
    assert fake.request_count == goldens

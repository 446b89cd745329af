"""``judgeq rubrics list | show | validate`` through the real console script."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

FIX = Path(__file__).parent.parent / "fixtures" / "rubrics"


def judgeq(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    import os

    return subprocess.run(
        [sys.executable, "-m", "judgeq", *args],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        timeout=60,
    )


def test_list_shows_every_builtin() -> None:
    out = judgeq("rubrics", "list")
    assert out.returncode == 0, out.stderr
    for name in ("quality", "retrieval-relevance", "groundedness", "tool-use-appropriateness"):
        assert name in out.stdout
    assert "1.0.0" in out.stdout and "pass-fail" in out.stdout


def test_show_renders_a_sample_request() -> None:
    out = judgeq("rubrics", "show", "quality")
    assert out.returncode == 0, out.stderr
    assert "system block 1" in out.stdout and "<candidate_output-" in out.stdout
    assert '"scores"' in out.stdout


def test_show_applies_weight_overrides() -> None:
    out = judgeq("rubrics", "show", "quality", "--weights", "accuracy=0.45,relevance=0.0")
    assert out.returncode == 0, out.stderr
    assert "## accuracy (weight 0.45)" in out.stdout
    out = judgeq("rubrics", "show", "quality", env={"JUDGEQ_WEIGHT_TONE": "0.1"})
    assert out.returncode == 2
    assert "JUDGEQ_WEIGHT_*: 'tone' is not a dimension of rubric 'quality'" in out.stderr
    assert "Traceback" not in out.stderr


def test_validate_exit_codes() -> None:
    ok = judgeq("rubrics", "validate", "quality", str(FIX / "minimal-passfail.md"))
    assert ok.returncode == 0, ok.stdout + ok.stderr
    bad = judgeq("rubrics", "validate", "quality", str(FIX / "weights-0.9.md"), "nope")
    assert bad.returncode == 1
    assert f"INVALID {FIX / 'weights-0.9.md'}: dimensions: dimension weights sum to 0.9000" in bad.stdout
    assert "INVALID rubric: no built-in rubric named 'nope'" in bad.stdout
    assert "Traceback" not in bad.stdout + bad.stderr


def test_show_unknown_rubric_is_one_line() -> None:
    out = judgeq("rubrics", "show", "../../no/such.md")
    assert out.returncode == 2
    assert out.stderr.startswith("judgeq: error: ../../no/such.md: file not found")
    assert "Traceback" not in out.stderr

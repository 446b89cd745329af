"""The README's Python API example runs as written (its in-process part; the distributed part
is exercised with workers in tests/integration/test_management.py)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def test_the_readme_python_example_runs(tmp_path: Path) -> None:
    text = (ROOT / "docs" / "python-api.md").read_text()
    match = re.search(r"# Python API\n.*?```python\n(.*?)```", text, re.S)
    assert match is not None, "the manual has a Python API example"
    code = match.group(1).split("run_id = judgeq.submit")[0]  # the in-process part
    (tmp_path / "examples").mkdir()
    shutil.copy(ROOT / "examples" / "responses.jsonl", tmp_path / "examples" / "responses.jsonl")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JUDGEQ_", "ANTHROPIC_"))}
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert "30/30 graded" in out.stdout and "'ci95'" in out.stdout
    assert len(list((tmp_path / "results").glob("*/report.html"))) == 1


def test_a_misspelt_option_of_the_api_is_an_error_not_ignored(tmp_path: Path) -> None:
    import pytest

    import judgeq

    rows = [{"id": "a", "input": "q", "output": "x"}]
    with pytest.raises(
        TypeError, match="unexpected keyword argument 'weigths' \\(did you mean 'weights'\\?\\)"
    ):
        judgeq.grade(rows, rubric="quality", judge="lexical", out=tmp_path, weigths="accuracy=1")
    with pytest.raises(TypeError, match="'concurency'"):
        judgeq.submit(rows, rubric="quality", judge="lexical", concurency=3)
    # the options the API documents are taken, named as on the CLI
    report = judgeq.grade(
        rows, rubric="quality", judge="lexical", out=tmp_path, thresholds="9,5", no_cache=True
    )
    assert report.to_dict()["pass_rates"].keys() == {"9.0", "5.0"}


@pytest.mark.slow  # a job refused ten times, through the real SDK
def test_the_readme_offline_testing_example_runs(tmp_path: Path) -> None:
    """``judgeq.testing`` is public: the README's example grades through the real SDK against
    the stand-in, a job with ``[[fake:429]]`` ending ``rate_limited`` after its refused calls."""
    text = (ROOT / "docs" / "python-api.md").read_text()
    match = re.search(r"## Testing your own pipeline offline\n.*?```python\n(.*?)```", text, re.S)
    assert match is not None, "the manual has an offline testing example"
    code = match.group(1)
    expected = re.search(r"^# (.*)$", code, re.M)
    assert expected is not None
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JUDGEQ_", "ANTHROPIC_"))}
    env["JUDGEQ_CACHE_DIR"] = str(tmp_path / "cache")
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=240
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == expected.group(1)
    assert len(list((tmp_path / "results").glob("*/report.json"))) == 1

"""benchmarks/scale.py at a small size: every phase runs on real parts (redis-server, judgeq
submit, workers, the reducer in its own process) and its figures hang together. The targets
themselves are for the million-job run (README), not asserted here: speed is the benchmark's
business, not a test's."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "benchmarks" / "scale.py"

pytestmark = pytest.mark.integration


def test_scale_benchmark_small(tmp_path: Path) -> None:
    figures_path = tmp_path / "figures.json"
    env = {**os.environ, "SCALE_JSON": str(figures_path)}
    n = 400
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--jobs", str(n), "--workers", "1", "--storage-results", "4000"],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    for phase in ("1. enqueue:", "2. pipeline:", "3. reducer:", "4. files:", "5. storage", "targets:"):
        assert phase in proc.stdout, proc.stdout
    figures = json.loads(figures_path.read_text())
    # the stand-in judge (the default) answers every job at once, through the real SDK
    assert figures["jobs"] == n and figures["judge"] == "standin" and figures["graded"] == n
    assert figures["enqueue_rate"] > 0 and figures["pipeline_rate"] > 0
    assert 0 < figures["producer_rss_mb"] < 1024 and 0 < figures["reducer_rss_mb"] < 1024
    assert 0 < figures["stored_per_result"] <= figures["peak_per_job"]  # what stays is under the peak
    for kind, chars, packed, plain, cached in figures["storage"]:
        assert chars > 0
        assert 0 < packed < plain, f"{kind}: packed results must take less room than plain JSON"
        assert 0 < cached < plain, f"{kind}: a packed cache entry takes less room than a plain result"

"""benchmarks/cascade.py on a folder of LLMBar's layout written here: a world where the cheap
judges are confident and right on half the items and unsure on the rest, so the cascade keeps
the confident half at a fraction of GPT-4's cost and the guarantee's share is printed."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "benchmarks" / "cascade.py"
STRATEGIES = ("Vanilla", "Vanilla_NoRules", "CoT", "Swap", "Swap_CoT", "Metrics_Reference")


def test_the_cascade_benchmark_replays_published_outputs(tmp_path: Path) -> None:
    rows = []
    for evaluator in ("LLaMA2", "PaLM2", "ChatGPT", "GPT-4"):
        for i in range(80):
            for k, strategy in enumerate(STRATEGIES):
                for swap in (False, True):
                    # the first 40 items: every answer right (confident); the rest: split 50/50
                    winner = 1 if i < 40 or evaluator == "GPT-4" or (k + swap) % 2 else 2
                    rows.append({"evaluator": evaluator, "strategy": strategy, "subset": "LLMBar/Natural",
                                 "index": i, "swap": swap, "label": 1, "winner": winner})  # fmt: skip
    (tmp_path / "evaluators").mkdir()
    (tmp_path / "evaluators" / "Natural.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = subprocess.run(
        [sys.executable, str(SCRIPT), str(tmp_path), "--splits", "50"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    lines = {re.split(r"\s{2,}", line.strip())[0]: line for line in out.stdout.splitlines()}
    assert "LLMBar/Natural" in lines and "100.0%" in lines["LLMBar/Natural"]  # GPT-4 right on all
    cheap = next(
        line for line in out.stdout.splitlines() if "ChatGPT -> GPT-4" in line and "LLaMA2" not in line
    )
    assert "annotators" in cheap  # the default estimator's row first, then position swap's
    swap = [line for line in out.stdout.splitlines() if "ChatGPT -> GPT-4" in line and " swap " in line]
    assert len(swap) == 2, out.stdout  # both cascades through ChatGPT -> GPT-4, measured by swap too
    held, coverage, agreement, cost = re.findall(r"[\d.]+[%x]", cheap)
    assert held == "100.0%" and agreement == "100.0%"  # every kept verdict right
    assert coverage == "100.0%"  # the unsure half escalated, and GPT-4 (always right) kept it
    # the confident half paid ChatGPT alone (1.5 of 30), the rest both: about 0.55x GPT-4's cost
    assert 0.45 < float(cost.rstrip("x")) < 0.7


def test_the_cascade_benchmark_skips_cleanly_without_the_data(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, str(SCRIPT), str(tmp_path / "none")], capture_output=True, text=True
    )
    assert out.returncode == 0 and "absent; nothing to measure (skipped)" in out.stdout

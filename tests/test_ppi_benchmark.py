"""benchmarks/ppi.py on a folder of LLMBar's layout written here: GPT-4 agrees with people on
every item, LLaMA-2 answers at random: PPI narrows the interval with GPT-4 (a gain well over
1x), not with LLaMA-2 (lam tuned to ~0: about 1x), and every interval covers the truth."""

from __future__ import annotations

import json
import random
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "benchmarks" / "ppi.py"
STRATEGIES = ("Vanilla", "Vanilla_NoRules", "CoT", "Swap", "Swap_CoT", "Metrics_Reference")


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=300)


def test_the_ppi_benchmark_gains_with_a_judge_that_agrees_only(tmp_path: Path) -> None:
    rng = random.Random(3)
    rows = []
    for i in range(200):
        label = 1 if rng.random() < 0.4 else 2
        noise = rng.choice((1, 2))
        for evaluator, winner in (("GPT-4", label), ("LLaMA2", noise)):
            for strategy in STRATEGIES:
                for swap in (False, True):
                    rows.append({"evaluator": evaluator, "strategy": strategy, "subset": "LLMBar/Natural",
                                 "index": i, "swap": swap, "label": label, "winner": winner})  # fmt: skip
    (tmp_path / "evaluators").mkdir()
    (tmp_path / "evaluators" / "Natural.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = run(str(tmp_path), "--resamples", "200", "--labels", "30")
    assert out.returncode == 0, out.stderr
    rows_out = {}
    for line in out.stdout.splitlines():
        if line.startswith("LLMBar/Natural"):
            rows_out[line.split()[1]] = line
    gain = {judge: float(line.rsplit(maxsplit=1)[1].rstrip("x")) for judge, line in rows_out.items()}
    assert set(gain) == {"GPT-4", "LLaMA2"}, out.stdout
    assert gain["GPT-4"] > 3 and 0.8 < gain["LLaMA2"] < 1.3, out.stdout
    covers = [float(x) for line in rows_out.values() for x in re.findall(r"([0-9.]+)%", line)[3:5]]
    assert all(c >= 90 for c in covers), out.stdout


def test_an_absent_folder_is_said_not_a_traceback(tmp_path: Path) -> None:
    out = run(str(tmp_path / "nowhere"))
    assert out.returncode == 0 and "absent" in out.stdout and not out.stderr

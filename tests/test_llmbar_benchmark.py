"""benchmarks/llmbar.py against judgeq's stand-in judge, on a small folder of the LLMBar layout
written here (the real sets are read by path only, never copied into the project)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "benchmarks" / "llmbar.py"


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=300)


def test_llmbar_shaped_sets_run_through_judgeq_run(tmp_path: Path) -> None:
    for subset, n in (("Natural", 4), ("Adversarial/Neighbor", 3)):
        folder = tmp_path / subset
        folder.mkdir(parents=True)
        rows = [
            {"input": f"Say {i}.", "output_1": f"{i}", "output_2": f"not {i}", "label": "1" if i % 2 else "2"}
            for i in range(n)
        ]
        (folder / "dataset.json").write_text(json.dumps(rows))
    (tmp_path / "reference_accuracy.tsv").write_text(
        "evaluator\tstrategy\tsubset\tcorrect_average\tcorrect_both\tkappa_agreement\tsource_path\n"
        "GPT-4\tVanilla\tLLMBar/Natural\t95.5%\t93 / 100\t0.9\tx\n"
    )
    out = run(str(tmp_path), "--stand-in")
    assert out.returncode == 0, out.stderr
    lines = {line.split()[0]: line.split() for line in out.stdout.splitlines() if line.startswith("LLMBar/")}
    assert set(lines) == {"LLMBar/Natural", "LLMBar/Adversarial/Neighbor"}
    assert lines["LLMBar/Natural"][1] == "4" and lines["LLMBar/Natural"][-2] == "95.5"
    assert lines["LLMBar/Adversarial/Neighbor"][1] == "3"
    assert "all: 7 graded, 0 null" in out.stdout and "position consistency" in out.stdout


def test_an_absent_folder_is_skipped_cleanly(tmp_path: Path) -> None:
    out = run(str(tmp_path / "nowhere"))
    assert out.returncode == 0 and "absent; nothing to measure (skipped)" in out.stdout

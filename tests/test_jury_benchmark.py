"""benchmarks/jury.py on a small folder of the LLMBar layout written here, with published
verdicts chosen so every figure is known: the jury's majority beats each of its members, and
GPT-4's replayed figure is what its verdicts say (the real sets are read by path only)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "benchmarks" / "jury.py"


def test_the_jury_benchmark_replays_published_verdicts_through_judgeq(tmp_path: Path) -> None:
    n = 6
    folder = tmp_path / "Natural"
    folder.mkdir()
    rows = [{"input": f"Say {i}.", "output_1": f"{i}", "output_2": f"not {i}", "label": 1} for i in range(n)]
    (folder / "dataset.json").write_text(json.dumps(rows))
    # each member wrong on its own two items (both orders), GPT-4 right but on item 5, PaLM2 unparsed on 4
    wrong = {"ChatGPT": {0, 1}, "PaLM2": {2, 3}, "LLaMA2": {4, 5}, "GPT-4": {5}}
    lines = []
    for evaluator, bad in wrong.items():
        for i in range(n):
            for swap in (False, True):
                first = 2 if swap else 1
                winner = 2 if i in bad else 1
                if evaluator == "PaLM2" and i == 4:
                    winner = None
                row = {"evaluator": evaluator, "strategy": "Vanilla_NoRules", "subset": "LLMBar/Natural",
                       "index": i, "swap": swap, "first": first, "label": 1, "winner": winner}  # fmt: skip
                lines.append(json.dumps(row))
    (tmp_path / "evaluators").mkdir()
    (tmp_path / "evaluators" / "Natural.jsonl").write_text("\n".join(lines) + "\n")
    out = subprocess.run(
        [sys.executable, str(SCRIPT), str(tmp_path)], capture_output=True, text=True, timeout=600
    )
    assert out.returncode == 0, out.stderr
    rows = [re.split(r"\s{2,}", line.strip()) for line in out.stdout.splitlines() if "%" in line]
    figures = {row[0]: row[1:] for row in rows if len(row) >= 4}
    assert figures["ChatGPT (OpenAI)"][:2] == ["6", "66.7%"]  # 4 of 6 right
    assert figures["PaLM 2 (Google)"][:2] == ["6", "58.3%"]  # its null counts half
    assert figures["PaLM 2 (Google)"][3] == "1"
    # the jury: 2 of 3 right on every item but item 4, where PaLM 2 gave no verdict and the two
    # others split: no majority of the panel of 3, a tie (half): 5.5 of 6
    assert figures["jury of the three (median, majority)"][:2] == ["6", "91.7%"]
    assert figures["ChatGPT (OpenAI)"][4] == "50.0%"  # its verdict was the jury's on items 2, 3, 5
    assert figures["GPT-4 alone (one large judge)"][:2] == ["6", "83.3%"]
    assert "one large judge anthropic:claude-opus-4-5" in out.stdout


def test_the_jury_benchmark_skips_cleanly_without_the_data(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, str(SCRIPT), str(tmp_path / "none")], capture_output=True, text=True
    )
    assert out.returncode == 0 and "absent; nothing to measure (skipped)" in out.stdout

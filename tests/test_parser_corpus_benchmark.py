"""benchmarks/parser_corpus.py on small folders of the corpus layout written here (the published
judge replies are read by path only, never copied into the project)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "benchmarks" / "parser_corpus.py"


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=120)


def write(folder: Path, name: str, rows: list[tuple[str, object]]) -> None:
    folder.mkdir(exist_ok=True)
    lines = [json.dumps({"source": name, "raw_text": text, "expected": expected}) for text, expected in rows]
    (folder / f"{name}.jsonl").write_text("\n".join(lines) + "\n")


def row_line(stdout: str, name: str) -> list[str]:
    return next(line.split() for line in stdout.splitlines() if line.startswith(name + " "))


def test_counts_exact_failure_and_wrong_per_source(tmp_path: Path) -> None:
    write(
        tmp_path,
        "mtbench_single",
        [("Clear and correct. Rating: [[8]]", 8), ("Good.\n\nRating: [[6]]", 6), ("No rating here.", -1)],
    )
    write(tmp_path, "llmbar_rating", [("9", 9), ("0", 0)])  # a 0-9 source: 0 is on its scale
    out = run(str(tmp_path))
    assert out.returncode == 0, out.stdout
    assert row_line(out.stdout, "mtbench_single")[1:8] == ["1-10", "3", "2", "3", "(100.00%)", "0", "(0.00%)"]
    assert row_line(out.stdout, "llmbar_rating")[1:5] == ["0-9", "2", "2", "2"]
    assert "OK: 0 wrong on every source" in out.stdout


def test_a_wrong_score_or_too_many_failures_exit_1(tmp_path: Path) -> None:
    # the source read 3 where the reply states 8: the parser's 8 counts as wrong
    write(tmp_path, "mtbench_single", [("Rating: [[8]]", 3)])
    out = run(str(tmp_path))
    assert out.returncode == 1 and "FAIL: mtbench_single: 1 wrong" in out.stdout
    write(tmp_path, "mtbench_single", [("Rating: [[8]]", 8), ("It says 30/36 = 5/6 of it.", 5)])
    out = run(str(tmp_path))
    assert out.returncode == 1 and "50.00% exact (< 99.5%)" in out.stdout


def test_pairwise_letters_are_checked_with_a_pairwise_rubric(tmp_path: Path) -> None:
    write(tmp_path, "mtbench_pair", [("Both are fine, A is sharper. [[A]]", "A"), ("Equal. [[C]]", "C")])
    out = run(str(tmp_path))
    assert out.returncode == 0, out.stdout
    pair_rows = out.stdout.split("pairwise verdicts")[1]
    assert row_line(pair_rows, "mtbench_pair")[1:4] == ["2", "2", "2"]


def test_an_absent_folder_is_skipped_cleanly(tmp_path: Path) -> None:
    out = run(str(tmp_path / "nowhere"))
    assert out.returncode == 0 and "absent; nothing to measure (skipped)" in out.stdout

"""The verdict parser on published judge replies: how often it reads the score the source read.

    python benchmarks/parser_corpus.py [FOLDER] [--show N]

FOLDER defaults to ``../shared/data/external/judge-outputs`` (relative to the project root);
when it is absent the benchmark says so and exits 0 (a fresh clone has no ``../shared``).
Each ``*.jsonl`` file there holds rows ``{source, raw_text, expected, scale?, ...}``, where
``expected`` is what the source itself extracted from the reply: a number, or no score (a
pairwise letter, ``-1``, null).  Every ``raw_text`` is parsed with
:func:`judgeq.grading.verdict.parse_verdict` and a rubric fitting its source, built with judgeq's own
:func:`~judgeq.rubric.model.parse_rubric`: a ``0-9`` rubric for ``llmbar_rating``, a ``1-10``
rubric without dimensions for every other source.

Per source it prints rows, exact, parse failure and wrong (counts and percentages):

* a row whose source extracted a score is **exact** when the parser's holistic score equals
  it, a **parse failure** when the parser returned null, **wrong** when it returned another
  number;
* a row whose source extracted no score is **exact** when the parser returned null and
  **wrong** when it returned any score.

The pairwise sources (``mtbench_pair``, ``llmbar_cot``: ``expected`` is a letter) are parsed a
second time with a ``pairwise`` rubric and counted the same way against the letter (MT-Bench's
``C`` is a tie; its 3 rows the source could not read, ``error``, are exact when null).

Exit status 1 when any source has a wrong row or a score-stating source is below 99.5% exact,
so the benchmark doubles as a check.  The corpus is read in place, never copied.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from judgeq.grading.verdict import parse_verdict
from judgeq.rubric.model import Rubric, parse_rubric

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_FOLDER = ROOT / ".." / "shared" / "data" / "external" / "judge-outputs"
MIN_EXACT = 99.5
SOURCES = ("mtbench_single", "mtbench_pair", "llmbar_rating", "llmbar_cot", "wildbench_json")
SOURCE_SCALE = {"llmbar_rating": "0-9"}  # every other source: 1-10


def rubric_for(scale: str) -> Rubric:
    text = (
        "---\n"
        f"name: corpus-{scale}\n"
        'version: "1.0.0"\n'
        f"scale: {scale}\n"
        f"description: Holistic quality on {scale}.\n"
        "---\n"
        f"Grade the candidate output on the scale {scale}.\n"
    )
    return parse_rubric(text, f"benchmark:{scale}")


def stated_score(expected: Any) -> float | None:
    """The score the source extracted, or None when it extracted none (-1, a letter, null)."""
    if isinstance(expected, bool) or not isinstance(expected, (int, float)) or expected == -1:
        return None
    return float(expected)


def classify(expected: float | None, got: float | None) -> str:
    if expected is None:
        return "exact" if got is None else "wrong"
    if got is None:
        return "failure"
    return "exact" if abs(got - expected) < 1e-9 else "wrong"


def cell(n: int, total: int) -> str:
    return f"{n} ({100 * n / total:.2f}%)" if total else "0"


def run(folder: Path, show: int) -> int:
    files = sorted(folder.glob("*.jsonl"))
    names = [s for s in SOURCES if folder / f"{s}.jsonl" in files]
    names += [f.stem for f in files if f.stem not in SOURCES]
    rubrics: dict[str, Rubric] = {}
    header = (
        f"{'source':<16} {'scale':>5} {'rows':>6} {'scored':>6} {'exact':>14} {'parse failure':>14} "
        f"{'wrong':>12}"
    )
    print(f"parser corpus: {folder}")
    print(header)
    print("-" * len(header))
    problems: list[str] = []
    examples: list[str] = []
    for name in names:
        scale = SOURCE_SCALE.get(name, "1-10")
        rubric = rubrics.setdefault(scale, rubric_for(scale))
        counts: Counter[str] = Counter()
        rows = scored = 0
        with (folder / f"{name}.jsonl").open(encoding="utf-8") as f:
            for line_no, line in enumerate(f, 1):
                if not line.strip():
                    continue
                row = json.loads(line)
                rows += 1
                expected = stated_score(row.get("expected"))
                scored += expected is not None
                pv = parse_verdict(rubric, text=row.get("raw_text") or "")
                got = None if pv.null_reason is not None else pv.holistic
                outcome = classify(expected, got)
                counts[outcome] += 1
                if outcome != "exact" and len(examples) < show:
                    snippet = " ".join((row.get("raw_text") or "").split())[-160:]
                    examples.append(
                        f"  {name}:{line_no} {outcome}: expected {row.get('expected')!r}, "
                        f"parsed {got!r} {pv.flags or ''} …{snippet}"
                    )
        exact, failure, wrong = (cell(counts[k], rows) for k in ("exact", "failure", "wrong"))
        print(f"{name:<16} {scale:>5} {rows:>6} {scored:>6} {exact:>14} {failure:>14} {wrong:>12}")
        if counts["wrong"]:
            problems.append(f"{name}: {counts['wrong']} wrong")
        if scored and 100 * counts["exact"] / rows < MIN_EXACT:
            problems.append(f"{name}: {100 * counts['exact'] / rows:.2f}% exact (< {MIN_EXACT}%)")
    problems += run_pairwise(folder, names, show, examples)
    if not names:
        problems.append(f"no *.jsonl file in {folder}")
    if examples:
        print("\nrows not exact:")
        print("\n".join(examples))
    print()
    if problems:
        print("FAIL: " + "; ".join(problems))
        return 1
    print(f"OK: 0 wrong on every source; every score-stating source >= {MIN_EXACT}% exact")
    return 0


PAIR_LETTER = {"a": "A", "b": "B", "c": "tie", "tie": "tie"}
"""The sources' pairwise letters (MT-Bench: A, B, C = tie; LLMBar: a, b) as judgeq's verdicts."""


def stated_pair(expected: Any) -> str | None:
    return PAIR_LETTER.get(expected.lower()) if isinstance(expected, str) else None


def run_pairwise(folder: Path, names: list[str], show: int, examples: list[str]) -> list[str]:
    """The pairwise sources (rows whose ``expected`` is a letter) parsed with a pairwise rubric:
    exact / parse failure / wrong, as for scores."""
    rubric = rubric_for("pairwise")
    problems: list[str] = []
    printed = False
    for name in names:
        counts: Counter[str] = Counter()
        rows = stated = 0
        with (folder / f"{name}.jsonl").open(encoding="utf-8") as f:
            parsed = [json.loads(line) for line in f if line.strip()]
        if not any(stated_pair(row.get("expected")) for row in parsed):
            continue
        if not printed:
            print("\npairwise verdicts (A, B or tie; MT-Bench's C is a tie):")
            print(
                f"{'source':<16} {'rows':>6} {'stated':>6} {'exact':>14} {'parse failure':>14} {'wrong':>12}"
            )
            printed = True
        for line_no, row in enumerate(parsed, 1):
            rows += 1
            expected = stated_pair(row.get("expected"))
            stated += expected is not None
            pv = parse_verdict(rubric, text=row.get("raw_text") or "")
            got = None if pv.null_reason is not None else pv.verdict
            outcome = "exact" if got == expected else ("failure" if got is None else "wrong")
            counts[outcome] += 1
            if outcome != "exact" and len(examples) < show:
                snippet = " ".join((row.get("raw_text") or "").split())[-160:]
                examples.append(
                    f"  {name}:{line_no} {outcome} (pairwise): expected {expected!r}, "
                    f"parsed {got!r} …{snippet}"
                )
        exact, failure, wrong = (cell(counts[k], rows) for k in ("exact", "failure", "wrong"))
        print(f"{name:<16} {rows:>6} {stated:>6} {exact:>14} {failure:>14} {wrong:>12}")
        if counts["wrong"]:
            problems.append(f"{name} (pairwise): {counts['wrong']} wrong")
        if 100 * counts["exact"] / rows < MIN_EXACT:
            problems.append(f"{name} (pairwise): {100 * counts['exact'] / rows:.2f}% exact (< {MIN_EXACT}%)")
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", nargs="?", default=str(DEFAULT_FOLDER), help="judge-outputs folder")
    parser.add_argument("--show", type=int, default=20, help="print up to N rows that are not exact")
    args = parser.parse_args(argv)
    folder = Path(args.folder).resolve()
    if not folder.is_dir():
        print(f"parser corpus: {folder} is absent; nothing to measure (skipped).")
        return 0
    return run(folder, args.show)


if __name__ == "__main__":
    sys.exit(main())

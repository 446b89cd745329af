"""A judge on LLMBar's labelled pairs, through ``judgeq run``: accuracy per subset beside the
published GPT-4 figures, and position consistency.

    python benchmarks/llmbar.py --judge anthropic:claude-sonnet-4-5 [FOLDER] [--limit N] [--stand-in]

FOLDER defaults to ``../shared/data/external/llmbar`` (relative to the project root); when it
is absent the benchmark says so and exits 0 (a fresh clone has no ``../shared``).  Each
subset's ``dataset.json`` (``{input, output_1, output_2, label: "1"|"2"}``) becomes pair jobs
(``output_1`` as output A, label ``a``/``b``) written to a temporary batch, never into the
project; the whole batch is graded by ``judgeq run --rubric pairwise`` with the judge given,
in both orders (judgeq swaps every pair).  From the run's ``verdicts.jsonl`` it prints per
subset: pairs, nulls, accuracy (a judge's tie counts half), accuracy over decisive verdicts,
position consistency, and the published figures of GPT-4 from ``reference_accuracy.tsv``
(LLMBar's own prompts: ``Vanilla`` and ``Metrics_Reference``, averaged over both orders).

With ``ANTHROPIC_API_KEY`` set it measures a real judge (and costs real money: about 2 calls
per pair; ``--limit`` caps pairs per subset).  ``--stand-in`` starts judgeq's fake Messages API
and points the judge at it (for the tests: the figures then measure nothing but the plumbing).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _harness import API_KEY, fake_api

from judgeq.figures.stats import wilson

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_FOLDER = ROOT / ".." / "shared" / "data" / "external" / "llmbar"
REFERENCE = {"Vanilla": "GPT-4 vanilla", "Metrics_Reference": "GPT-4 rules+metrics+ref"}
FALLBACK = {"Vanilla": "Vanilla_NoRules"}
"""LLMBar published no ``Vanilla`` run for its Processed/* subsets, only ``Vanilla_NoRules``
(the same prompt without the rules): shown with a ``*``."""


def subsets(folder: Path) -> list[tuple[str, Path]]:
    """(name as in reference_accuracy.tsv, dataset.json) of every subset, in a stable order."""
    found = []
    for path in sorted(folder.rglob("dataset.json")):
        rel = path.parent.relative_to(folder).as_posix()
        name = rel if rel.startswith("Processed/") else f"LLMBar/{rel}"
        found.append((name.replace("LLMEval2", "LLMEval^2"), path))
    return found


def reference(folder: Path) -> dict[str, dict[str, str]]:
    """{subset: {strategy: 'NN.N'}} for GPT-4 (``correct_average``)."""
    table: dict[str, dict[str, str]] = defaultdict(dict)
    path = folder / "reference_accuracy.tsv"
    if path.exists():
        with path.open(encoding="utf-8") as f:
            for row in csv.DictReader(f, delimiter="\t"):
                wanted = {*REFERENCE, *FALLBACK.values()}
                if row["evaluator"] == "GPT-4" and row["strategy"] in wanted:
                    table[row["subset"]][row["strategy"]] = f"{float(row['correct_average'].rstrip('%')):.1f}"
    for figures in table.values():
        for strategy, fallback in FALLBACK.items():
            if strategy not in figures and fallback in figures:
                figures[strategy] = figures[fallback] + "*"
    return table


def write_jobs(folder: Path, batch: Path, limit: int | None) -> dict[str, str]:
    """The pair jobs of every subset into ``batch``; {job id prefix: subset}."""
    prefixes = {}
    with batch.open("w", encoding="utf-8") as out:
        for k, (name, path) in enumerate(subsets(folder)):
            prefix = f"s{k}"
            prefixes[prefix] = name
            rows = json.loads(path.read_text(encoding="utf-8"))
            for i, row in enumerate(rows[:limit] if limit else rows):
                job = {
                    "id": f"{prefix}-{i}",
                    "input": row["input"],
                    "output_a": row["output_1"],
                    "output_b": row["output_2"],
                    "model_a": "output_1",
                    "model_b": "output_2",
                    "label": {"1": "a", "2": "b"}[str(row["label"])],
                }
                out.write(json.dumps(job, ensure_ascii=False) + "\n")
    return prefixes


def measure(verdicts: Path, prefixes: dict[str, str]) -> dict[str, dict[str, Any]]:
    per: dict[str, dict[str, Any]] = {
        name: {"n": 0, "null": 0, "credit": 0.0, "decisive": 0, "right": 0, "pairs": 0, "kept": 0}
        for name in prefixes.values()
    }
    swap = {"A": "B", "B": "A", "tie": "tie"}
    with verdicts.open(encoding="utf-8") as f:
        for line in f:
            v = json.loads(line)
            s = per[prefixes[v["job_id"].split("-")[0]]]
            s["n"] += 1
            if v["status"] != "graded":
                s["null"] += 1
                continue
            label, said = v["label"], v["winner"]
            s["credit"] += 1.0 if said == label else 0.5 if said == "tie" else 0.0
            if said != "tie":
                s["decisive"] += 1
                s["right"] += said == label
            votes = v.get("votes") or []
            if len(votes) == 2:
                s["pairs"] += 1
                s["kept"] += votes[0] == swap[votes[1]]
    return per


def pct(a: float, b: float) -> str:
    return f"{100 * a / b:.1f}" if b else "–"


def run(folder: Path, judge: str, limit: int | None, env: dict[str, str]) -> int:
    refs = reference(folder)
    with tempfile.TemporaryDirectory(prefix="judgeq-llmbar-") as tmp:
        batch = Path(tmp) / "llmbar.jsonl"
        prefixes = write_jobs(folder, batch, limit)
        out = Path(tmp) / "out"
        cmd = [sys.executable, "-m", "judgeq", "run", str(batch), "--rubric", "pairwise", "--judge", judge]
        proc = subprocess.run([*cmd, "--out", str(out)], env=env, capture_output=True, text=True)
        if proc.returncode != 0:
            print(proc.stderr[-3000:], file=sys.stderr)
            return 1
        (run_dir,) = out.iterdir()
        per = measure(run_dir / "verdicts.jsonl", prefixes)
        report = json.loads((run_dir / "report.json").read_text())
    print(f"LLMBar with judge {judge} (judgeq run, pairwise rubric, both orders)")
    header = (
        f"{'subset':<30} {'pairs':>5} {'null':>4} {'accuracy':>8} {'95% CI':>13} {'decisive':>8} "
        f"{'consistent':>10}  " + "  ".join(f"{v:>24}" for v in REFERENCE.values())
    )
    print(header)
    print("-" * len(header))
    for name, s in per.items():
        graded = s["n"] - s["null"]
        ref = refs.get(name, {})
        ci = wilson(s["credit"], graded)
        interval = f"({ci[0]:.1f}-{ci[1]:.1f})" if ci else "–"
        print(
            f"{name:<30} {s['n']:>5} {s['null']:>4} {pct(s['credit'], graded):>8} {interval:>13} "
            f"{pct(s['right'], s['decisive']):>8} {pct(s['kept'], s['pairs']):>10}  "
            + "  ".join(f"{ref.get(k, '–'):>24}" for k in REFERENCE)
        )
    pw = report.get("pairwise", {})
    ag = report.get("agreement", {}).get("pairs", {})
    print(
        f"\nall: {report['counts']['graded']} graded, {report['counts']['null']} null; accuracy "
        f"{ag.get('accuracy_ties_half')}% (ties half), "
        f"position consistency {pw.get('position_consistency')}%, "
        f"first-position preference {pw.get('first_position_preference')}%, cost "
        f"${(report['usage'].get('estimated_cost_usd') or 0):.4f}"
    )
    print(
        "accuracy: a judge's tie counts half; decisive: over the judge's non-tie verdicts; consistent: "
        "verdicts kept when the outputs were swapped. GPT-4 figures: LLMBar's published evaluator "
        "accuracies (averaged over both orders; * = Vanilla_NoRules, the only vanilla run published "
        "for the Processed subsets). 95% CI: Wilson, a tie counting half."
    )
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", nargs="?", default=str(DEFAULT_FOLDER), help="the llmbar folder")
    parser.add_argument("--judge", default=None, help="anthropic:MODEL (default: judgeq's default judge)")
    parser.add_argument("--limit", type=int, default=None, help="pairs per subset (default: all)")
    parser.add_argument("--stand-in", action="store_true", help="judge with judgeq's fake Messages API")
    args = parser.parse_args(argv)
    folder = Path(args.folder).resolve()
    if not folder.is_dir() or not subsets(folder):
        print(f"llmbar: {folder} is absent; nothing to measure (skipped).")
        return 0
    env = dict(os.environ)
    judge = args.judge or "anthropic"
    if args.stand_in:
        with fake_api(0.0) as url:
            env.update(ANTHROPIC_API_KEY=API_KEY, ANTHROPIC_BASE_URL=url)
            return run(folder, args.judge or "anthropic:claude-stand-in", args.limit, env)
    if "ANTHROPIC_API_KEY" not in env and not judge.startswith("lexical"):
        print("llmbar: ANTHROPIC_API_KEY is not set: give a key to measure a real judge, or --stand-in")
        return 2
    return run(folder, judge, args.limit, env)


if __name__ == "__main__":
    sys.exit(main())

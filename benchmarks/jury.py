"""A jury of three small judges from three families against one large judge, on LLMBar's labelled
pairs, replaying the verdicts the LLMBar authors published (issue 31, point 6).

    python benchmarks/jury.py [FOLDER] [--limit N]

FOLDER defaults to ``../shared/data/external/llmbar`` (absent: says so, exits 0). Every pair
of every subset becomes a pair job (benchmarks/llmbar.py's), graded by ``judgeq run --rubric
pairwise`` in both orders with ``python:`` judges that answer, for each item and presentation
order, with the verdict an evaluator published (strategy ``Vanilla_NoRules``, the one run
published for every subset; benchmarks/_replay_judges.py): the jury is ChatGPT (OpenAI), PaLM 2
(Google) and LLaMA-2 (Meta), ``--jury median --no-majority tie``; the large judge GPT-4 alone.
Printed: each member's accuracy (from the jury's report: its verdict against the label), the
jury's, GPT-4's, with 95% Wilson intervals; a pair counts right when the verdict of both orders
matches the label, a tie (the two orders disagree, or no majority) counting half. Then what a
jury of today's small models costs against one large judge on the same jobs, from
``judgeq run --dry-run`` (the shipped prices).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from llmbar import DEFAULT_FOLDER, subsets, write_jobs

from judgeq.figures.stats import wilson

HERE = Path(__file__).resolve().parent
MEMBERS = {"chatgpt": "ChatGPT (OpenAI)", "palm2": "PaLM 2 (Google)", "llama2": "LLaMA-2 (Meta)"}
SMALL = ("anthropic:claude-haiku-4-5", "openai:gpt-4.1-mini", "gemini:gemini-2.5-flash")
LARGE = ("anthropic:claude-opus-4-5", "openai:gpt-4.1", "gemini:gemini-2.5-pro")


def judgeq(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "judgeq", *args], env=env, capture_output=True, text=True)


def graded(
    batch: Path, out: Path, name: str, judges: list[str], env: dict[str, str], *extra: str
) -> dict[str, Any]:
    args = ["run", str(batch), "--rubric", "pairwise", "--out", str(out), "--no-cache", "--run-id", name]
    for j in judges:
        args += ["--judge", j]
    proc = judgeq([*args, *extra], env)
    if proc.returncode != 0:
        sys.exit(proc.stderr[-3000:])
    report: dict[str, Any] = json.loads((out / name / "report.json").read_text())
    return report


def accuracy(report: dict[str, Any]) -> tuple[float, int, list[float] | None]:
    """Ties half, over the labelled pairs graded (a null counts as a tie: never as right)."""
    pairs = report["agreement"]["pairs"]
    n = int(pairs["n"]) + int(report["counts"]["null"])
    credit = pairs["accuracy_ties_half"] / 100 * pairs["n"] + 0.5 * report["counts"]["null"]
    return credit / n, n, wilson(credit, n)


def cost(batch: Path, judges: tuple[str, ...], env: dict[str, str]) -> float | None:
    args = ["run", str(batch), "--rubric", "pairwise", "--dry-run", "--no-cache"]
    for j in judges:
        args += ["--judge", j]
    proc = judgeq(args, env)
    found = re.search(r"total\D*\$([\d,]+\.\d+)", proc.stdout)
    return float(found.group(1).replace(",", "")) if found else None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", nargs="?", default=str(DEFAULT_FOLDER))
    parser.add_argument("--limit", type=int, default=None, help="pairs per subset (default: all)")
    args = parser.parse_args(argv)
    folder = Path(args.folder).resolve()
    if not (folder / "evaluators").is_dir() or not subsets(folder):
        print(f"jury: {folder} (with its evaluators/) is absent; nothing to measure (skipped).")
        return 0
    env = {k: v for k, v in os.environ.items() if not k.startswith("JUDGEQ_")}
    env.update(
        JUDGEQ_REPLAY_DIR=str(folder), JUDGEQ_JUDGE_MODULES="_replay_judges",
        PYTHONPATH=os.pathsep.join(filter(None, [str(HERE), env.get("PYTHONPATH")])),
    )  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="judgeq-jury-") as tmp:
        batch = Path(tmp) / "llmbar.jsonl"
        write_jobs(folder, batch, args.limit)
        out = Path(tmp) / "out"
        out.mkdir()
        members = [f"python:_replay_judges:{m}" for m in MEMBERS]
        jury = graded(batch, out, "jury", members, env, "--jury", "median", "--no-majority", "tie")
        large = graded(batch, out, "gpt4", ["python:_replay_judges:gpt4"], env)
        alone = {m: graded(batch, out, m, [f"python:_replay_judges:{m}"], env) for m in MEMBERS}
        costs = {"jury": cost(batch, SMALL, env), **{j: cost(batch, (j,), env) for j in LARGE}}
    print(
        f"LLMBar, {jury['counts']['total']} labelled pairs, both orders (published Vanilla_NoRules verdicts)"
    )
    print(f"{'judge':<38} {'pairs':>6} {'accuracy':>9} {'95% CI':>13} {'no verdict':>11} {'with jury':>10}")
    with_jury = jury["council"]["with_council"] or {}
    rows = [
        (f"  {MEMBERS[m]}", alone[m], with_jury.get(f"_replay_judges:{m}", {}).get("rate")) for m in MEMBERS
    ]
    rows += [
        ("jury of the three (median, majority)", jury, None),
        ("GPT-4 alone (one large judge)", large, None),
    ]
    for name, report, agree in rows:
        rate, n, ci = accuracy(report)
        shown = f"({ci[0]:.1f}-{ci[1]:.1f})" if ci else "–"
        together = f"{agree:.1f}%" if agree is not None else ""
        print(
            f"{name:<38} {n:>6} {100 * rate:>8.1f}% {shown:>13} {report['counts']['null']:>11} {together:>10}"
        )
    print(
        "accuracy: a pair is right when its verdict of both orders (a flip is a tie) is the label; a tie, or "
        "no verdict, counts half. with jury: how often a member's verdict was the jury's."
    )
    print("\nwhat it would cost today on these jobs (judgeq run --dry-run, shipped prices):")
    jury_cost = costs["jury"]
    print(f"  jury {', '.join(SMALL)}: " + (f"${jury_cost:.2f}" if jury_cost is not None else "unknown"))
    for judge in LARGE:
        c = costs[judge]
        ratio = f" ({c / jury_cost:.1f}x the jury)" if c and jury_cost else ""
        print(f"  one large judge {judge}: " + (f"${c:.2f}{ratio}" if c is not None else "unknown"))
    return 0


if __name__ == "__main__":
    sys.exit(main())

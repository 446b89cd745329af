"""Deterministic trajectory checks against τ-bench's recorded reward (issue 30, point 9).

τ-bench's published gpt-4o airline trajectories (``../shared/data/external/tau-bench/``,
MIT): 200 runs (50 tasks x 4 trials), each with its reference actions and its ``reward``
(1.0 when the database the agent left equals the one the reference actions make, and the
required outputs were said). Each run is imported as a conversation job
(:func:`judgeq.transcripts.importers.from_tau_bench`) and graded by checks alone, no judge:

* ``writes exact``: the calls of the tools that change the database equal the reference's,
  in order, with equal arguments (``reference_calls``, ``tools`` = the write tools,
  ``mode: exact``, ``match: exact``); with the task's required outputs said by the agent,
  this is the reward's own definition replayed on the calls, not on the database;
* ``writes unordered, subset, failed skipped``: the same, in any order, arguments as a subset
  (the reference's keys with its values; the agent may add keys), calls whose result was an
  error (τ-bench's tools answer ``Error...`` and change nothing) left out;
* ``writes in order, subset``: the reference's write calls appear in order, each with at
  least the reference's arguments (extra calls and extra arguments allowed);
* ``all calls in order``: every reference call (reads too) appears in order, arguments as
  a subset.

Printed per variant: agreement with the reward (accuracy) with its 95% Wilson interval and a
95% interval from a bootstrap over tasks (the 4 trials of a task are not independent),
Cohen's kappa, and the confusion counts. Nothing is called; about a second.

    python benchmarks/tau_checks.py [--data ../shared/data/external/tau-bench] [--boot 2000]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from judgeq.figures.stats import wilson
from judgeq.jobs.conversation import ConversationJob, job_checks
from judgeq.transcripts.checks import Check
from judgeq.transcripts.importers import from_tau_bench

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DATA = ROOT.parent / "shared" / "data" / "external" / "tau-bench"
WRITES = [
    "book_reservation",
    "cancel_reservation",
    "update_reservation_flights",
    "update_reservation_baggages",
    "update_reservation_passengers",
    "send_certificate",
]
"""The airline tools that change the database (``tau_bench/envs/airline/tools``: every tool
that writes to ``data``); the others read, think, calculate or transfer."""

VARIANTS = {
    "writes unordered, subset, failed skipped (+ outputs said)": [
        Check(
            check="reference_calls",
            tools=WRITES,
            mode="unordered",
            match="subset",
            skip_failed=True,
            name="writes",
        ),
    ],
    "writes exact (+ outputs said)": [
        Check(check="reference_calls", tools=WRITES, mode="exact", match="exact", name="writes"),
    ],
    "writes in order, subset": [
        Check(check="reference_calls", tools=WRITES, mode="in_order", match="subset", name="writes"),
    ],
    "all calls in order, subset": [
        Check(check="reference_calls", mode="in_order", match="subset", name="calls")
    ],
}


def outputs_said(job: ConversationJob, outputs: Sequence[str]) -> bool:
    """τ-bench's output rule: each required output occurs in some assistant message (lowercased,
    commas removed)."""
    said = " ".join(m.content.lower().replace(",", "") for m in job.messages if m.role == "assistant")
    return all(o.lower().replace(",", "") in said for o in outputs)


def kappa(tp: int, fp: int, fn: int, tn: int) -> float | None:
    n = tp + fp + fn + tn
    po = (tp + tn) / n
    pe = ((tp + fp) * (tp + fn) + (fn + tn) * (fp + tn)) / (n * n)
    return None if pe == 1 else (po - pe) / (1 - pe)


def boot_interval(rows: list[tuple[int, bool, bool]], boot: int, seed: int = 0) -> tuple[float, float]:
    """95% percentile interval of the accuracy, resampling tasks (with all their trials)."""
    by_task: dict[int, list[bool]] = {}
    for task, said, truth in rows:
        by_task.setdefault(task, []).append(said == truth)
    tasks = list(by_task)
    rng = random.Random(seed)
    stats = []
    for _ in range(boot):
        picked = [rng.choice(tasks) for _ in tasks]
        hits = [h for t in picked for h in by_task[t]]
        stats.append(100.0 * sum(hits) / len(hits))
    stats.sort()
    return stats[int(0.025 * boot)], stats[int(0.975 * boot) - 1]


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--boot", type=int, default=2000)
    args = ap.parse_args(argv)
    runs_path, tools_path = args.data / "gpt-4o-airline.json", args.data / "gpt-4o-airline.tools.json"
    if not runs_path.exists():
        print(f"skipped: {runs_path} is absent (τ-bench's published trajectories)")
        return 0
    runs: list[dict[str, Any]] = json.loads(runs_path.read_text())
    tools = json.loads(tools_path.read_text()) if tools_path.exists() else None
    jobs = [ConversationJob.model_validate(line) for line in from_tau_bench(runs, tools)]
    truth = [float(r["reward"]) >= 1.0 for r in runs]
    outputs = [r["info"]["task"].get("outputs") or [] for r in runs]
    print(
        f"τ-bench gpt-4o airline: {len(jobs)} runs of {len({r['task_id'] for r in runs})} tasks, "
        f"reward 1.0 in {sum(truth)}"
    )
    print(f"{'checks':58} {'agree':>7} {'95% Wilson':>14} {'95% by task':>14} {'kappa':>6}   tp  fp  fn  tn")
    for name, checks in VARIANTS.items():
        rows = []
        for job, run, real, outs in zip(jobs, runs, truth, outputs, strict=True):
            passed = all(o.passed for o in job_checks(checks, job))
            if "outputs said" in name:
                passed = passed and outputs_said(job, outs)
            rows.append((int(run["task_id"]), passed, real))
        tp = sum(s and t for _, s, t in rows)
        fp = sum(s and not t for _, s, t in rows)
        fn = sum(t and not s for _, s, t in rows)
        tn = sum(not s and not t for _, s, t in rows)
        agree = 100.0 * (tp + tn) / len(rows)
        ci = wilson(tp + tn, len(rows)) or [0.0, 0.0]
        lo, hi = boot_interval(rows, args.boot)
        k = kappa(tp, fp, fn, tn)
        k_text = f"{k:6.3f}" if k is not None else "     -"
        print(
            f"{name:58} {agree:6.1f}% {ci[0]:6.1f}-{ci[1]:5.1f}% {lo:6.1f}-{hi:5.1f}% {k_text}  "
            f"{tp:3d} {fp:3d} {fn:3d} {tn:3d}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())

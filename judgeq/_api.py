"""The Python API: grade from a notebook or a script, with the same pipeline as the CLI.

::

    import judgeq

    report = judgeq.grade("batch.jsonl", rubric="quality", judge="anthropic:claude-haiku-4-5")
    report.to_dict()["overall"]          # report.json as a dict
    df = report.to_pandas()              # one row per job (needs pandas)

    run_id = judgeq.submit("big.jsonl", rubric="quality", redis_url="redis://host:6379/0")
    report = judgeq.wait(run_id, redis_url="redis://host:6379/0")   # workers grade it

    report = judgeq.load_report("results/20261123-101500-3f9a1c")

``grade`` runs in this process (``judgeq run``); ``submit``/``wait`` use Redis and workers
(``judgeq submit``/``judgeq wait``).  Options are the CLI's, as keyword arguments (``weights``,
``thresholds``, ``run_id``, ``skip_invalid``, ``batch_api``, ``no_swap``, ``council``,
``max_cost``, ``rpm``, ...), and settings come from ``JUDGEQ_*`` as for the CLI.  Errors are
:class:`~judgeq.JudgeqError` subclasses with the CLI's one-line messages.

This module imports the producer (and through it Redis and Celery) only when a function is
called, so ``import judgeq`` stays free of them.
"""

from __future__ import annotations

import json
import sys
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, TextIO

from ._runfolder import Report, load_report

__all__ = ["Report", "grade", "load_report", "submit", "wait"]

Jobs = str | Path | Iterable[Mapping[str, Any]]


def _batch_file(jobs: Jobs, tmp: Path) -> Path:
    """A path to a JSONL batch: ``jobs`` itself, or ``jobs`` (dicts) written to ``tmp``."""
    if isinstance(jobs, (str, Path)):
        return Path(jobs)
    path = tmp / "jobs.jsonl"
    with path.open("w", encoding="utf-8") as f:
        for job in jobs:
            f.write(json.dumps(dict(job), ensure_ascii=False) + "\n")
    return path


def _judges(judge: str | Iterable[str] | None) -> tuple[str, ...]:
    if judge is None:
        return ()
    return (judge,) if isinstance(judge, str) else tuple(judge)


def grade(
    jobs: Jobs,
    *,
    rubric: str,
    judge: str | Iterable[str] | None = None,
    out: str | Path | None = None,
    concurrency: int | None = None,
    progress: TextIO | None = None,
    **options: Any,
) -> Report:
    """Grade ``jobs`` (a JSONL path, or dicts shaped like batch lines) in this process and
    return the report; the files are written under ``out`` (default: ``JUDGEQ_RESULTS_DIR``,
    ``results``). ``judge`` may be a list (a council). ``progress``: a stream for the
    progress line (default: none)."""
    from judgeq.producer.embedded import run_plan
    from judgeq.producer.plan import make_plan
    from judgeq.producer.settings import settings_for

    settings = settings_for(out=out, concurrency=concurrency, **options)
    with tempfile.TemporaryDirectory(prefix="judgeq-grade-") as tmp:
        path = _batch_file(jobs, Path(tmp))
        plan = make_plan(
            batch_path=path,
            batch_name=str(jobs) if isinstance(jobs, (str, Path)) else "<python>",
            rubric_ref=rubric,
            settings=settings,
            **plan_options(judge, options),
        )
        report, paths = run_plan(plan, settings, stream=progress)
    return Report(report, folder=paths["report.json"].parent)


def plan_options(judge: str | Iterable[str] | None, options: Mapping[str, Any]) -> dict[str, Any]:
    """The keyword arguments of :func:`judgeq.producer.plan.make_plan` among ``options``."""
    keys = ("weights", "thresholds", "run_id", "skip_invalid", "position_weights", "default_weight", "hit_k")
    out: dict[str, Any] = {k: options[k] for k in keys if options.get(k) is not None}
    out["judge"] = _judges(judge)
    out["council_mode"] = options.get("council")
    out["swap"] = not options.get("no_swap", False)
    out["disagreement"] = options.get("disagreement")
    return out


def submit(
    jobs: Jobs,
    *,
    rubric: str,
    judge: str | Iterable[str] | None = None,
    redis_url: str | None = None,
    **options: Any,
) -> str:
    """Validate ``jobs`` and enqueue them for the workers (``judgeq submit``); the run id."""
    from judgeq.producer.distributed import submit_plan
    from judgeq.producer.plan import make_plan
    from judgeq.producer.settings import settings_for

    settings = settings_for(redis_url=redis_url, **options)
    with tempfile.TemporaryDirectory(prefix="judgeq-submit-") as tmp:
        path = _batch_file(jobs, Path(tmp))
        plan = make_plan(
            batch_path=path,
            batch_name=str(jobs) if isinstance(jobs, (str, Path)) else "<python>",
            rubric_ref=rubric,
            settings=settings,
            **plan_options(judge, options),
        )
        return submit_plan(plan, settings).run_id


def wait(
    run_id: str,
    *,
    redis_url: str | None = None,
    out: str | Path | None = None,
    progress: TextIO | None = sys.stderr,
) -> Report:
    """Wait for a submitted run's report (workers grade it), write its files, return it."""
    from judgeq.producer.distributed import wait_run
    from judgeq.producer.settings import settings_for

    settings = settings_for(redis_url=redis_url, out=out)
    report, paths = wait_run(run_id, settings, stream=progress)
    return Report(report, folder=paths["report.json"].parent)

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
``thresholds``, ``run_id``, ``skip_invalid``, ``batch_api``, ``no_swap``, ``council``, ``jury``,
``max_cost``, ``prices``, ``rpm``, ...), and settings come from ``JUDGEQ_*`` as for the CLI.  Errors are
:class:`~judgeq.JudgeqError` subclasses with the CLI's one-line messages.

The package root re-exports these lazily (``judgeq.grade`` imports this module on first
access), and this module imports the rest of the producer (and through it Redis and Celery)
only when a function is called, so ``import judgeq`` stays free of them and the core never
imports the producer.
"""

from __future__ import annotations

import contextlib
import json
import logging
import sys
import tempfile
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from judgeq.store.runfolder import Report, load_report

if TYPE_CHECKING:
    from judgeq.producer.plan import Plan
    from judgeq.settings import Settings

__all__ = ["Report", "grade", "load_report", "submit", "wait"]

log = logging.getLogger("judgeq")

Jobs = str | Path | Iterable[Mapping[str, Any]]


def _jobs_file(jobs: Jobs, tmp: Path) -> Path:
    """A path to a JSONL batch: ``jobs`` itself, or ``jobs`` (dicts) written to ``tmp``."""
    if isinstance(jobs, (str, Path)):
        return Path(jobs)
    path = tmp / "jobs.jsonl"
    with path.open("w", encoding="utf-8") as f:
        for job in jobs:
            f.write(json.dumps(dict(job), ensure_ascii=False) + "\n")
    return path


OPTIONS = frozenset(
    {
        # how the plan is made (judgeq.producer.plan.plan_kwargs)
        "weights", "thresholds", "run_id", "skip_invalid", "position_weights", "default_weight",
        "hit_k", "council", "no_swap", "disagreement", "jury", "no_majority",
        # settings (judgeq.producer.settings.settings_for)
        "safety_gate", "judge_timeout", "judge_deadline", "no_cache", "batch_api", "max_cost",
        "prices", "rpm", "itpm", "otpm", "share",
    }
)  # fmt: skip
"""The CLI's options a :func:`grade` or :func:`submit` call takes as keyword arguments."""


def _check_options(name: str, options: Mapping[str, Any]) -> None:
    """A misspelt option is an error (as a misspelt flag is), never silently ignored."""
    import difflib

    for key in options:
        if key not in OPTIONS:
            close = difflib.get_close_matches(key, sorted(OPTIONS), n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise TypeError(f"{name}() got an unexpected keyword argument {key!r}{hint}")


@contextlib.contextmanager
def _planned(
    name: str,
    jobs: Jobs,
    rubric: str,
    judge: str | Iterable[str] | None,
    settings: Settings,
    options: Mapping[str, Any],
) -> Iterator[Plan]:
    """The plan of ``jobs`` (their jobs file written to a temporary folder when they are
    dicts), made from the options as the CLI makes it; the folder lasts as long as the block."""
    from judgeq.producer.plan import make_plan, plan_kwargs

    with tempfile.TemporaryDirectory(prefix=f"judgeq-{name}-") as tmp:
        plan = make_plan(
            jobs_path=_jobs_file(jobs, Path(tmp)),
            jobs_name=str(jobs) if isinstance(jobs, (str, Path)) else "<python>",
            rubric_ref=rubric,
            settings=settings,
            **plan_kwargs({**options, "judge": judge}),
        )
        if plan.notice:  # the judge was chosen for the caller (the one default rule): say which
            for line in plan.notice.splitlines():
                log.info("%s", line.removeprefix("judgeq: "))
        yield plan


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
    from judgeq.producer.settings import settings_for

    _check_options("grade", options)
    settings = settings_for(out=out, concurrency=concurrency, **options)
    with _planned("grade", jobs, rubric, judge, settings, options) as plan:
        report, paths = run_plan(plan, settings, stream=progress)
    return Report(report, folder=paths["report.json"].parent)


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
    from judgeq.producer.settings import settings_for

    _check_options("submit", options)
    settings = settings_for(redis_url=redis_url, **options)
    with _planned("submit", jobs, rubric, judge, settings, options) as plan:
        return submit_plan(plan, settings).run_id


def wait(
    run_id: str,
    *,
    redis_url: str | None = None,
    out: str | Path | None = None,
    progress: TextIO | None = sys.stderr,
    keep_waiting: bool = False,
) -> Report:
    """Wait for a submitted run's report (workers grade it), write its files, return it.

    A run that pauses for something a person must do (its cost cap, a refused key) raises
    :class:`judgeq.errors.RunPaused` with the reason and the fix, unless ``keep_waiting``
    (then ``judgeq resume`` elsewhere lets it go on)."""
    from judgeq.producer.distributed import wait_run
    from judgeq.producer.settings import settings_for

    settings = settings_for(redis_url=redis_url, out=out)
    report, paths = wait_run(run_id, settings, stream=progress, stop_on_pause=not keep_waiting)
    return Report(report, folder=paths["report.json"].parent)

"""``judgeq run``: grade a jobs file in this process (no Redis, no workers to start)."""

from __future__ import annotations

import sys
from typing import Any

import click

from ..embedded import Interrupted, run_plan
from ..plan import Plan, judges_text
from ..progress import summary_text
from .options import grading_options, settings_from
from .submit import validated

__all__ = ["run"]


@click.command()
@grading_options
@click.option(
    "--concurrency",
    "-c",
    type=int,
    default=None,
    help="Concurrent judge calls [JUDGEQ_CONCURRENCY; default 16].",
)
def run(**flags: Any) -> None:
    """Grade JOBS_FILE (JSONL, or - for stdin) in-process with the same task code as the
    workers, and write the report.

    Ctrl-C writes a partial report of what finished; the same command with --run-id RUN_ID
    grades the rest."""
    settings = settings_from(**flags)

    def grade(plan: Plan) -> None:  # a cascade's calibration set, graded here too
        run_plan(plan, settings, stream=sys.stderr)

    with validated(settings, {**flags, "command": "run"}, grade) as plan:
        if plan is None:
            return
        click.echo(
            f"judgeq: run {plan.spec.run_id}: grading {plan.spec.total} jobs in-process "
            f"(rubric {plan.spec.rubric.name}, judge {judges_text(plan)}, "
            f"concurrency {settings.concurrency})",
            err=True,
        )
        try:
            report, paths = run_plan(plan, settings, stream=sys.stderr)
        except Interrupted as exc:
            click.echo(f"\njudgeq: {exc}", err=True)
            raise SystemExit(130) from None
    click.echo(summary_text(report, paths))

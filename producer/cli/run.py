"""``judgeq run``: grade a batch in this process (no Redis, no workers to start)."""

from __future__ import annotations

from typing import Any

import click

from judgeq._errors import JudgeqError
from judgeq.judges import judge_factory

from ..embedded import EmbeddedRunner
from ..plan import preflight
from ..progress import summary_text, wait_for_report, write_files
from .options import grading_options, settings_from
from .submit import validated


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
    """Grade BATCH in-process with the same task code as the workers, and write the report."""
    settings = settings_from(**flags)
    with validated(settings, flags) as plan:
        if plan is None:
            return
        preflight(plan, settings)
        click.echo(
            f"judgeq: run {plan.spec.run_id}: grading {plan.spec.total} jobs in-process "
            f"(rubric {plan.spec.rubric.name}, judge {plan.judge}, "
            f"concurrency {settings.concurrency})",
            err=True,
        )
        with EmbeddedRunner(judge_factory(settings), settings.concurrency, settings) as runner:
            run_id = runner.submit(plan, settings)
            try:
                report = wait_for_report(runner.store, run_id, interval=0.2, stop_on_pause=True)
            except KeyboardInterrupt:
                click.echo("\njudgeq: interrupted; an embedded run stops with its process", err=True)
                raise SystemExit(130) from None
            if runner.errors:
                raise JudgeqError(f"run {run_id} failed: {runner.errors[0]!r}")
            paths = write_files(runner.store, run_id, report, settings.results_dir)
    click.echo(summary_text(report, paths))

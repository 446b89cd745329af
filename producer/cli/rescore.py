"""``judgeq rescore RUN``: a run scored again under new weights, thresholds or rubric version,
without a judge call."""

from __future__ import annotations

import time
from typing import Any

import click

from judgeq.errors import ConfigError

from ..runsource import open_run
from .options import out_option, redis_option, settings_from

__all__ = ["rescore"]


@click.command()
@click.argument("run")
@click.option("--weights", default=None, help="New dimension weights, e.g. accuracy=0.5,clarity=0.1.")
@click.option(
    "--rubric", "rubric_ref", default=None, help="Another version of the rubric (same dimensions and scale)."
)
@click.option("--thresholds", default=None, help="New pass-rate thresholds, e.g. 8,7,6.5.")
@click.option(
    "--safety-cap", type=float, default=None, help="New overall of outputs that failed the safety gate."
)
@click.option(
    "--pass-threshold",
    type=float,
    default=None,
    help="A new pass threshold (what 'passed' and pass_rate mean; --thresholds only adds columns).",
)
@click.option("--run-id", default=None, help="The new run's id (default: a new one).")
@redis_option
@out_option
def rescore(
    run: str,
    weights: str | None,
    rubric_ref: str | None,
    thresholds: str | None,
    safety_cap: float | None,
    pass_threshold: float | None,
    run_id: str | None,
    **flags: Any,
) -> None:
    """Score RUN again under new weights, thresholds or rubric version, with no judge call:
    a new run (new id, linked to its source) to put beside the original with judgeq compare."""
    from judgeq.report.build import build_report, new_aggregator
    from judgeq.report.files import write_report_files
    from judgeq.report.rescore import rescore as rescore_one
    from judgeq.report.rescore import rescored_spec
    from judgeq.rubric.model import parse_weights, read_rubric_text
    from judgeq.runspec import utcnow

    from ..plan import parse_thresholds
    from ..progress import summary_text

    if not (weights or rubric_ref or thresholds or safety_cap is not None or pass_threshold is not None):
        raise ConfigError(
            "rescore: give --weights, --rubric, --thresholds, --pass-threshold or --safety-cap "
            "(what to change)"
        )
    settings = settings_from(**flags)
    source = open_run(run, settings)
    if source.spec is None:
        raise ConfigError(
            f"run {source.run_id}: its specification (run.json) is missing: it cannot be re-scored"
        )
    text, origin = read_rubric_text(rubric_ref) if rubric_ref else (None, None)
    spec = rescored_spec(
        source.spec,
        rubric_text=text,
        rubric_source=origin,
        weights=parse_weights(weights) if weights else None,
        thresholds=parse_thresholds(thresholds) if thresholds else None,
        safety_cap=safety_cap,
        pass_threshold=pass_threshold,
        run_id=run_id,
    )
    rubric = spec.rubric

    def results() -> Any:
        return (rescore_one(r, rubric, spec) for r in source.results())

    agg = new_aggregator(spec)
    started = time.time()
    for r in results():
        agg.add(r)
    now = utcnow()
    report = build_report(
        spec, agg, started_at=now, finished_at=now, wall_s=time.time() - started, rescored_from=source.run_id
    )
    paths = write_report_files(settings.results_dir, report, results(), spec=spec)
    click.echo(f"judgeq: run {spec.run_id}: run {source.run_id} re-scored with no judge call", err=True)
    click.echo(spec.run_id)
    click.echo(summary_text(report, paths))

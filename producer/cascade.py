"""A cascade run's calibration (``--cascade ... --calibration FILE``): the calibration set is
graded first, by every judge of the cascade (a run of its own, ``RUN_ID-calibration``, in the
same mode as the batch: in this process for ``judgeq run``, by the workers for ``judgeq
submit``), the thresholds are fitted on its labels (:func:`judgeq.report.cascade.fit_thresholds`)
and stored with the batch's run, which is then graded with them.

A re-run of the same command with ``--run-id`` finds the calibration run's results and grades
none of its jobs again (a run resumes)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

import click

from judgeq.errors import ConfigError
from judgeq.jobs.reader import open_jobs_file
from judgeq.report.cascade import Fitted, fit_thresholds
from judgeq.settings import Settings

from .plan import Plan, make_plan, plan_kwargs
from .runsource import open_run

__all__ = ["calibrated", "calibration_plan", "fitted_text"]


def calibration_plan(plan: Plan, settings: Settings, flags: dict[str, Any]) -> Plan:
    """The plan of ``plan``'s calibration run: the calibration file, the same rubric and
    judges, every stage grading every job."""
    with open_jobs_file(str(flags["calibration"])) as (jobs_path, name):
        options = {**flags, "run_id": f"{plan.spec.run_id}-calibration", "skip_invalid": False}
        return make_plan(
            jobs_path=jobs_path,
            jobs_name=name,
            rubric_ref=flags["rubric_ref"],
            settings=settings,
            calibration=True,
            **plan_kwargs(options),
        )


def calibrated(
    plan: Plan,
    settings: Settings,
    flags: dict[str, Any],
    grade: Callable[[Plan], None],
) -> Plan:
    """``plan`` (a cascade's, its thresholds not fitted) with the thresholds fitted on its
    calibration set, graded by ``grade`` (the command's way of grading a plan to its report
    files)."""
    cascade = plan.spec.cascade
    if cascade is None:
        return plan
    cal = calibration_plan(plan, settings, flags)
    click.echo(
        f"judgeq: run {cal.spec.run_id}: grading the calibration set {cal.spec.jobs_file} "
        f"({cal.spec.total} labelled jobs) with every judge of the cascade, {cascade.samples} samples each",
        err=True,
    )
    grade(cal)
    source = open_run(cal.spec.run_id, settings)
    judges = [j.model for j in plan.judges]
    try:
        fitted = fit_thresholds(
            source.results(),
            plan.spec.rubric,
            cascade,
            judges,
            prices=plan.spec.price_book(),
            calibration=cal.spec.jobs_file,
            calibration_run=cal.spec.run_id,
        )
    except ValueError as exc:
        raise ConfigError(f"{cal.spec.jobs_file}: {exc}: no threshold can be fitted") from None
    click.echo(fitted_text(fitted, judges), err=True)
    return replace(plan, spec=plan.spec.model_copy(update={"cascade": fitted.spec}))


def fitted_text(fitted: Fitted, judges: list[str]) -> str:
    """The calibration's outcome in a few lines: the thresholds, and what they keep."""
    spec = fitted.spec
    stages = ", ".join(
        f"{judge} {'keeps nothing' if t is None else f'at confidence >= {t:.2f}'}"
        for judge, t in zip(judges, spec.thresholds, strict=True)
    )
    lines = [
        f"judgeq: cascade calibrated on {fitted.used} labelled jobs for agreement >= "
        f"{100 * spec.agreement:.0f}% with probability >= {100 * (1 - spec.risk):.0f}%: {stages}"
    ]
    if fitted.coverage is not None:
        agree = "no verdict kept" if fitted.agreement is None else f"{100 * fitted.agreement:.1f}% agree"
        lines.append(
            f"  on the calibration set: {100 * fitted.coverage:.1f}% of jobs kept, {agree} with the labels"
        )
    if all(t is None for t in spec.thresholds):
        lines.append(
            "  no judge can be trusted at this level on this calibration set: every job will be "
            "abstained (lower --agreement, raise --risk, or label more jobs)"
        )
    for why, n in sorted(fitted.left_out.items()):
        lines.append(f"  left out of the fit: {n} job(s): {why}")
    return "\n".join(lines)

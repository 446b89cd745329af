"""``judgeq rubrics calibrate``: a rubric and a judge against people's labels, as a CI gate.

The rubric's goldens (each with its expected outcome as the label) and, with ``--labels``, a
labelled batch are graded by the judge through the same pipeline as ``judgeq run``; the
report's agreement section is printed, and the command exits 1 when agreement is below
``--min-accuracy`` or ``--min-kappa``.

What is compared: pairwise rubrics, the winner against ``a``/``b``/``tie`` (accuracy with a tie
on one side counted half; Cohen's kappa); pass-fail rubrics, pass/fail (accuracy, Cohen's
kappa); numeric rubrics, pass/fail at the rubric's threshold (accuracy) and, with numeric
labels, the quadratic-weighted kappa (else Cohen's kappa on pass/fail). The accuracy gated is
over every labelled job (a null is a miss); kappa is over the graded ones, so the gate also
needs ``--min-coverage`` (90%) of the labelled jobs graded.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import click

from judgeq.errors import ConfigError, RunPaused
from judgeq.figures.formatting import fmt, fmt_ci
from judgeq.grading.result import Result
from judgeq.jobs.kinds import KINDS
from judgeq.jobs.reader import JobsFileLimits, open_jobs_file, scan_jobs_file
from judgeq.judges import judge_factory
from judgeq.judges.providers import spec_forms
from judgeq.report.model import Agreement, RunReport
from judgeq.rubric.model import Rubric

from ..embedded import EmbeddedRunner
from ..plan import label_check, make_plan, preflight
from ..progress import wait_for_report, write_files
from .options import out_option, settings_from

__all__ = ["calibrate", "figures"]


def figures(agreement: Agreement | None, rubric: Rubric) -> tuple[float | None, float | None, str]:
    """(accuracy %, kappa, what they are) for the gate (see the module docstring). The accuracy
    is over every labelled job: a null (no usable verdict) counts as a miss, so a judge cannot
    pass the gate by failing on the hard cases."""
    ag = agreement or Agreement(labelled=0, graded=0, nulls=0)
    accuracy: float | None
    kappa: float | None
    if rubric.is_pairwise:
        accuracy, kappa = (ag.pairs.accuracy_ties_half, ag.pairs.kappa) if ag.pairs else (None, None)
        what = "pair winner (a tie on one side counts half)"
    else:
        pf = ag.pass_fail
        accuracy = pf.accuracy if pf else None
        if ag.numeric is not None and ag.numeric.qwk is not None:
            kappa, what = ag.numeric.qwk, "pass/fail accuracy; quadratic-weighted kappa of the scores"
        else:
            kappa, what = (pf.kappa if pf else None), "pass/fail"
    if accuracy is not None and ag.labelled:
        accuracy = round(accuracy * ag.graded / ag.labelled, 2)
    return accuracy, kappa, what + ("; nulls count as misses" if ag.labelled > ag.graded else "")


def _labelled_lines(path: str, limits: JobsFileLimits, rubric: Rubric) -> list[str]:
    """The lines of a labelled batch (every job must carry a label that fits the rubric)."""
    with open_jobs_file(path) as (real, name):
        scan = scan_jobs_file(real, name, limits, label_check(rubric))
        scan.raise_if_invalid()
        lines = []
        for line_no, raw in enumerate(real.read_text(encoding="utf-8-sig").splitlines(), 1):
            if not raw.strip():
                continue
            if json.loads(raw).get("label") is None:
                raise ConfigError(f"{name}:{line_no}: label: required for calibration (every job needs one)")
            lines.append(raw)
        return lines


@click.command()
@click.argument("rubric_ref", metavar="RUBRIC")
@click.option("--labels", "labels", default=None, help="A labelled batch (JSONL; every line has a label).")
@click.option(
    "--judge",
    multiple=True,
    help=f"The judge to calibrate ({spec_forms()}); several: a council.",
)
@click.option(
    "--min-accuracy", type=click.FloatRange(0, 100), default=None, help="Exit 1 below this accuracy (%)."
)
@click.option("--min-kappa", type=click.FloatRange(-1, 1), default=None, help="Exit 1 below this kappa.")
@click.option(
    "--min-coverage",
    type=click.FloatRange(0, 100),
    default=90.0,
    show_default=True,
    help="Exit 1 when fewer of the labelled jobs than this (%) get a grade (kappa is over graded jobs).",
)
@click.option("--no-swap", "no_swap", is_flag=True, help="Judge each pair once (A first).")
@click.option("--concurrency", "-c", type=int, default=None, help="Concurrent judge calls [16].")
@out_option
def calibrate(rubric_ref: str, labels: str | None, **flags: Any) -> None:
    """Grade RUBRIC's goldens (and a labelled batch) with the judge; print the agreement with
    the labels; exit 1 below --min-accuracy or --min-kappa."""
    settings = settings_from(**flags)
    limits = JobsFileLimits(settings.max_line_bytes, settings.max_field_chars)
    from judgeq.rubric.model import load_rubric

    rubric = load_rubric(rubric_ref)
    lines = [json.dumps(g.job()) for g in rubric.goldens]
    goldens = len(lines)
    if labels:
        lines += _labelled_lines(labels, limits, rubric)
    if not lines:
        raise ConfigError(f"rubric {rubric.name!r} has no goldens: give a labelled batch with --labels")
    with tempfile.TemporaryDirectory(prefix="judgeq-calibrate-") as tmp:
        path = Path(tmp) / "calibration.jsonl"
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        plan = make_plan(
            jobs_path=path,
            jobs_name=f"calibration of {rubric.name} ({goldens} goldens"
            + (f" + {labels})" if labels else ")"),
            rubric_ref=rubric_ref,
            settings=settings,
            judge=flags["judge"],
            swap=not flags["no_swap"],
        )
        if plan.notice:
            click.echo(plan.notice, err=True)
        preflight(plan, settings)
        with EmbeddedRunner(judge_factory(settings), settings.concurrency, settings) as runner:
            run_id = runner.submit(plan, settings)
            try:
                report = wait_for_report(runner.store, run_id, interval=0.2, stop_on_pause=True)
            except RunPaused as paused:  # (an in-process run: no 'judgeq resume' can reach it)
                raise RunPaused(_stopped_text(paused.reason, settings), run_id, paused.reason) from None
            paths = write_files(runner.store, run_id, report, settings.results_dir)
            results = [r for r in runner.store.results(run_id, plan.spec.total) if r is not None]
    typed = RunReport.of(report)
    _print(typed, rubric, plan.judges, goldens, len(lines) - goldens, results)
    click.echo(f"  report: {paths['report.md']}")
    ag = typed.agreement
    accuracy, kappa, _ = figures(ag, rubric)
    failed = []
    if flags["min_accuracy"] is not None and (accuracy is None or accuracy < flags["min_accuracy"]):
        failed.append(f"accuracy {_exact(accuracy)}% < {flags['min_accuracy']:g}%")
    if flags["min_kappa"] is not None and (kappa is None or kappa < flags["min_kappa"]):
        failed.append(f"kappa {_exact(kappa)} < {flags['min_kappa']:g}")
    coverage = 100.0 * ag.graded / ag.labelled if ag is not None and ag.labelled else 0.0
    if coverage < flags["min_coverage"]:
        failed.append(f"only {coverage:.1f}% of the labelled jobs graded (< {flags['min_coverage']:g}%)")
    if failed:
        click.echo(f"FAIL: {'; '.join(failed)}")
        sys.exit(1)
    if flags["min_accuracy"] is not None or flags["min_kappa"] is not None:
        click.echo("PASS")


def _stopped_text(reason: str, settings: Any) -> str:
    """What a calibration stopped by its cost cap or a refused key says (exit 3): why, that no
    figure was computed, and what to do (never 'judgeq resume': the run lived in this process)."""
    cause = reason.split(" (raise it with")[0]
    fix = "with a higher --max-cost" if cause.startswith("max_cost:") else "once the judge set-up is fixed"
    again = (
        "; the replies already paid for come from the reply cache"
        if settings.cache
        else " (with JUDGEQ_CACHE=false every reply is paid for again)"
    )
    return f"calibration stopped: {cause}; no agreement figures. Run it again {fix}{again}"


def _print(
    report: RunReport, rubric: Rubric, judges: list[Any], goldens: int, labelled: int, results: list[Result]
) -> None:
    names = ", ".join(map(str, judges))
    click.echo(f"calibration: rubric {rubric.name} {rubric.version}, judge {names}")
    if all(j.api.offline for j in judges):
        click.echo(
            "  the lexical judge is not an LLM: these figures measure token overlap with the "
            "reference, not an LLM judge (give --judge anthropic:MODEL to calibrate one)"
        )
    ag, c = report.agreement, report.counts
    click.echo(
        f"  jobs: {goldens} goldens + {labelled} labelled; {c.graded} graded, {c.null} null"
        + (
            f" ({', '.join(f'{k} {v}' for k, v in c.null_by_reason.items())}; nulls are not scored)"
            if c.null
            else ""
        )
    )
    accuracy, kappa, what = figures(ag, rubric)
    click.echo(f"  agreement ({what}): accuracy {fmt(accuracy, '%')}, kappa {fmt(kappa, nd=3)}")
    if ag is not None and ag.pairs is not None:
        p = ag.pairs
        excluded = (
            fmt_ci(p.accuracy_ties_excluded, p.accuracy_ties_excluded_ci95, "%")
            if p.ties_excluded_n
            else "– (no job without a tie on either side)"
        )
        click.echo(f"  pairs: accuracy excluding ties {excluded}")
    for kind in KINDS.values():  # the run's kind's own figures of a judge's consistency
        section = report.section(kind.section) if kind.section else None
        if section and kind.calibration is not None:
            for line in kind.calibration(section):
                click.echo(f"  {line}")
    if ag is not None and ag.numeric is not None:
        n = ag.numeric
        click.echo(
            f"  scores: Spearman {fmt(n.spearman, nd=3)}, Kendall's tau {fmt(n.kendall_tau, nd=3)}, "
            f"MAE {fmt_ci(n.mae, n.mae_ci95)}"
        )
    missed = [r for r in results if r.status == "graded" and _missed(r, rubric)]
    for r in missed[:20]:
        said = r.verdict() if rubric.is_pairwise or isinstance(r.label, str) else r.overall
        click.echo(f"  disagrees: {r.job_id}: label {r.label}, judge {said}")


def _exact(x: float | None) -> str:
    """A gated figure as compared (not rounded to look equal to its threshold); – if none."""
    return "–" if x is None else f"{x:g}"


def _missed(r: Result, rubric: Rubric) -> bool:
    if r.label is None:
        return False
    if rubric.is_pairwise:
        return r.verdict() != r.label  # a pair's winner
    if isinstance(r.label, str):
        return (r.label == "pass") != bool(r.passed)
    threshold = rubric.threshold
    return threshold is not None and (r.label >= threshold) != bool(r.passed)

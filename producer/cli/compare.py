"""``judgeq compare A B``: two runs side by side, paired by job id; ``--fail-on-regression``
as a CI gate."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click
from pydantic import ValidationError

from judgeq.errors import ConfigError
from judgeq.judges import judge_name
from judgeq.report.model import RunReport

from ..runsource import RunSource, open_run
from .options import out_option, redis_option, settings_from

__all__ = ["compare"]


@click.command()
@click.argument("run_a")
@click.argument("run_b")
@click.option("--json", "as_json", is_flag=True, help="The comparison as JSON on stdout.")
@click.option(
    "--html",
    "html_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Also write an HTML view.",
)
@click.option("--fail-on-regression", is_flag=True, help="Exit 1 when B is significantly worse than A.")
@click.option(
    "--alpha", type=click.FloatRange(0, 1, min_open=True, max_open=True), default=0.05, show_default=True
)
@click.option(
    "--min-matched",
    type=click.FloatRange(0, 100),
    default=90.0,
    show_default=True,
    help="With --fail-on-regression: exit 2 unless at least this percentage of each run's jobs "
    "matched a job of the other (a wrong run id must not pass the gate).",
)
@click.option(
    "--allow-different",
    is_flag=True,
    help="Compare runs whose rubric or judge differ (by default refused: their scores are not comparable).",
)
@redis_option
@out_option
def compare(
    run_a: str,
    run_b: str,
    as_json: bool,
    html_path: Path | None,
    fail_on_regression: bool,
    alpha: float,
    min_matched: float,
    allow_different: bool,
    **flags: Any,
) -> None:
    """Compare two runs of the same jobs (run ids or results folders), job by job: paired
    score differences with intervals and p-values, pass-rate change, per-model changes and the
    jobs that flipped. --fail-on-regression makes it a CI gate."""
    from judgeq.report import compare as _compare

    settings = settings_from(**flags)
    a, b = open_run(run_a, settings), open_run(run_b, settings)
    ident_a, ident_b = _describe(a), _describe(b)
    differ = differences(ident_a, ident_b)
    if differ and not allow_different:
        raise ConfigError(
            f"runs {a.run_id} and {b.run_id} differ in {'; '.join(differ)}: their scores are not "
            "comparable (--allow-different compares them anyway)"
        )

    def notes_a(ids: set[str]) -> dict[str, str | None]:
        return {r.job_id: r.notes or r.null_reason for r in a.results() if r.job_id in ids}

    result = _compare.compare(a.results(), b.results(), notes_a=notes_a, alpha=alpha)
    result["a"], result["b"] = ident_a, ident_b
    result["differences"] = differ
    if as_json:
        click.echo(json.dumps(result, indent=2))
    else:
        click.echo(_compare.render_markdown(result, a.run_id, b.run_id), nl=False)
    if html_path is not None:
        html_path.write_text(_compare.render_html(result, a.run_id, b.run_id), encoding="utf-8")
        click.echo(f"judgeq: wrote {html_path}", err=True)
    if fail_on_regression:
        short = _too_few_matched(result, min_matched)
        if short:
            click.echo(f"judgeq: error: {short}: the gate cannot judge these runs", err=True)
            sys.exit(2)
        if result["regression"]["significant"]:
            click.echo("judgeq: regression: " + "; ".join(result["regression"]["why"]), err=True)
            sys.exit(1)


def _too_few_matched(result: dict[str, Any], min_matched: float) -> str | None:
    """Why too few jobs matched (None when enough did): the share of each run's jobs that
    matched a job of the other, against ``min_matched`` percent."""
    matched = result["matched"]
    for side, others in (("A", result["only_a"]), ("B", result["only_b"])):
        total = matched + others
        share = 100.0 * matched / total if total else 0.0
        if share < min_matched:
            return (
                f"only {matched} of run {side}'s {total} jobs matched a job of the other run by id "
                f"({share:.0f}%; --min-matched is {min_matched:g}%)"
            )
    return None


def differences(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    """How two runs' rubric and judge differ, in words (empty: comparable). A run re-scored
    from the other (``judgeq rescore``: the same judge replies, new weights or thresholds) is
    comparable though its rubric's fingerprint changed."""
    out = []
    ra, rb = a["rubric"], b["rubric"]
    rescored = a.get("rescored_from") == b["run_id"] or b.get("rescored_from") == a["run_id"]
    if (ra["name"], ra["version"]) != (rb["name"], rb["version"]) or (
        ra["fingerprint"] != rb["fingerprint"] and not rescored
    ):
        out.append(f"rubric ({_rubric_text(ra)} vs {_rubric_text(rb)})")
    if a["judge"] != b["judge"]:
        out.append(f"judge ({a['judge']} vs {b['judge']})")
    return out


def _rubric_text(r: dict[str, Any]) -> str:
    return f"{r['name']} {r['version']}, fingerprint {r['fingerprint'] or 'unknown'}"


def _describe(source: RunSource) -> dict[str, Any]:
    """A run's identity for the comparison: its rubric (name, version, fingerprint) and its
    judge (``provider:model``, or a council's judges), from its report, else its spec."""
    report = _typed(source.report)
    rubric: dict[str, Any] = {}
    if report is not None:
        rubric = {"name": report.rubric.name, "version": report.rubric.version}
        rubric["fingerprint"] = report.rubric.fingerprint
    elif source.spec is not None:
        try:
            loaded = source.spec.rubric
            rubric = {"name": loaded.name, "version": loaded.version, "fingerprint": loaded.fingerprint}
        except Exception:  # a rubric that no longer loads: its source names it
            rubric = {"name": source.spec.rubric_source}
    if report is not None:
        judge = report.judge
        judges = judge.council or [judge_name(judge.provider, judge.model)]
    elif source.spec is not None:
        judges = [judge_name(p, m) for p, m in source.spec.judges]
    else:
        judges = ["unknown"]
    return {
        "run_id": source.run_id,
        "where": source.where,
        "rubric": {
            "name": rubric.get("name") or "unknown",
            "version": rubric.get("version") or "unknown",
            "fingerprint": rubric.get("fingerprint"),
        },
        "judge": ", ".join(judges),
        "rescored_from": report.rescored_from if report is not None else None,
    }


def _typed(document: dict[str, Any] | None) -> RunReport | None:
    """A run's report as the model (any version's), or None without one it can read."""
    try:
        return RunReport.read(document) if document else None
    except (ValidationError, TypeError):  # damaged: the run's spec names its rubric and judge
        return None

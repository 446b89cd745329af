"""``judgeq compare A B``: two runs side by side, paired by job id; ``--fail-on-regression``
as a CI gate."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

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
@redis_option
@out_option
def compare(
    run_a: str,
    run_b: str,
    as_json: bool,
    html_path: Path | None,
    fail_on_regression: bool,
    alpha: float,
    **flags: Any,
) -> None:
    """Compare two runs of the same jobs (run ids or results folders), job by job: paired
    score differences with intervals and p-values, pass-rate change, per-model changes and the
    jobs that flipped. --fail-on-regression makes it a CI gate."""
    from judgeq.report import compare as _compare

    settings = settings_from(**flags)
    a, b = open_run(run_a, settings), open_run(run_b, settings)

    def notes_a(ids: set[str]) -> dict[str, str | None]:
        return {r.job_id: r.notes or r.null_reason for r in a.results() if r.job_id in ids}

    result = _compare.compare(a.results(), b.results(), notes_a=notes_a, alpha=alpha)
    result["a"], result["b"] = _describe(a), _describe(b)
    if as_json:
        click.echo(json.dumps(result, indent=2))
    else:
        click.echo(_compare.render_markdown(result, a.run_id, b.run_id), nl=False)
    if html_path is not None:
        html_path.write_text(_compare.render_html(result, a.run_id, b.run_id), encoding="utf-8")
        click.echo(f"judgeq: wrote {html_path}", err=True)
    if fail_on_regression and result["regression"]["significant"]:
        click.echo("judgeq: regression: " + "; ".join(result["regression"]["why"]), err=True)
        sys.exit(1)


def _describe(source: RunSource) -> dict[str, Any]:
    report = source.report or {}
    return {
        "run_id": source.run_id,
        "where": source.where,
        "rubric": report.get("rubric", {}).get("name")
        or (source.spec.rubric_source if source.spec else None),
        "judge": report.get("judge"),
    }

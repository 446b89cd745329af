"""Run management: ``judgeq runs``, ``cancel``, ``export``, ``compare`` and ``rescore``."""

from __future__ import annotations

import csv
import json
import sys
import time
from pathlib import Path
from typing import Any

import click

from judgeq.errors import ConfigError, StoreError
from judgeq.store.runfolder import EXPORT_FIXED, export_row

from ..runsource import RunSource, open_run
from .options import out_option, redis_option, settings_from


@click.command()
@redis_option
@out_option
@click.option(
    "--limit", type=click.IntRange(min=1), default=50, show_default=True, help="Most recent runs shown."
)
def runs(limit: int, **flags: Any) -> None:
    """List runs: those in Redis and the results folders (``judgeq run`` ones too)."""
    settings = settings_from(**flags)
    rows: dict[str, dict[str, Any]] = {}
    for folder in sorted(Path(settings.results_dir).glob("*/report.json")):
        row = _folder_row(folder.parent)
        if row:
            rows[row["run"]] = row
    try:
        from ..distributed import open_store
        from ..progress import snapshot

        store = open_store(settings)
        for run_id in store.runs(limit=limit):
            spec, snap = store.spec(run_id), snapshot(store, run_id)
            if spec is None or snap is None:
                continue
            cost = store.counters(run_id).get("cost_usd", 0.0)
            rows[run_id] = {
                "run": run_id,
                "where": "redis" + (" + folder" if run_id in rows else ""),
                "state": snap.state,
                "done": f"{snap.done}/{snap.total}",
                "rubric": f"{spec.rubric_source.removeprefix('builtin:')}",
                "judge": _judge(spec.judge_provider, spec.judge_model, spec.council),
                "started": spec.created_at[:19].replace("T", " "),
                "cost": f"${cost:.4f}" if not spec.unpriced_models() else "unknown",
            }
    except (StoreError, ConfigError) as exc:
        click.echo(f"judgeq: Redis not reachable ({exc}); listing results folders only", err=True)
    if not rows:
        click.echo("no runs")
        return
    shown = sorted(rows.values(), key=lambda r: r["started"], reverse=True)[:limit]
    cols = ("run", "where", "state", "done", "rubric", "judge", "started", "cost")
    widths = {c: max(len(c), *(len(str(r[c])) for r in shown)) for c in cols}
    click.echo("  ".join(c.upper().ljust(widths[c]) for c in cols).rstrip())
    for r in shown:
        click.echo("  ".join(str(r[c]).ljust(widths[c]) for c in cols).rstrip())


def _judge(provider: str, model: str, council: list[str] | None = None) -> str:
    first = provider if provider == "lexical" else f"{provider}:{model}"
    return f"{first} +{len(council)}" if council else first


def _folder_row(folder: Path) -> dict[str, Any] | None:
    try:
        report = json.loads((folder / "report.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    c, judge = report.get("counts", {}), report.get("judge", {})
    cost = (report.get("usage") or {}).get("estimated_cost_usd")
    state = "partial" if report.get("partial") else "finished"
    if report.get("rescored_from"):
        state = f"rescored from {report['rescored_from']}"
    return {
        "run": report.get("run_id", folder.name),
        "where": "folder" + (" (archived)" if (folder / "verdicts.jsonl.gz").exists() else ""),
        "state": state,
        "done": f"{c.get('graded', 0) + c.get('null', 0)}/{c.get('total', 0)}",
        "rubric": (report.get("rubric") or {}).get("name", "?"),
        "judge": _judge(judge.get("provider", "?"), judge.get("model", "?"), judge.get("council", [])[1:]),
        "started": str(report.get("started_at", ""))[:19].replace("T", " "),
        "cost": f"${cost:.4f}" if isinstance(cost, (int, float)) else "unknown",
    }


@click.command()
@click.argument("run_id")
@redis_option
@out_option
def cancel(run_id: str, **flags: Any) -> None:
    """Stop a run: its jobs without a result become null 'canceled' (workers drop their queued
    messages without a judge call), Message Batches in flight are canceled, and the report of
    what finished is written."""
    from judgeq.pipeline.stages import cancel_run

    from ..distributed import open_store
    from ..progress import summary_text, write_files

    settings = settings_from(**flags)
    store = open_store(settings)
    if store.spec(run_id) is None:
        raise ConfigError(f"run {run_id!r} is unknown or expired")
    state = store.state(run_id).get("state")
    if store.report(run_id) is not None and state in ("finished", "incomplete", "canceled"):
        raise ConfigError(f"run {run_id} has already ended ({state}): nothing to cancel")
    canceled, report = cancel_run(store, run_id)
    click.echo(
        f"judgeq: run {run_id} canceled: {canceled} job(s) had no result and are null 'canceled'", err=True
    )
    paths = write_files(store, run_id, report, settings.results_dir)
    click.echo(summary_text(report, paths))


@click.command()
@click.argument("run")
@click.option("--format", "fmt", type=click.Choice(["csv", "jsonl"]), default="csv", show_default=True)
@click.option(
    "--output",
    "-o",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="File (default: stdout).",
)
@redis_option
@out_option
def export(run: str, fmt: str, output: Path | None, **flags: Any) -> None:
    """Write one row per job of RUN (a run id, or a results folder) as CSV or JSONL."""
    source = open_run(run, settings_from(**flags))
    stream = output.open("w", newline="", encoding="utf-8") if output else sys.stdout
    try:
        if fmt == "jsonl":
            for r in source.results():
                stream.write(json.dumps(r.to_line(), ensure_ascii=False) + "\n")
        else:
            writer = csv.DictWriter(stream, fieldnames=_columns(source), extrasaction="ignore", restval="")
            writer.writeheader()
            for r in source.results():
                writer.writerow(export_row(r))
    finally:
        if output:
            stream.close()
    if output:
        click.echo(f"judgeq: wrote {output}", err=True)


def _columns(source: RunSource) -> list[str]:
    """The CSV columns: the fixed ones, a score column per dimension, the question and council
    columns when the run has them."""
    cols = list(EXPORT_FIXED)
    spec = source.spec
    try:
        rubric = spec.rubric if spec is not None else None
    except Exception:
        rubric = None
    dims = (
        [d.name for d in rubric.dimensions]
        if rubric is not None
        else list((source.report or {}).get("dimensions", {}))
    )
    cols += [f"score.{d}" for d in dims]
    if (rubric is not None and rubric.retrieval is not None) or (source.report or {}).get("retrieval"):
        cols += ["rank", "hit_at_1", "llm_grade", "total_score"]
    if spec is not None and spec.council:
        cols += [f"judge.{m}" for _, m in spec.judges]
    return cols


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
    from judgeq.pipeline.spec import utcnow
    from judgeq.report.build import build_report, new_aggregator
    from judgeq.report.files import write_report_files
    from judgeq.report.rescore import rescore as rescore_one
    from judgeq.report.rescore import rescored_spec
    from judgeq.rubric.model import parse_weights, read_rubric_text

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
    report = build_report(spec, agg, started_at=now, finished_at=now, wall_s=time.time() - started)
    report["rescored_from"] = source.run_id
    report["judge"]["note"] = f"no judge call: the verdicts of run {source.run_id}, scored again"
    paths = write_report_files(settings.results_dir, report, results(), spec=spec)
    click.echo(f"judgeq: run {spec.run_id}: run {source.run_id} re-scored with no judge call", err=True)
    click.echo(spec.run_id)
    click.echo(summary_text(report, paths))


__all__ = ["cancel", "compare", "export", "rescore", "runs"]

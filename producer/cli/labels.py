"""``judgeq labels export RUN`` and ``judgeq labels import RUN FILE``: people in the loop
(:mod:`judgeq.report.labels`)."""

from __future__ import annotations

import csv
import json
import sys
import time
from pathlib import Path
from typing import Any

import click

from judgeq.errors import ConfigError

from ..runsource import RunSource, open_run
from .options import out_option, redis_option, settings_from

__all__ = ["labels"]


@click.group()
def labels() -> None:
    """Put a run's jobs before people, and bring their labels back (no judge call)."""


def _texts(source: RunSource, ids: set[str]) -> dict[str, dict[str, str]]:
    """The jobs' input and output texts, from the run's jobs file where it is at hand."""
    from judgeq.report.files import jobs_file_texts

    spec = source.spec
    if spec is None or spec.jobs_file in ("", "<stdin>", "<python>"):
        return {}
    return jobs_file_texts(Path(spec.jobs_file), ids)


@labels.command("export")
@click.argument("run")
@click.option(
    "--output",
    "-o",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="The labelling file: .csv, or .jsonl for JSON Lines (default: CSV on stdout).",
)
@click.option(
    "--sample",
    type=click.IntRange(min=0),
    default=50,
    show_default=True,
    help="Jobs drawn at random besides those without a verdict or with a doubted one.",
)
@click.option("--seed", type=int, default=0, show_default=True, help="The random draw's seed.")
@redis_option
@out_option
def export_labels(run: str, output: Path | None, sample: int, seed: int, **flags: Any) -> None:
    """Write RUN's labelling file: every job without a verdict, every job whose verdict the
    run doubts (its judges disagree; a pair's verdict changed with the order), then --sample
    jobs drawn at random; with the texts, each judge's verdict and reasoning, and a label
    column to fill in (then: judgeq labels import RUN FILE)."""
    from judgeq.report.labels import COLUMNS, labelling_rows

    source = open_run(run, settings_from(**flags))
    chosen = labelling_rows(source.results(), sample=sample, seed=seed)
    texts = _texts(source, {row["job_id"] for row in chosen})
    for row in chosen:
        row.update(texts.get(row["job_id"], {}))
    jsonl = output is not None and output.suffix.lower() in (".jsonl", ".json")
    stream = output.open("w", newline="", encoding="utf-8") if output else sys.stdout
    try:
        if jsonl:
            for row in chosen:
                stream.write(json.dumps(row, ensure_ascii=False) + "\n")
        else:
            writer = csv.DictWriter(stream, fieldnames=list(COLUMNS))
            writer.writeheader()
            writer.writerows(chosen)
    finally:
        if output:
            stream.close()
    drawn = sum(1 for row in chosen if row["why"] == "random sample")
    where = f"wrote {output}" if output else "written"
    note = "" if texts or not chosen else " (the jobs file is not here: no texts)"
    click.echo(
        f"judgeq: run {source.run_id}: {len(chosen)} jobs to label ({len(chosen) - drawn} without a "
        f"verdict or with a doubted one, {drawn} drawn at random) {where}{note}",
        err=True,
    )


@labels.command("import")
@click.argument("run")
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@redis_option
@out_option
def import_labels(run: str, file: Path, **flags: Any) -> None:
    """Read FILE's labels (a filled labelling file: job_id and label columns) into RUN and
    score its agreement with them again from the kept verdicts, with no judge call. A row with
    no label is skipped; any problem (a job the run does not have, a label that does not fit
    the rubric) is named by line and nothing is imported."""
    from judgeq.pipeline.job import null_result
    from judgeq.report.build import build_report, new_aggregator
    from judgeq.report.files import write_report_files
    from judgeq.report.labels import apply_labels, read_labels
    from judgeq.runspec import utcnow

    from ..progress import summary_text

    settings = settings_from(**flags)
    source = open_run(run, settings)
    spec, before = source.spec, source.report
    if spec is not None and before is None and source.where == "redis":
        raise ConfigError(f"run {source.run_id} has not finished: import labels once its report is written")
    if spec is None or before is None:
        missing = "specification (run.json)" if spec is None else "report (report.json)"
        raise ConfigError(f"run {source.run_id}: its {missing} is missing: labels cannot be imported")
    if before.get("partial"):
        raise ConfigError(f"run {source.run_id} has not finished: import labels once its report is final")
    try:
        rubric = spec.rubric
    except Exception as exc:
        raise ConfigError(f"run {source.run_id}: its rubric does not read here ({exc})") from None
    given = read_labels(file, rubric, (r.job_id for r in source.results()), source.run_id)
    if not given:
        raise ConfigError(f"{file}: no row has a label: nothing to import")
    changed = sum(1 for r in source.results() if r.job_id in given and given[r.job_id] != r.label)

    agg = new_aggregator(spec)
    seen: set[int] = set()
    for r in apply_labels(source.results(), given):
        seen.add(r.index)
        agg.add(r)
    for index in range(spec.total):  # a job whose result was lost: a null in every figure, as when
        if index not in seen:  # the run was finalized (its report counts it missing too)
            agg.add(
                null_result(spec=spec, index=index, reason="lost", why="no result was stored for this job")
            )
    judge = before.get("judge") or {}
    report = build_report(
        spec,
        agg,
        started_at=str(before.get("started_at") or utcnow()),
        finished_at=str(before.get("finished_at") or utcnow()),
        wall_s=float(before.get("wall_s") or 0.0),
        missing=int((before.get("counts") or {}).get("missing") or 0),
        served=judge.get("served") or [],
        rescored_from=before.get("rescored_from"),
    )
    if judge.get("note"):
        report["judge"]["note"] = judge["note"]
    report["labels"] = {"file": file.name, "imported_at": utcnow(), "given": len(given), "changed": changed}
    folder = Path(source.where) if source.where != "redis" else None
    if folder is not None and folder.name != spec.run_id:
        raise ConfigError(
            f"{folder}: the folder of run {spec.run_id} is named otherwise: name it {spec.run_id} "
            "to import labels into it"
        )
    out_dir = folder.parent if folder is not None else Path(settings.results_dir)
    compressed = folder is not None and (folder / "verdicts.jsonl.gz").exists()
    started = time.time()
    paths = write_report_files(
        out_dir, report, apply_labels(source.results(), given), spec=spec, compress=compressed
    )
    click.echo(
        f"judgeq: run {spec.run_id}: {len(given)} labels imported from {file} ({changed} new or changed), "
        f"agreement scored again with no judge call ({time.time() - started:.1f} s)",
        err=True,
    )
    click.echo(summary_text(report, paths))

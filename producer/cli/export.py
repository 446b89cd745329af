"""``judgeq export RUN``: one row per job, as CSV or JSONL."""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path
from typing import Any

import click

from judgeq.jobs.kinds import KINDS, kind_for
from judgeq.store.runfolder import EXPORT_FIXED, export_row

from ..runsource import RunSource, open_run
from .options import out_option, redis_option, settings_from

__all__ = ["export"]


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
    report = source.report or {}
    for kind in KINDS.values():  # the run's kind's own columns
        if (rubric is not None and kind_for(rubric) is kind) or (kind.section and report.get(kind.section)):
            cols += [c for c in kind.export_columns if c not in cols]
    if spec is not None and spec.council:
        cols += [f"judge.{m}" for _, m in spec.judges]
    return cols

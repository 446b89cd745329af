"""Writing the report files.

Files under ``<out>/<run_id>/``: ``report.json`` (machine-readable), ``report.md`` (a
readable summary with tables: :mod:`judgeq.report.markdown`), ``report.html`` (the same with
plots and a table of jobs, one self-contained page: :mod:`judgeq.report.html`),
``verdicts.jsonl`` (one stored result per line, in input order) and ``run.json`` (the run's
specification, for ``rescore`` and resuming).  Files are written to a temporary name and
renamed, so a reader never sees half a report.
"""

from __future__ import annotations

import gzip
import json
import os
import threading
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from judgeq.grading.result import Result
from judgeq.jobs.kinds import KINDS, texts_of
from judgeq.report.html import MAX_ROWS, render_html
from judgeq.report.markdown import render_markdown
from judgeq.report.model import RunReport
from judgeq.runspec import RunSpec

__all__ = ["Texts", "jobs_file_texts", "write_report_files"]


def _html_has_texts(path: Path, report: dict[str, Any]) -> bool:
    """Whether ``path`` is this very report's page with the jobs' texts in its table."""
    if not path.is_file():
        return False
    with path.open(encoding="utf-8", errors="replace") as f:
        head = f.read(8192)  # the <body> tag is near the top
    return f'<body data-finished="{report.get("finished_at")}" data-texts="yes">' in head


def jobs_file_texts(path: Path, ids: set[str]) -> dict[str, dict[str, str]]:
    """The input and output text of the jobs ``ids`` of a batch file (matched by id; a line that
    is not a job is skipped), for the report's table. ``{}`` when the file is not there."""
    if not path.is_file():
        return {}
    found: dict[str, dict[str, str]] = {}
    with path.open(encoding="utf-8-sig", errors="replace") as f:
        for line in f:
            try:
                obj = json.loads(line)
            except ValueError:
                continue
            if not isinstance(obj, dict) or str(obj.get("id")) not in ids:
                continue
            found[str(obj["id"])] = texts_of(obj)
            if len(found) == len(ids):
                break
    return found


def _atomic_write(path: Path, write: Any, *, gz: bool = False) -> None:
    """Write ``path`` whole or not at all: into a temporary file beside it, renamed over it at
    the end; removed when the writing fails or is interrupted (Ctrl-C left a 28 MB ``.tmp``)."""
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}-{threading.get_ident()}")
    try:
        if gz:
            with gzip.open(tmp, "wt", encoding="utf-8", compresslevel=6) as f:
                write(f)
        else:
            with tmp.open("w", encoding="utf-8") as f:
                write(f)
        tmp.replace(path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


Texts = Callable[[set[str]], Mapping[str, Mapping[str, str]]]
"""``texts(job ids) -> {job id: {"input": ..., "output": ...}}``: the jobs' texts for the HTML
table (read from the batch when it is at hand)."""


def write_report_files(
    out_dir: Path,
    report: dict[str, Any],
    results: Iterable[Result],
    *,
    spec: RunSpec | None = None,
    texts: Texts | None = None,
    compress: bool = False,
) -> dict[str, Path]:
    """Write report.json, report.md, report.html, verdicts.jsonl (``compress``: gzipped, as
    verdicts.jsonl.gz: an archive) and (with ``spec``) run.json into ``out_dir/<run_id>/``.

    The HTML table's input and output texts come from ``texts``, else from the run's batch file
    (``spec.jobs_file``) when it is at hand on this machine. Without texts, a report.html already in
    the folder that shows them (the producer's, before the run was archived) is kept."""
    if texts is None and spec is not None and spec.jobs_file not in ("", "<stdin>", "<python>"):
        batch = Path(spec.jobs_file)
        texts = lambda ids: jobs_file_texts(batch, ids)  # noqa: E731
    # read as the typed model before anything is written (a report a worker of another version
    # stored reads too: what this version does not know is left out of report.md and .html)
    typed = RunReport.read(report)
    run_dir = Path(out_dir) / typed.run_id
    run_dir.mkdir(parents=True, exist_ok=True)
    name = "verdicts.jsonl.gz" if compress else "verdicts.jsonl"
    paths = {
        "report.json": run_dir / "report.json",
        "report.md": run_dir / "report.md",
        "report.html": run_dir / "report.html",
        name: run_dir / name,
    }
    shown: list[Result] = []

    def verdicts(f: Any) -> None:
        for r in results:
            f.write(json.dumps(r.to_line(), ensure_ascii=False, separators=(",", ":")))
            f.write("\n")
            if len(shown) < MAX_ROWS:
                shown.append(r)

    _atomic_write(paths[name], verdicts, gz=compress)
    stale = run_dir / ("verdicts.jsonl" if compress else "verdicts.jsonl.gz")  # an earlier write's copy
    if stale.exists():
        stale.unlink()
    # report.json as stored, key for key: this version's reports serialise the model byte for byte
    # (build_report checks it), and a newer version's keys are kept, not dropped by an older reader
    _atomic_write(paths["report.json"], lambda f: f.write(json.dumps(report, indent=2) + "\n"))
    _atomic_write(paths["report.md"], lambda f: f.write(render_markdown(typed)))
    try:
        kinds = {
            job for kind in KINDS.values() if kind.section for job in kind.shown(report.get(kind.section))
        }
        found = texts({r.job_id for r in shown} | kinds) if texts is not None else {}
    except Exception:  # the batch could not be read: the table shows no texts, nothing else changes
        found = {}
    if found or not _html_has_texts(paths["report.html"], report):
        _atomic_write(paths["report.html"], lambda f: f.write(render_html(report, shown, found)))
    if spec is not None:
        paths["run.json"] = run_dir / "run.json"
        _atomic_write(paths["run.json"], lambda f: f.write(spec.model_dump_json(indent=2) + "\n"))
    return paths

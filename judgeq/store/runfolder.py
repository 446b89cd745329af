"""A run's folder of files, and :class:`Report`, the Python view of a finished run.

``<results>/<run_id>/`` holds ``report.json``, ``report.md``, ``report.html``, ``run.json``
(the run's specification: rubric text, judge, settings; never a secret), and the verdicts,
``verdicts.jsonl`` (or ``verdicts.jsonl.gz`` once archived), one result per line in input
order.  Everything that reads runs after the fact (``report``, ``compare``, ``rescore``,
``export``, ``runs``, the Python API) reads them through here.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TextIO

from judgeq.errors import ConfigError
from judgeq.grading.result import Result
from judgeq.jobs.kinds import KINDS, read_result
from judgeq.report.model import RunReport
from judgeq.runspec import RunSpec

__all__ = [
    "EXPORT_FIXED",
    "VERDICTS",
    "Report",
    "export_row",
    "find_run_folder",
    "iter_results",
    "load_report",
    "read_spec",
    "verdicts_path",
]

VERDICTS = ("verdicts.jsonl", "verdicts.jsonl.gz")


def verdicts_path(folder: Path) -> Path | None:
    """The run folder's verdicts file (plain or archived), or None."""
    for name in VERDICTS:
        if (folder / name).exists():
            return folder / name
    return None


def _open(path: Path) -> TextIO:
    if path.suffix == ".gz":
        return gzip.open(path, "rt", encoding="utf-8")
    return path.open(encoding="utf-8")


def iter_results(path: Path) -> Iterator[Result]:
    """Every result of a verdicts file (plain or gzip), streamed."""
    with _open(path) as f:
        for line in f:
            if line.strip():
                yield read_result(line)


def find_run_folder(ref: str | Path, results_dir: Path) -> Path | None:
    """A run folder from a path (a folder or its ``report.json``) or a run id under
    ``results_dir``; None when there is none."""
    path = Path(ref)
    if path.name == "report.json":
        path = path.parent
    if path.is_dir() and ((path / "report.json").exists() or (path / "run.json").exists()):
        return path
    candidate = Path(results_dir) / str(ref)
    if candidate.is_dir() and ((candidate / "report.json").exists() or (candidate / "run.json").exists()):
        return candidate
    return None


def read_spec(folder: Path) -> RunSpec | None:
    path = folder / "run.json"
    return RunSpec.model_validate_json(path.read_text(encoding="utf-8")) if path.exists() else None


class Report:
    """A finished run: ``to_dict()`` is ``report.json``; :meth:`results` streams its per-job
    results; :meth:`to_pandas` is one row per job (needs pandas).

    Attributes that read well in a notebook: ``run_id``, ``counts``, ``overall``, ``path``
    (the run folder, when the report was written or loaded from one)."""

    def __init__(
        self, data: dict[str, Any], *, folder: Path | None = None, results: list[Result] | None = None
    ) -> None:
        self._data = data
        self.folder = folder
        self._results = results

    @property
    def run_id(self) -> str:
        return str(self._data["run_id"])

    @property
    def counts(self) -> dict[str, Any]:
        return dict(self._data["counts"])

    @property
    def overall(self) -> dict[str, Any]:
        return dict(self._data.get("overall") or {})

    @property
    def path(self) -> Path | None:
        return self.folder

    @property
    def document(self) -> RunReport:
        """``report.json`` as its typed model (``report.document.usage.reply_cache.hits``)."""
        return RunReport.read(self._data)

    def to_dict(self) -> dict[str, Any]:
        """``report.json`` as a dict (a copy)."""
        copy: dict[str, Any] = json.loads(json.dumps(self._data))
        return copy

    def results(self) -> Iterator[Result]:
        """Every job's result, in input order."""
        if self._results is not None:
            yield from self._results
            return
        path = verdicts_path(self.folder) if self.folder is not None else None
        if path is None:
            raise ConfigError(f"run {self.run_id}: no verdicts file to read the results from")
        yield from iter_results(path)

    def to_pandas(self) -> Any:
        """One row per job (``export_row`` columns), as a ``pandas.DataFrame``."""
        try:
            import pandas as pd
        except ImportError:
            raise ConfigError("Report.to_pandas needs pandas: pip install pandas") from None
        return pd.DataFrame([export_row(r) for r in self.results()])

    def __getitem__(self, key: str) -> Any:
        return self._data[key]

    def __repr__(self) -> str:
        c = self._data.get("counts", {})
        return (
            f"<Report {self.run_id}: {c.get('graded')}/{c.get('total')} graded, {c.get('null')} null, "
            f"overall mean {self.overall.get('mean')}>"
        )


def load_report(path: str | Path) -> Report:
    """A report from a run folder or its ``report.json``."""
    folder = Path(path)
    if folder.name == "report.json":
        folder = folder.parent
    report = folder / "report.json"
    if not report.exists():
        raise ConfigError(f"{path}: no report.json there (a run folder holds report.json and verdicts.jsonl)")
    return Report(json.loads(report.read_text(encoding="utf-8")), folder=folder)


EXPORT_FIXED = (
    "index",
    "job_id",
    "kind",
    "model",
    "model_b",
    "status",
    "null_reason",
    "overall",
    "passed",
    "winner",
    "label",
    "flags",
    "grading_latency_ms",
    "attempts",
    "input_tokens",
    "output_tokens",
    "cached",
    "batch",
    "judge_model",
    "rubric_name",
    "rubric_version",
    "notes",
)


_COMMON = frozenset(Result.model_fields)
"""The fields every result has (a fixed column no kind supplies is one of them)."""


def export_row(r: Result) -> dict[str, Any]:
    """One job as a flat row: the fixed columns, then ``score.<dimension>``, then for questions
    ``rank``/``hit_at_1``/``llm_grade``/``total_score`` and for councils ``judge.<model>``."""
    kind = KINDS.get(r.kind)
    own = kind.export(r) if kind is not None else {}
    row: dict[str, Any] = {}
    for key in EXPORT_FIXED:  # every row has these columns (a kind's own, such as a pair's winner,
        # where its kind supplies them: empty in other rows)
        value = own.pop(key) if key in own else getattr(r, key) if key in _COMMON else None
        row[key] = ";".join(value) if isinstance(value, list) else value
    for name, value in r.scores.items():
        row[f"score.{name}"] = value
    row.update(own)
    for model, value in (r.judge_scores or {}).items():
        row[f"judge.{model}"] = value
    return row

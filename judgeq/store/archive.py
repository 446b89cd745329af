"""Archiving a finished run out of the store into its results folder (``JUDGEQ_ARCHIVE``).

The folder gets the report files and the verdicts gzipped (``verdicts.jsonl.gz``); the store
then forgets the run's data and keeps a small marker (state ``archived``, where to), so
``status``, ``report``, ``compare``, ``export`` and ``runs`` find it in the folder.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from judgeq.report.files import write_report_files
from judgeq.store.base import Store

__all__ = ["ENDED", "ArchivingStore", "archive_run"]


class ArchivingStore(Store, Protocol):
    def mark_archived(self, run_id: str, folder: str) -> None:
        """Drop the run's data, keeping a marker that says where it went."""
        ...


ENDED = ("finished", "incomplete", "canceled")


def archive_run(store: ArchivingStore, run_id: str, results_dir: Path) -> Path:
    """Write the run's files (verdicts gzipped) under ``results_dir`` and drop the run from
    the store; the run folder. Only a run that has ended (it has a report) is archived."""
    spec, report = store.spec(run_id), store.report(run_id)
    if spec is None or report is None:
        raise LookupError(f"run {run_id} has no report to archive (unknown, expired or not ended)")
    results = (r for r in store.results(run_id, spec.total) if r is not None)
    paths = write_report_files(results_dir, report, results, spec=spec, compress=True)
    folder = paths["report.json"].parent.resolve()
    store.mark_archived(run_id, str(folder))
    return folder

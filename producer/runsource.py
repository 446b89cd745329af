"""A run to read after the fact, wherever it is: a results folder (a path, or a run id under
the results directory, archived or not) or Redis (a live or recent run)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from judgeq.errors import ConfigError, StoreError
from judgeq.grading.result import Result
from judgeq.runspec import RunSpec
from judgeq.settings import Settings
from judgeq.store.runfolder import find_run_folder, iter_results, read_spec, verdicts_path

__all__ = ["RunSource", "open_run"]


@dataclass(slots=True)
class RunSource:
    run_id: str
    report: dict[str, Any] | None
    spec: RunSpec | None
    results: Callable[[], Iterator[Result]]
    where: str
    """``redis``, or the folder's path."""


def open_run(ref: str, settings: Settings) -> RunSource:
    """The run ``ref`` names: a folder first (path or run id under the results directory),
    else the run in Redis; ConfigError naming both places when it is in neither."""
    folder = find_run_folder(ref, settings.results_dir)
    if folder is not None:
        report_path = folder / "report.json"
        report = json.loads(report_path.read_text(encoding="utf-8")) if report_path.exists() else None
        verdicts = verdicts_path(folder)
        spec = read_spec(folder)
        run_id = (report or {}).get("run_id") or (spec.run_id if spec else folder.name)

        def from_folder() -> Iterator[Result]:
            if verdicts is None:
                raise ConfigError(f"{folder}: no verdicts.jsonl to read the results from")
            yield from iter_results(verdicts)

        return RunSource(run_id, report, spec, from_folder, str(folder))
    from .distributed import open_store

    try:
        store = open_store(settings)
    except StoreError as exc:
        where = Path(settings.results_dir) / ref
        problem = f"run {ref!r}: no results folder {where}, and Redis is unreachable ({exc})"
        raise ConfigError(problem) from None
    spec = store.spec(ref)
    if spec is None and store.state(ref).get("state") == "archived":
        folder_ref = store.state(ref).get("archived_to", "")
        if find_run_folder(folder_ref, settings.results_dir) is None:
            raise ConfigError(
                f"run {ref!r} was archived to {folder_ref} (by a worker; JUDGEQ_ARCHIVE), which is not "
                "reachable here: read it on that machine or from that volume"
            )
        return open_run(folder_ref, settings)
    if spec is None:
        raise ConfigError(
            f"run {ref!r} is unknown: no results folder {Path(settings.results_dir) / ref}, and not in Redis "
            "(expired, or another JUDGEQ_REDIS_URL)"
        )

    def from_redis() -> Iterator[Result]:
        return (r for r in store.results(ref, spec.total) if r is not None)

    return RunSource(ref, store.report(ref), spec, from_redis, "redis")

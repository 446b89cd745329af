"""People in the loop: which of a run's jobs to put before people, and their labels read back.

``judgeq labels export RUN`` writes a labelling file (:func:`labelling_rows`): every job the
judge gave no verdict for, every job whose verdict the run itself doubts (its judges disagree,
or a pair's verdict changed with the order of its outputs), then a uniformly random sample of
the others, each row saying why it is there; the job's texts, the judge's verdict, each
judge's score and its reasoning, and a ``label`` column to fill. ``judgeq labels import RUN
FILE`` reads the filled file back (:func:`read_labels`: every problem named by file, line and
field, nothing applied when there is one) and scores the run's agreement with its labels again
from the kept verdicts: no judge is called.

The random rows are what an unbiased estimate needs (a person's labels on jobs chosen *because*
the judge was unsure are not a sample of the run); the file says which rows those are.
"""

from __future__ import annotations

import csv
import random
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from judgeq.errors import ConfigError
from judgeq.grading.result import Result
from judgeq.jobs.base import label_problem, normal_label
from judgeq.judges.prices import json_object
from judgeq.rubric.model import Rubric

__all__ = [
    "COLUMNS",
    "DOUBTS",
    "MAX_PROBLEMS",
    "RANDOM",
    "apply_labels",
    "labelling_rows",
    "read_labels",
    "why_labelled",
]

COLUMNS = (
    "job_id",
    "why",
    "model",
    "input",
    "output",
    "status",
    "null_reason",
    "overall",
    "passed",
    "winner",
    "judge_scores",
    "reasoning",
    "label",
)
"""The labelling file's columns, in order (``label`` last: the one to fill)."""
DOUBTS = {"judges_disagree": "judges disagree", "position_inconsistent": "verdict changed with the order"}
"""The flags by which a run doubts its own verdict, and how the file says so."""
RANDOM = "random sample"
"""The ``why`` of a row drawn at random (the rows an unbiased estimate may use)."""
MAX_PROBLEMS = 20
"""The problems of a labels file named at most (and how many more there were)."""


def why_labelled(r: Result) -> str | None:
    """Why ``r`` must be put before people whatever the sample: no verdict (and why not), or a
    verdict the run doubts; None for the others."""
    if r.status == "null":
        return f"no verdict: {r.null_reason or 'unknown'}"
    doubts = [DOUBTS[f] for f in r.flags if f in DOUBTS]
    return "; ".join(doubts) if doubts else None


def labelling_rows(
    results: Iterable[Result],
    *,
    sample: int,
    seed: int = 0,
    texts: Mapping[str, Mapping[str, str]] | None = None,
) -> list[dict[str, Any]]:
    """The labelling file's rows: every job :func:`why_labelled` names, in run order, then
    ``sample`` of the others drawn uniformly at random (reservoir sampling: one pass, memory of
    ``sample`` results; ``seed`` makes the draw repeatable), in run order. ``texts``: each job's
    input and output by id (blank when not at hand)."""
    rng = random.Random(seed)
    named: list[tuple[Result, str]] = []
    reservoir: list[Result] = []
    seen = 0
    for r in results:
        why = why_labelled(r)
        if why is not None:
            named.append((r, why))
            continue
        seen += 1
        if len(reservoir) < sample:
            reservoir.append(r)
        else:
            at = rng.randrange(seen)
            if at < sample:
                reservoir[at] = r
    drawn = sorted(reservoir, key=lambda r: r.index)
    return [_row(r, why, texts) for r, why in [*named, *((r, RANDOM) for r in drawn)]]


def _row(r: Result, why: str, texts: Mapping[str, Mapping[str, str]] | None) -> dict[str, Any]:
    text = (texts or {}).get(r.job_id, {})
    verdict = r.model_dump()
    return {
        "job_id": r.job_id,
        "why": why,
        "model": " vs ".join(s for s in (r.model, verdict.get("model_b")) if s),
        "input": text.get("input", ""),
        "output": text.get("output", ""),
        "status": r.status,
        "null_reason": r.null_reason or "",
        "overall": "" if r.overall is None else r.overall,
        "passed": "" if r.passed is None else ("pass" if r.passed else "fail"),
        "winner": verdict.get("winner") or "",
        "judge_scores": "; ".join(f"{m}={v:g}" for m, v in (r.judge_scores or {}).items()),
        "reasoning": r.notes or "",
        "label": "" if r.label is None else (f"{r.label:g}" if isinstance(r.label, float) else r.label),
    }


def _rows(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(line, row)`` of a labels file: JSON Lines (``.jsonl``, ``.json``) or CSV (any other
    name; a row's line is where it begins; blank lines are skipped)."""
    try:
        with path.open(encoding="utf-8-sig", newline="") as f:
            if path.suffix.lower() in (".jsonl", ".json"):
                yield from _json_rows(path, f)
            else:
                yield from _csv_rows(path, f)
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not UTF-8 text (save it as UTF-8, e.g. 'CSV UTF-8')") from None


def _json_rows(path: Path, f: Iterable[str]) -> Iterator[tuple[int, dict[str, Any]]]:
    for line, text in enumerate(f, 1):
        if not text.strip():
            continue
        yield line, json_object(text, f"{path}:{line}", "a job_id and a label")


def _csv_rows(path: Path, f: Iterable[str]) -> Iterator[tuple[int, dict[str, Any]]]:
    reader = csv.reader(f)
    try:
        header = next(reader, None) or []
        missing = [c for c in ("job_id", "label") if c not in header]
        if missing:
            raise ConfigError(
                f"{path}:1: no {' and no '.join(missing)} column (the header of the file "
                "judgeq labels export writes has both)"
            )
        start = reader.line_num + 1
        for row in reader:
            if any(cell.strip() for cell in row):
                yield start, dict(zip(header, row, strict=False))
            start = reader.line_num + 1
    except csv.Error as exc:
        raise ConfigError(f"{path}:{reader.line_num}: not CSV ({exc})") from None


def read_labels(path: Path, rubric: Rubric, job_ids: Iterable[str], run_id: str) -> dict[str, float | str]:
    """The labels a filled labelling file gives, by job id (a blank ``label`` gives none);
    ConfigError naming each problem by file, line and field when any row has one (a job the run
    does not have, a label that is no label or does not fit the rubric, a job given two
    different labels): none is applied then."""
    if not path.is_file():
        raise ConfigError(f"{path}: no such file")
    known = set(job_ids)
    labels: dict[str, float | str] = {}
    where: dict[str, int] = {}
    problems: list[str] = []
    for line, row in _rows(path):
        job = str(row.get("job_id") if row.get("job_id") is not None else "").strip()
        raw = row.get("label")
        if raw is None or (isinstance(raw, str) and not raw.strip()):
            continue  # not labelled (yet)
        if not job:
            problems.append(f"{path}:{line}: job_id: missing")
            continue
        if job not in known:
            problems.append(f"{path}:{line}: job_id: run {run_id} has no job {job!r}")
            continue
        try:
            label = normal_label(raw)
        except ValueError as exc:
            problems.append(f"{path}:{line}: label: {exc}")
            continue
        assert label is not None
        problem = label_problem(rubric, label)
        if problem:
            problems.append(f"{path}:{line}: label: {problem}")
            continue
        if job in labels and labels[job] != label:
            earlier = where[job]
            problems.append(f"{path}:{line}: label: job {job!r} was labelled differently on line {earlier}")
            continue
        labels[job], where[job] = label, line
    if problems:
        more = len(problems) - MAX_PROBLEMS
        shown = problems[:MAX_PROBLEMS] + ([f"... and {more} more"] if more > 0 else [])
        raise ConfigError("no label imported:\n" + "\n".join(shown))
    return labels


def apply_labels(results: Iterable[Result], labels: Mapping[str, float | str]) -> Iterator[Result]:
    """``results`` with the labels given (a job without one keeps its own)."""
    for r in results:
        label = labels.get(r.job_id)
        yield r if label is None or label == r.label else r.model_copy(update={"label": label})

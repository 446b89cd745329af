"""Reading and validating the jobs file (JSONL, one job per line), streaming, before anything
is enqueued. ("Batch" in judgeq means one of the provider's Message Batches, the batch lane;
``report.json`` keeps the key ``batch`` for this file's name, and a few error messages their
wording, which users and scripts match.)

:func:`scan_jobs_file` reads the file once, line by line, and checks every line: size (lines
longer than the limit are skipped without being read into memory), UTF-8, NUL bytes, JSON,
the object's fields and their sizes, and duplicate ids.  Memory stays flat: it keeps the line
numbers of invalid lines, the first errors, and an 8-byte hash of each valid line's id for the
duplicate check (:class:`IdHashes`: in memory up to 2 million lines, then spilled to
partition files in a temporary folder and checked one partition at a time).
:func:`iter_jobs` then reads the file again and yields the valid jobs in order.

A jobs file from standard input is spooled to a temporary file first (:func:`open_jobs_file`), so
both passes see the same bytes.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
import shutil
import sys
import tempfile
from array import array
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from pydantic import ValidationError

from judgeq.errors import JobsFileError
from judgeq.jobs.models import JOB_MODELS, Job, infer_kind
from judgeq.settings import default

__all__ = [
    "MAX_ERRORS_SHOWN",
    "MAX_REJECTED_KEPT",
    "IdHashes",
    "JobCheck",
    "JobsFileLimits",
    "JobsFileScan",
    "iter_jobs",
    "open_jobs_file",
    "parse_line",
    "scan_jobs_file",
    "split_problems",
]

MAX_ERRORS_SHOWN = 20
MAX_REJECTED_KEPT = 10_000


@dataclass(frozen=True, slots=True)
class JobsFileLimits:
    """Size limits (``JUDGEQ_MAX_LINE_BYTES``, ``JUDGEQ_MAX_FIELD_CHARS``)."""

    max_line_bytes: int = default("max_line_bytes")
    max_field_chars: int = default("max_field_chars")


@dataclass(slots=True)
class JobsFileScan:
    """The outcome of validating a jobs file."""

    path: Path
    name: str
    lines: int = 0
    valid: int = 0
    invalid: int = 0
    errors: list[str] = field(default_factory=list)
    rejected: list[dict[str, Any]] = field(default_factory=list)
    invalid_lines: set[int] = field(default_factory=set)
    kinds: Counter[str] = field(default_factory=Counter)
    systems: Counter[str] = field(default_factory=Counter)
    """The valid jobs' systems (their ``model``; a pair's two), by name: whose outputs are graded."""
    fingerprint: str = ""

    def add_error(self, line: int, fld: str, problem: str) -> None:
        if line not in self.invalid_lines:
            self.invalid += 1
            self.invalid_lines.add(line)
            if len(self.rejected) < MAX_REJECTED_KEPT:
                self.rejected.append({"line": line, "field": fld, "reason": problem})
        if len(self.errors) < MAX_ERRORS_SHOWN:
            self.errors.append(f"{self.name}:{line}: {fld}: {problem}")

    def raise_if_invalid(self) -> None:
        """Raise JobsFileError listing the first errors when any line is invalid."""
        if not self.invalid:
            return
        shown = f" (the first {len(self.errors)} are listed)" if self.invalid > len(self.errors) else ""
        raise JobsFileError(
            f"{self.name}: {self.invalid} invalid line(s) of {self.lines}; nothing was enqueued"
            f"{shown}. Fix them, or pass --skip-invalid to grade only the valid lines.",
            errors=list(self.errors),
        )


def _read_line(f: BinaryIO, limit: int) -> tuple[bytes | None, int]:
    """Read one line of at most ``limit`` bytes; (None, size) when longer (rest skipped)."""
    line = f.readline(limit + 1)
    if len(line) <= limit or line.endswith(b"\n"):
        return line, len(line)
    size = len(line)
    while True:  # skip the rest of the over-long line in bounded chunks
        chunk = f.readline(1 << 20)
        size += len(chunk)
        if not chunk or chunk.endswith(b"\n"):
            return None, size


def _decode(raw: bytes, line_no: int) -> str:
    if line_no == 1 and raw.startswith(b"\xef\xbb\xbf"):
        raw = raw[3:]
    return raw.rstrip(b"\r\n").decode("utf-8")


_PLAIN_NAME = re.compile(r"[A-Za-z0-9_.\-]{1,64}")


def _name(part: object) -> str:
    """A field name fit for a one-line message: odd names are JSON-quoted (no newlines or
    terminal escapes reach the user's screen)."""
    text = str(part)
    return text if _PLAIN_NAME.fullmatch(text) else json.dumps(text[:64])


def _field_of(loc: tuple[Any, ...]) -> str:
    return ".".join(_name(p) for p in loc if not str(p).startswith("function-")) or "line"


def _bad_string(obj: Any, limit: int, path: str = "") -> tuple[str, str] | None:
    """The first string (or key) over the size limit or not encodable as UTF-8 (a lone
    surrogate escape such as ``\\ud800``): (field, problem)."""
    if isinstance(obj, str):
        if len(obj) > limit:
            return path or "line", (
                f"{len(obj):,} characters, over the limit of {limit:,} (JUDGEQ_MAX_FIELD_CHARS)"
            )
        try:
            obj.encode("utf-8")
        except UnicodeEncodeError as exc:
            return path or "line", f"contains an unpaired surrogate escape at character {exc.start + 1}"
        return None
    if isinstance(obj, dict):
        for k, v in obj.items():
            here = f"{path}.{_name(k)}" if path else _name(k)
            hit = _bad_string(k, limit, here) or _bad_string(v, limit, here)
            if hit:
                return hit
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            hit = _bad_string(v, limit, f"{path}.{i}")
            if hit:
                return hit
    return None


def _may_hold_bad_string(text: str, limits: JobsFileLimits) -> bool:
    return len(text) > limits.max_field_chars or "\\u" in text


def parse_line(text: str, limits: JobsFileLimits) -> tuple[Job | None, str, str]:
    """Parse one decoded line: (job, "", "") or (None, field, problem)."""
    if "\x00" in text:
        return None, "line", "contains a NUL byte"
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as exc:
        return None, "line", f"invalid JSON: {exc.msg} (column {exc.colno})"
    except RecursionError:
        return None, "line", "invalid JSON: nested too deeply"
    except ValueError as exc:  # e.g. an integer of more than 4,300 digits
        return None, "line", f"invalid JSON: {exc}"
    if not isinstance(obj, dict):
        return (
            None,
            "line",
            f"expected a JSON object, got {type(obj).__name__ if obj is not None else 'null'}",
        )
    kind = infer_kind(obj)
    model = JOB_MODELS.get(kind)
    if model is None:
        *most, last = (repr(k) for k in JOB_MODELS)
        return None, "kind", f"unknown kind {kind!r} (use {', '.join(most)} or {last})"
    # only a line longer than the limit can hold a string over it, and a lone surrogate can
    # only come from a \\u escape: most lines skip the walk through every string
    bad = _bad_string(obj, limits.max_field_chars) if _may_hold_bad_string(text, limits) else None
    if bad:
        return None, bad[0], bad[1]
    try:
        job = model.model_validate(obj)
    except ValidationError as exc:
        err = exc.errors()[0]
        msg = err["msg"].removeprefix("Value error, ")
        fld = _field_of(err["loc"])
        if err["type"] == "missing":
            msg = f"required for a {kind} job"
        elif err["type"] == "extra_forbidden":
            msg = f"unknown field for a {kind} job"
        elif fld == "line" and ":" in msg:
            fld, msg = (p.strip() for p in msg.split(":", 1))
        return None, fld, msg
    try:  # what the pipeline stores must serialize: catches deep nesting the checks above miss
        job.model_dump_json()
    except (ValueError, RecursionError) as exc:
        return None, "line", f"cannot be stored: {str(exc).splitlines()[0][:200]}"
    return job, "", ""


def _id_hash(job_id: str) -> int:
    return int.from_bytes(
        hashlib.blake2b(job_id.encode("utf-8", "surrogatepass"), digest_size=8).digest(), "big"
    )


def _lines(path: Path, limits: JobsFileLimits) -> Iterator[tuple[int, str | None, str]]:
    """(line number, decoded text or None, problem) for every line of the file."""
    with path.open("rb") as f:
        line_no = 0
        while True:
            raw, size = _read_line(f, limits.max_line_bytes)
            if raw is None:
                line_no += 1
                yield (
                    line_no,
                    None,
                    (
                        f"line is {size:,} bytes, over the limit of {limits.max_line_bytes:,} "
                        "(JUDGEQ_MAX_LINE_BYTES)"
                    ),
                )
                continue
            if not raw:
                return
            line_no += 1
            try:
                yield line_no, _decode(raw, line_no), ""
            except UnicodeDecodeError as exc:
                yield line_no, None, f"not valid UTF-8 (byte {exc.start + 1} of the line)"


def split_problems(fld: str, problem: str) -> list[tuple[str, str]]:
    """A line's problems, one each: a conversation states all of its own at once, one
    ``field: problem`` per line of the message."""
    if "\n" not in problem:
        return [(fld, problem)]
    out: list[tuple[str, str]] = []
    for line in problem.splitlines():
        head, sep, rest = line.partition(": ")
        out.append((head, rest) if sep and " " not in head else (fld, line))
    return out


JobCheck = Callable[[Job], "tuple[str, str] | None"]
"""A check of a parsed job against the run (e.g. its label against the rubric's scale):
``(field, problem)``, or None when the job is fine."""


def scan_jobs_file(
    path: Path, name: str, limits: JobsFileLimits | None = None, check: JobCheck | None = None
) -> JobsFileScan:
    """Validate every line of a jobs file (one streaming pass plus a duplicate check);
    ``check`` adds the run's own checks of each job."""
    limits = limits or JobsFileLimits()
    scan = JobsFileScan(path=path, name=name)
    hashes = IdHashes()
    digest = hashlib.blake2b(digest_size=16)
    for line_no, text, problem in _lines(path, limits):
        scan.lines = line_no
        digest.update(b"\x00" if text is None else text.strip().encode("utf-8", "surrogatepass") + b"\n")
        if text is None:
            scan.add_error(line_no, "line", problem)
            continue
        if not text.strip():
            continue
        job, fld, problem = parse_line(text, limits)
        if job is None:
            for where, what in split_problems(fld, problem):
                scan.add_error(line_no, where, what)
            continue
        checked = check(job) if check is not None else None
        if checked is not None:
            scan.add_error(line_no, *checked)
            continue
        scan.valid += 1
        scan.kinds[job.kind] += 1
        scan.systems.update(job.systems())
        hashes.add(_id_hash(job.id))
    scan.fingerprint = digest.hexdigest()
    _check_duplicates(scan, hashes, limits)
    if scan.valid == 0 and scan.invalid == 0:
        raise JobsFileError(f"{name}: the batch is empty (no job lines)")
    return scan


class IdHashes:
    """The 8-byte id hashes of a jobs file's valid lines, and which occur more than once.

    Up to :attr:`spill_at` hashes stay in memory; past that, each full chunk is split by the
    hash's top bits into :attr:`parts` files of a temporary folder, and the duplicates are
    found one partition at a time: the memory is bounded whatever the file's size."""

    spill_at = 1 << 21
    parts = 64

    def __init__(self) -> None:
        self.mem = array("Q")
        self._folder: tempfile.TemporaryDirectory[str] | None = None
        self._files: list[BinaryIO] = []

    def add(self, value: int) -> None:
        self.mem.append(value)
        if len(self.mem) >= self.spill_at:
            self._spill()

    def _spill(self) -> None:
        import numpy as np

        if self._folder is None:
            self._folder = tempfile.TemporaryDirectory(prefix="judgeq-ids-")
            self._files = [(Path(self._folder.name) / str(p)).open("wb") for p in range(self.parts)]
        values = np.frombuffer(self.mem, dtype=np.uint64)
        shift = np.uint64(64 - (self.parts - 1).bit_length())
        part = values >> shift
        for p, f in enumerate(self._files):
            values[part == p].tofile(f)
        self.mem = array("Q")

    def duplicates(self) -> set[int]:
        """The hashes seen more than once (then the temporary folder is gone)."""
        if self._folder is None:
            return _repeated(self.mem)
        import numpy as np

        try:
            self._spill()
            found: set[int] = set()
            for f in self._files:
                f.close()
                found |= _repeated(np.fromfile(f.name, dtype=np.uint64))
            return found
        finally:
            self.close()

    def close(self) -> None:
        for f in self._files:
            f.close()
        if self._folder is not None:
            self._folder.cleanup()
            self._folder = None


def _repeated(values: Any) -> set[int]:
    """The values of an array('Q') or a uint64 array that occur more than once."""
    import numpy as np

    ordered = np.sort(np.frombuffer(values, dtype=np.uint64) if isinstance(values, array) else values)
    return {int(v) for v in ordered[1:][ordered[1:] == ordered[:-1]]}


def _check_duplicates(scan: JobsFileScan, hashes: IdHashes, limits: JobsFileLimits) -> None:
    dup = hashes.duplicates()
    if not dup:
        return
    first_seen: dict[str, int] = {}
    for line_no, text, _ in _lines(scan.path, limits):
        if text is None or line_no in scan.invalid_lines or not text.strip():
            continue
        job, _, _ = parse_line(text, limits)
        if job is None or _id_hash(job.id) not in dup:
            continue
        if job.id in first_seen:
            scan.valid -= 1
            scan.kinds[job.kind] -= 1
            scan.systems.subtract(job.systems())
            scan.add_error(line_no, "id", f"duplicate id {job.id!r} (first on line {first_seen[job.id]})")
        else:
            first_seen[job.id] = line_no


def iter_jobs(scan: JobsFileScan, limits: JobsFileLimits | None = None) -> Iterator[tuple[int, Job]]:
    """Yield (index, job) for every valid line, in input order (index counts valid jobs)."""
    limits = limits or JobsFileLimits()
    index = 0
    for line_no, text, _ in _lines(scan.path, limits):
        if text is None or line_no in scan.invalid_lines or not text.strip():
            continue
        job, _, _ = parse_line(text, limits)
        if job is None:  # pragma: no cover - the file changed between the passes
            raise JobsFileError(f"{scan.name}:{line_no}: the file changed while it was being read")
        yield index, job
        index += 1


@contextlib.contextmanager
def open_jobs_file(ref: str) -> Iterator[tuple[Path, str]]:
    """Yield (path, display name) for a jobs file reference; ``-`` spools stdin to a temp file."""
    if ref == "-":
        with tempfile.NamedTemporaryFile(prefix="judgeq-stdin-", suffix=".jsonl") as tmp:
            shutil.copyfileobj(sys.stdin.buffer, tmp, 1 << 20)
            tmp.flush()
            yield Path(tmp.name), "<stdin>"
        return
    path = Path(ref).expanduser()
    if not path.exists():
        raise JobsFileError(f"{ref}: batch file not found")
    if path.is_dir():
        raise JobsFileError(f"{ref}: is a directory, not a JSONL batch file")
    try:
        with path.open("rb"):
            pass
    except OSError as exc:
        raise JobsFileError(f"{ref}: cannot read: {exc.strerror}") from None
    yield path, ref

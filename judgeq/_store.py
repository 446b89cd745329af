"""The result store seam: a :class:`Store` protocol, and :class:`MemoryStore` for embedded
runs and tests.  The Redis implementation lives at the edge (:mod:`judgeq.redis_store`);
both pass the same contract tests.

Per run the store holds the :class:`~judgeq.RunSpec`, the job payloads not yet graded, one
result per job index (written once: a second write of the same index is ignored and not
counted), live counters, the run's state and, once reduced, its report.
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from collections.abc import Iterable, Iterator
from typing import Any, Protocol

from ._aggregate import estimate_cost
from ._result import Result
from ._run import RunSpec


def result_cost(result: Result) -> float:
    """USD a stored result spent on the judge (0 for a cached reply or an unknown price)."""
    if result.cached or not (result.input_tokens or result.output_tokens):
        return 0.0
    return (
        estimate_cost(
            result.judge_model,
            result.input_tokens,
            result.output_tokens,
            result.cache_read_input_tokens,
            result.cache_creation_input_tokens,
        )
        or 0.0
    )


def cost_pause_reason(spent: float, limit: float) -> str:
    return (
        f"max_cost: ${spent:.4f} spent of the ${limit:.4f} allowed "
        "(raise it with: judgeq resume RUN --max-cost USD)"
    )


def live_increments(result: Result) -> dict[str, float]:
    """The live counters a stored result adds (for progress lines, ``status`` and the cost
    limit: ``cost_usd``)."""
    inc: dict[str, float] = {}
    cost = result_cost(result)
    if cost:
        inc["cost_usd"] = cost
    if result.status == "graded":
        inc["graded"] = 1
        if result.passed:
            inc["passed"] = 1
    else:
        inc[f"null:{result.null_reason}"] = 1
    if result.kind == "question":
        inc["questions"] = 1
        if result.rank is not None:
            inc["rr_sum"] = 1.0 / result.rank
            if result.rank == 1:
                inc["hit1"] = 1
        if result.total_score is not None and result.total_score >= 7.0:
            inc["pass7"] = 1
    return inc


class Store(Protocol):
    """Where runs, job payloads, results and reports live."""

    def register(self, spec: RunSpec) -> None: ...
    def spec(self, run_id: str) -> RunSpec | None: ...
    def put_jobs(self, run_id: str, jobs: Iterable[tuple[int, str]]) -> None: ...
    def job(self, run_id: str, index: int) -> str | None: ...
    def missing(self, run_id: str, indices: list[int]) -> list[int]: ...
    def has_result(self, run_id: str, index: int) -> bool: ...
    def store_result(self, run_id: str, result: Result) -> int | None:
        """Store once; the run's new done-count when this write counted, None if a duplicate."""
        ...

    def results(self, run_id: str, total: int) -> Iterator[Result | None]:
        """Results in index order, None where a job has none yet (streamed in chunks)."""
        ...

    def counters(self, run_id: str) -> dict[str, float]: ...
    def pending_indices(self, run_id: str) -> list[int]:
        """Indices of the jobs sent and without a result yet, in order."""
        ...

    def note_systemic(self, run_id: str) -> int:
        """Count one more systemic judge failure in a row; the streak so far. Storing any
        result resets the streak."""
        ...

    def pause(self, run_id: str, reason: str) -> bool:
        """Pause a running run with a one-line reason; False if it was not running."""
        ...

    def resume(self, run_id: str) -> bool:
        """Un-pause a paused run (streak reset); False if it was not paused."""
        ...

    def claim_reducer(self, run_id: str) -> bool: ...
    def release_reducer(self, run_id: str) -> None: ...
    def set_state(self, run_id: str, **fields: Any) -> None: ...
    def state(self, run_id: str) -> dict[str, str]: ...
    def save_report(self, run_id: str, report: dict[str, Any]) -> None: ...
    def report(self, run_id: str) -> dict[str, Any] | None: ...


class MemoryStore:
    """A thread-safe in-process :class:`Store`."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._specs: dict[str, str] = {}
        self._jobs: dict[str, dict[int, str]] = {}
        self._results: dict[str, dict[int, str]] = {}
        self._counters: dict[str, Counter[str]] = {}
        self._reducer: set[str] = set()
        self._state: dict[str, dict[str, str]] = {}
        self._reports: dict[str, str] = {}

    def register(self, spec: RunSpec) -> None:
        with self._lock:
            self._specs[spec.run_id] = spec.model_dump_json()
            self._jobs.setdefault(spec.run_id, {})
            self._results.setdefault(spec.run_id, {})
            self._counters.setdefault(spec.run_id, Counter())
            self._state.setdefault(spec.run_id, {})

    def spec(self, run_id: str) -> RunSpec | None:
        raw = self._specs.get(run_id)
        return RunSpec.model_validate_json(raw) if raw else None

    def put_jobs(self, run_id: str, jobs: Iterable[tuple[int, str]]) -> None:
        with self._lock:
            self._jobs.setdefault(run_id, {}).update(jobs)

    def job(self, run_id: str, index: int) -> str | None:
        return self._jobs.get(run_id, {}).get(index)

    def missing(self, run_id: str, indices: list[int]) -> list[int]:
        done = self._results.get(run_id, {})
        return [i for i in indices if i not in done]

    def has_result(self, run_id: str, index: int) -> bool:
        return index in self._results.get(run_id, {})

    def store_result(self, run_id: str, result: Result) -> int | None:
        payload = result.model_dump_json()
        with self._lock:
            results = self._results.setdefault(run_id, {})
            if result.index in results:
                return None
            results[result.index] = payload
            self._jobs.get(run_id, {}).pop(result.index, None)
            counters = self._counters.setdefault(run_id, Counter())
            for key, inc in live_increments(result).items():
                counters[key] += inc  # type: ignore[assignment]
            counters["done"] += 1
            state = self._state.setdefault(run_id, {})
            state.pop("systemic_streak", None)
            limit = float(state.get("max_cost_usd") or 0)
            if limit and counters["cost_usd"] >= limit and state.get("state") == "running":
                state.update(state="paused", pause_reason=cost_pause_reason(counters["cost_usd"], limit))
            return int(counters["done"])

    def results(self, run_id: str, total: int) -> Iterator[Result | None]:
        results = self._results.get(run_id, {})
        for i in range(total):
            raw = results.get(i)
            yield Result.model_validate_json(raw) if raw else None

    def counters(self, run_id: str) -> dict[str, float]:
        with self._lock:
            return dict(self._counters.get(run_id, {}))

    def pending_indices(self, run_id: str) -> list[int]:
        return sorted(self._jobs.get(run_id, {}))

    def note_systemic(self, run_id: str) -> int:
        with self._lock:
            state = self._state.setdefault(run_id, {})
            state["systemic_streak"] = str(int(state.get("systemic_streak", "0")) + 1)
            return int(state["systemic_streak"])

    def pause(self, run_id: str, reason: str) -> bool:
        with self._lock:
            state = self._state.setdefault(run_id, {})
            if state.get("state") != "running":
                return False
            state.update(state="paused", pause_reason=reason)
            return True

    def resume(self, run_id: str) -> bool:
        with self._lock:
            state = self._state.setdefault(run_id, {})
            if state.get("state") != "paused":
                return False
            state.update(state="running", pause_reason="", systemic_streak="0")
            return True

    def claim_reducer(self, run_id: str) -> bool:
        with self._lock:
            if run_id in self._reducer:
                return False
            self._reducer.add(run_id)
            return True

    def release_reducer(self, run_id: str) -> None:
        with self._lock:
            self._reducer.discard(run_id)

    def set_state(self, run_id: str, **fields: Any) -> None:
        with self._lock:
            self._state.setdefault(run_id, {}).update({k: str(v) for k, v in fields.items()})

    def state(self, run_id: str) -> dict[str, str]:
        return dict(self._state.get(run_id, {}))

    def save_report(self, run_id: str, report: dict[str, Any]) -> None:
        with self._lock:
            self._reports[run_id] = json.dumps(report)

    def report(self, run_id: str) -> dict[str, Any] | None:
        raw = self._reports.get(run_id)
        return json.loads(raw) if raw else None

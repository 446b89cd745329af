"""The result store seam: a :class:`Store` protocol, and :class:`MemoryStore` for embedded
runs and tests.  The Redis implementation lives at the edge (:mod:`judgeq.store.redis`);
both pass the same contract tests.

Per run the store holds the :class:`~judgeq.RunSpec`, the job payloads not yet graded, one
result per job index (written once: a second write of the same index is ignored and not
counted), live counters, the run's state and, once reduced, its report.
"""

from __future__ import annotations

import json
import secrets
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Protocol

from judgeq.grading.result import Result
from judgeq.jobs.kinds import KINDS, read_result
from judgeq.judges.prices import Prices
from judgeq.report.aggregate import cost_breakdown
from judgeq.runspec import RunSpec
from judgeq.telemetry import RunChanged, emit

__all__ = [
    "IN_FLIGHT",
    "MemoryStore",
    "Store",
    "cost_pause_reason",
    "live_increments",
    "result_cost",
    "result_costs",
]


def result_cost(result: Result, prices: Prices | None = None) -> float:
    """USD a stored result spent on the judge, at ``prices`` (the run's:
    :meth:`RunSpec.price_book`; default: the shipped ones), the batch lane's discount taken
    off; 0 for a cached reply, and for a model without a price (whose cost is unknown:
    reports and ``status`` say so, and a run with a cost limit needs every judge priced)."""
    return sum(result_costs(result, prices).values())


def result_costs(result: Result, prices: Prices | None = None) -> dict[str, float]:
    """:func:`result_cost` per judge model (a council's judges each at its own price); a model
    without a price is left out."""
    if result.cached or not (result.input_tokens or result.output_tokens):
        return {}
    if result.judge_usage:  # a council: each judge's tokens at its own price
        costs = {}
        for model, used in result.judge_usage.items():
            part = cost_breakdown(model, *used[:4], batch=result.batch, prices=prices)
            if part:
                costs[model] = part["total"]
        return costs
    parts = cost_breakdown(
        result.judge_model,
        result.input_tokens,
        result.output_tokens,
        result.cache_read_input_tokens,
        result.cache_creation_input_tokens,
        batch=result.batch,
        prices=prices,
    )
    return {result.judge_model: parts["total"]} if parts else {}


IN_FLIGHT = ("creating", "in_progress")
"""States of a Message Batch in flight: it holds its cost reservation."""


def cost_pause_reason(spent: float, limit: float) -> str:
    return (
        f"max_cost: ${spent:.4f} spent of the ${limit:.4f} allowed "
        "(raise it with: judgeq resume RUN --max-cost USD)"
    )


def live_increments(result: Result, prices: Prices | None = None) -> dict[str, float]:
    """The live counters a stored result adds (for progress lines, ``status`` and the cost
    limit: ``cost_usd``, at the run's ``prices``)."""
    inc: dict[str, float] = {}
    cost = result_cost(result, prices)
    if cost:
        inc["cost_usd"] = cost
    if result.status == "graded":
        inc["graded"] = 1
        if result.overall is not None:
            inc["overall_sum"] = result.overall
        if result.passed:
            inc["passed"] = 1
    else:
        inc[f"null:{result.null_reason}"] = 1
    for served in result._served:  # provenance of its answered calls (counted once, with it)
        inc[f"served:{served}"] = inc.get(f"served:{served}", 0) + 1
    if result._served:  # the judge answered (not the cache): the store notes when
        inc["answered"] = 1
    kind = KINDS.get(result.kind)
    if kind is not None:
        inc.update(kind.counters(result))
    return inc


class Store(Protocol):
    """Where runs, job payloads, results and reports live.

    Its clock (:meth:`now`) is the one clock of every time that one process writes and another
    compares with its own (a buffered job's age, a batch's ``creating`` timeout, stall
    detection, the producer's heartbeat), so machines whose clocks disagree decide alike."""

    def now(self) -> float:
        """The store's clock, epoch seconds (Redis: its ``TIME``; shared by every process)."""
        ...

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

    def fetch_jobs(self, run_id: str, indices: list[int]) -> list[tuple[bool, str | None]]:
        """For each job of a message: whether it has a result, and its payload (one read)."""
        ...

    def store_results(self, run_id: str, results: list[Result]) -> list[int | None]:
        """:meth:`store_result` for the results of a message, in one write."""
        ...

    def counters(self, run_id: str) -> dict[str, float]: ...
    def last_progress(self, run_id: str) -> float | None:
        """When a result was last stored for the run (:meth:`now` of that write), if ever."""
        ...

    def pending_indices(self, run_id: str) -> list[int]:
        """Indices of the jobs sent and without a result yet, in order."""
        ...

    def note_systemic(self, run_id: str) -> int:
        """Count one more systemic judge failure in a row; the streak so far. Storing any
        result resets the streak."""
        ...

    def wait_for_judge(self, run_id: str, reason: str) -> bool:
        """The run's judge answers no one: note since when (``waiting_since`` on :meth:`now`, kept
        if already set) and why (``waiting_reason``) in its state; True when the wait began now.
        Storing a result the judge answered (:func:`live_increments`' ``answered``) ends it."""
        ...

    def pause(self, run_id: str, reason: str) -> bool:
        """Pause a running run with a one-line reason; False if it was not running."""
        ...

    def resume(self, run_id: str) -> bool:
        """Un-pause a paused run (streak reset); False if it was not paused."""
        ...

    def claim_reducer(self, run_id: str) -> bool: ...
    def release_reducer(self, run_id: str) -> None: ...
    def claim(self, run_id: str, what: str, seconds: float) -> str | None:
        """A lock named ``what`` shared by every worker, held for ``seconds`` (or until
        :meth:`release` with the token returned); None when someone holds it."""
        ...

    def release(self, run_id: str, what: str, token: str | None = None) -> None:
        """Release a lock (only if ``token`` still holds it, when given)."""
        ...

    def renew(self, run_id: str, what: str, token: str, seconds: float) -> bool:
        """Hold the lock ``token`` holds for ``seconds`` more; False if it lapsed or was taken."""
        ...

    # -- the Message Batches lane (see judgeq.pipeline.batch_lane) --------------------------------
    # Each job in the lane has a value: '' (buffered) or the token of the batch it is in.
    # Each batch has a record (JSON) and a state; states change only by compare-and-set.
    def lane_add(self, run_id: str, index: int, now: float) -> bool:
        """Put job ``index`` in the lane's buffer (to be sent in the next Message Batch);
        False when it has a result or is already in the lane (buffered or in a batch)."""
        ...

    def lane_take(self, run_id: str, n: int, token: str, now: float) -> list[int]:
        """Move up to ``n`` buffered jobs, oldest first, into a new batch ``token``, and create
        its record (state ``creating``, ``created`` = ``now``) with its jobs, in one step:
        jobs are never in a batch that has no record."""
        ...

    def lane_return(self, run_id: str, indices: list[int], now: float, token: str) -> int:
        """Put the jobs of batch ``token`` back in the buffer: only those still in that batch
        (not taken by another since) and without a result (those leave the lane); how many
        went back."""
        ...

    def lane_done(self, run_id: str, indices: list[int]) -> None:
        """The jobs have left the lane (their results are stored)."""
        ...

    def lane_counts(self, run_id: str) -> tuple[int, int, float | None]:
        """(jobs buffered, jobs in the lane: buffered or in a batch, when the oldest buffered
        job was buffered)."""
        ...

    def lane_set_batch(self, run_id: str, record: dict[str, Any], expect: tuple[str, ...]) -> bool:
        """Write a batch record (``record["token"]`` names it, ``record["state"]`` its new
        state) only if its current state is one of ``expect``; False (nothing written) if not.
        A batch whose new state is not one of :data:`IN_FLIGHT` gives back its cost
        reservation (:meth:`lane_reserve`) in the same step."""
        ...

    def lane_reserve(self, run_id: str, token: str, usd: float) -> bool:
        """Reserve ``usd`` for batch ``token``, still ``creating``, against the run's cost limit
        (``max_cost_usd`` in its state), atomically: only when what its results spent
        (``cost_usd``), every reservation held and this one stay within the limit (no limit:
        always). False, nothing reserved, when it would pass the limit or the batch is no longer
        ``creating``. Reservations live in the store (a dead worker's stay held until its batch
        is given up or ingested)."""
        ...

    def lane_reserved(self, run_id: str) -> float:
        """USD the run's batches in flight hold reserved."""
        ...

    def lane_batches(self, run_id: str) -> list[dict[str, Any]]:
        """Every batch record of the run, oldest first."""
        ...

    def lane_batch(self, run_id: str, token: str) -> dict[str, Any] | None: ...
    def lane_batch_indices(self, run_id: str, token: str) -> list[int]:
        """The jobs still in batch ``token``: taken into it and neither given back to the
        buffer (a batch split for size returns what did not fit), taken into another batch,
        nor done with (:meth:`lane_done`)."""
        ...

    def lane_runs(self) -> list[str]:
        """Runs of the batch lane that may have buffered jobs or batches in flight."""
        ...

    def lane_track(self, run_id: str, active: bool) -> None:
        """Add a run to :meth:`lane_runs` (``active``) or take it off."""
        ...

    def set_state(self, run_id: str, **fields: Any) -> None: ...
    def state(self, run_id: str) -> dict[str, str]: ...
    def save_report(self, run_id: str, report: dict[str, Any]) -> None: ...
    def report(self, run_id: str) -> dict[str, Any] | None: ...


class MemoryStore:
    """A thread-safe in-process :class:`Store`; ``clock`` is its :meth:`now` (injectable)."""

    def __init__(self, *, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._specs: dict[str, str] = {}
        self._jobs: dict[str, dict[int, str]] = {}
        self._results: dict[str, dict[int, str]] = {}
        self._counters: dict[str, Counter[str]] = {}
        self._reducer: set[str] = set()
        self._state: dict[str, dict[str, str]] = {}
        self._reports: dict[str, str] = {}
        self._claims: dict[tuple[str, str], tuple[str, float]] = {}
        self._lane: dict[str, dict[int, str]] = {}
        self._buffer: dict[str, deque[tuple[int, float]]] = {}
        self._batches: dict[str, dict[str, str]] = {}
        self._batch_indices: dict[tuple[str, str], list[int]] = {}
        self._lane_runs: set[str] = set()
        self._last_done: dict[str, float] = {}
        self._prices: dict[str, Prices] = {}
        self._reserved: dict[str, dict[str, float]] = {}

    def now(self) -> float:
        return self._clock()

    def register(self, spec: RunSpec) -> None:
        with self._lock:
            self._specs[spec.run_id] = spec.model_dump_json()
            self._prices[spec.run_id] = spec.price_book()
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
            for key, inc in live_increments(result, self._prices.get(run_id)).items():
                counters[key] += inc  # type: ignore[assignment]
            counters["done"] += 1
            self._last_done[run_id] = self._clock()
            state = self._state.setdefault(run_id, {})
            state.pop("systemic_streak", None)
            if result._served:  # the judge answered: it is not down (see wait_for_judge)
                state["last_answer_at"] = repr(self._last_done[run_id])
                state.pop("waiting_since", None)
                state.pop("waiting_reason", None)
            limit = float(state.get("max_cost_usd") or 0)
            paused = limit and counters["cost_usd"] >= limit and state.get("state") == "running"
            if paused:
                state.update(state="paused", pause_reason=cost_pause_reason(counters["cost_usd"], limit))
            done = int(counters["done"])
        if paused:
            emit(RunChanged(run_id, "paused", state["pause_reason"]))
        return done

    def fetch_jobs(self, run_id: str, indices: list[int]) -> list[tuple[bool, str | None]]:
        return [(self.has_result(run_id, i), self.job(run_id, i)) for i in indices]

    def store_results(self, run_id: str, results: list[Result]) -> list[int | None]:
        return [self.store_result(run_id, r) for r in results]

    def results(self, run_id: str, total: int) -> Iterator[Result | None]:
        results = self._results.get(run_id, {})
        for i in range(total):
            raw = results.get(i)
            yield read_result(raw) if raw else None

    def counters(self, run_id: str) -> dict[str, float]:
        with self._lock:
            return dict(self._counters.get(run_id, {}))

    def last_progress(self, run_id: str) -> float | None:
        return self._last_done.get(run_id)

    def pending_indices(self, run_id: str) -> list[int]:
        return sorted(self._jobs.get(run_id, {}))

    def note_systemic(self, run_id: str) -> int:
        with self._lock:
            state = self._state.setdefault(run_id, {})
            state["systemic_streak"] = str(int(state.get("systemic_streak", "0")) + 1)
            return int(state["systemic_streak"])

    def wait_for_judge(self, run_id: str, reason: str) -> bool:
        with self._lock:
            state = self._state.setdefault(run_id, {})
            began = "waiting_since" not in state
            if began:
                state["waiting_since"] = repr(self._clock())
            state["waiting_reason"] = reason
        if began:
            emit(RunChanged(run_id, "waiting", reason))
        return began

    def pause(self, run_id: str, reason: str) -> bool:
        with self._lock:
            state = self._state.setdefault(run_id, {})
            if state.get("state") != "running":
                return False
            state.update(state="paused", pause_reason=reason, systemic_streak="0")
            state.pop("waiting_since", None)
            state.pop("waiting_reason", None)
        emit(RunChanged(run_id, "paused", reason))
        return True

    def resume(self, run_id: str) -> bool:
        with self._lock:
            state = self._state.setdefault(run_id, {})
            if state.get("state") != "paused":
                return False
            state.update(state="running", pause_reason="", systemic_streak="0")
            state.pop("waiting_since", None)
            state.pop("waiting_reason", None)
        emit(RunChanged(run_id, "resumed"))
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

    def claim(self, run_id: str, what: str, seconds: float) -> str | None:
        now = time.monotonic()
        with self._lock:
            held = self._claims.get((run_id, what))
            if held is not None and held[1] > now:
                return None
            token = secrets.token_hex(8)
            self._claims[(run_id, what)] = (token, now + max(1.0, seconds))
            return token

    def release(self, run_id: str, what: str, token: str | None = None) -> None:
        with self._lock:
            held = self._claims.get((run_id, what))
            if held is not None and (token is None or held[0] == token):
                del self._claims[(run_id, what)]

    def renew(self, run_id: str, what: str, token: str, seconds: float) -> bool:
        now = time.monotonic()
        with self._lock:
            held = self._claims.get((run_id, what))
            if held is None or held[0] != token or held[1] <= now:
                return False
            self._claims[(run_id, what)] = (token, now + max(1.0, seconds))
            return True

    def lane_add(self, run_id: str, index: int, now: float) -> bool:
        with self._lock:
            lane = self._lane.setdefault(run_id, {})
            if index in self._results.get(run_id, {}) or index in lane:
                return False
            lane[index] = ""
            self._buffer.setdefault(run_id, deque()).append((index, now))
            return True

    def lane_take(self, run_id: str, n: int, token: str, now: float) -> list[int]:
        with self._lock:
            buffer = self._buffer.setdefault(run_id, deque())
            taken = [buffer.popleft()[0] for _ in range(min(n, len(buffer)))]
            if not taken:
                return []
            lane = self._lane.setdefault(run_id, {})
            for index in taken:
                lane[index] = token
            record = {"token": token, "id": None, "state": "creating", "created": now}
            self._batches.setdefault(run_id, {})[token] = json.dumps(record)
            self._batch_indices[(run_id, token)] = list(taken)
            return taken

    def lane_return(self, run_id: str, indices: list[int], now: float, token: str) -> int:
        with self._lock:
            lane = self._lane.setdefault(run_id, {})
            buffer = self._buffer.setdefault(run_id, deque())
            done = self._results.get(run_id, {})
            back = 0
            for index in indices:
                if lane.get(index) != token:
                    continue  # taken into another batch since, or gone
                if index in done:
                    del lane[index]
                    continue
                lane[index] = ""
                buffer.append((index, now))
                back += 1
            return back

    def lane_done(self, run_id: str, indices: list[int]) -> None:
        with self._lock:
            lane = self._lane.setdefault(run_id, {})
            for index in indices:
                lane.pop(index, None)

    def lane_counts(self, run_id: str) -> tuple[int, int, float | None]:
        with self._lock:
            buffer = self._buffer.get(run_id) or deque()
            return len(buffer), len(self._lane.get(run_id, {})), buffer[0][1] if buffer else None

    def lane_set_batch(self, run_id: str, record: dict[str, Any], expect: tuple[str, ...]) -> bool:
        with self._lock:
            records = self._batches.setdefault(run_id, {})
            current = records.get(record["token"])
            if current is None or json.loads(current)["state"] not in expect:
                return False
            records[record["token"]] = json.dumps(record)
            if record["state"] not in IN_FLIGHT:
                self._reserved.get(run_id, {}).pop(record["token"], None)
            return True

    def lane_reserve(self, run_id: str, token: str, usd: float) -> bool:
        with self._lock:
            current = self._batches.get(run_id, {}).get(token)
            if current is None or json.loads(current)["state"] != "creating":
                return False
            limit = float(self._state.get(run_id, {}).get("max_cost_usd") or 0)
            held = self._reserved.setdefault(run_id, {})
            spent = float(self._counters.get(run_id, Counter())["cost_usd"])
            if limit > 0 and spent + sum(held.values()) + usd > limit:
                return False
            held[token] = usd
            return True

    def lane_reserved(self, run_id: str) -> float:
        with self._lock:
            return sum(self._reserved.get(run_id, {}).values())

    def lane_batches(self, run_id: str) -> list[dict[str, Any]]:
        with self._lock:
            records = [json.loads(raw) for raw in self._batches.get(run_id, {}).values()]
        return sorted(records, key=lambda r: (r.get("created", 0), r["token"]))

    def lane_batch(self, run_id: str, token: str) -> dict[str, Any] | None:
        with self._lock:
            raw = self._batches.get(run_id, {}).get(token)
        return json.loads(raw) if raw else None

    def lane_batch_indices(self, run_id: str, token: str) -> list[int]:
        with self._lock:
            lane = self._lane.get(run_id, {})
            return [i for i in self._batch_indices.get((run_id, token), []) if lane.get(i) == token]

    def lane_runs(self) -> list[str]:
        with self._lock:
            return sorted(self._lane_runs)

    def lane_track(self, run_id: str, active: bool) -> None:
        with self._lock:
            if active:
                self._lane_runs.add(run_id)
            else:
                self._lane_runs.discard(run_id)

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

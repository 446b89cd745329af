"""What happens while a run is graded, as events: each judge call, each wait for the shared
budget, each reply taken from the cache, each verdict parsed, each result stored and each change
of a run's state. The pipeline emits them (:func:`emit`); observers registered at an edge turn
them into Prometheus metrics (``workers/metrics.py``) or JSON log lines
(:mod:`judgeq.telemetry.jsonlog`). With no observer registered, emitting is one test of an
empty list (dramatiq's middleware, in miniature: the pipeline knows nothing of Prometheus).

No event carries a secret or a job's text: judge names, ids, counts, reasons and timings only.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

__all__ = [
    "BudgetWaited",
    "CacheHit",
    "Event",
    "JobStored",
    "JudgeCall",
    "Observer",
    "RunChanged",
    "VerdictParsed",
    "add_observer",
    "current_job",
    "emit",
    "job_context",
    "observed",
    "observing",
    "remove_observer",
]

log = logging.getLogger("judgeq.telemetry")


@dataclass(frozen=True, slots=True)
class JudgeCall:
    """One attempt at a judge call: ``outcome`` is ``ok`` or the null reason of its error
    (``rate_limited`` for a 429, ``overloaded``, ``api_error`` for a 5xx, ``timeout``, ...)."""

    provider: str
    model: str
    outcome: str
    seconds: float
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    run_id: str | None = None
    index: int | None = None
    batch: bool = False
    """Answered in a provider's batch (``seconds``: from the batch's sending to its results)."""


@dataclass(frozen=True, slots=True)
class BudgetWaited:
    """A call waited ``seconds`` for the judge's shared budget (rate limit) before it was sent."""

    provider: str
    model: str
    seconds: float


@dataclass(frozen=True, slots=True)
class CacheHit:
    """A judge call answered from the reply cache (no call made)."""

    provider: str
    model: str


@dataclass(frozen=True, slots=True)
class VerdictParsed:
    """A judge's reply read as a verdict: ``outcome`` is ``ok`` or why not (``parse_error``,
    ``refusal``)."""

    provider: str
    model: str
    outcome: str


@dataclass(frozen=True, slots=True)
class JobStored:
    """A job's result stored (once: a duplicate emits nothing). ``reason`` is the null reason,
    None for a graded job; ``cost_usd`` what its judge calls cost, per judge model."""

    run_id: str
    index: int
    status: str
    reason: str | None
    judge: str
    seconds: float
    cost_usd: dict[str, float] = field(default_factory=dict)
    batch: bool = False
    cached: bool = False


@dataclass(frozen=True, slots=True)
class RunChanged:
    """A run's state changed: ``paused``, ``resumed``, ``finalized``, ``canceled``; ``waiting``
    (its judge answers no one: its jobs are held) and ``answering`` (it answers again)."""

    run_id: str
    state: str
    reason: str = ""


Event = JudgeCall | BudgetWaited | CacheHit | VerdictParsed | JobStored | RunChanged
Observer = Callable[[Event], None]

_observers: list[Observer] = []
_job: contextvars.ContextVar[tuple[str, int] | None] = contextvars.ContextVar("judgeq_job", default=None)


def add_observer(observer: Observer) -> None:
    """Register ``observer`` (for the process); registering it twice is once."""
    if observer not in _observers:
        _observers.append(observer)


def remove_observer(observer: Observer) -> None:
    with contextlib.suppress(ValueError):
        _observers.remove(observer)


@contextlib.contextmanager
def observing(observer: Observer) -> Iterator[Observer]:
    """``observer`` registered for the ``with`` block (tests)."""
    add_observer(observer)
    try:
        yield observer
    finally:
        remove_observer(observer)


def observed() -> bool:
    """Whether any observer listens (callers skip building an event nobody reads)."""
    return bool(_observers)


def emit(event: Event) -> None:
    """Hand ``event`` to every observer; an observer that fails is logged, never raised into
    the pipeline (a metric must not cost a grade)."""
    for observer in tuple(_observers):
        try:
            observer(event)
        except Exception:
            log.exception("telemetry observer %r failed", observer)


@contextlib.contextmanager
def job_context(run_id: str, index: int) -> Iterator[None]:
    """The job being graded in this thread, for the events its calls emit."""
    token = _job.set((run_id, index))
    try:
        yield
    finally:
        _job.reset(token)


def current_job() -> tuple[str, int] | None:
    """``(run_id, index)`` of the job being graded in this thread, if any."""
    return _job.get()

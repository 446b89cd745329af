"""Registering a run and enqueuing its jobs, in pipelined chunks, with back-pressure.

For each chunk of valid jobs: the payloads go to the store in one pipelined write, then one
message per job carrying ``(run_id, index, job_id)`` goes to the queue.  Before each chunk
the producer checks the queue depth and pauses while it is over the bound
(``JUDGEQ_MAX_QUEUE_DEPTH``), so Redis holds at most about that many waiting jobs whatever
the batch size.  Re-submitting a run id skips the jobs that already have a result.

While it works the producer writes a heartbeat (``producer_heartbeat``, epoch seconds on the
store's clock, Redis's ``TIME``, which ``status`` on another machine compares with) into the
run state: at registration, with every chunk, at every back-pressure wait (every 0.5 s)
and at least every :data:`HEARTBEAT_EVERY` seconds while it reads the batch.  ``status``
shows a run whose heartbeat is older than
:data:`~judgeq.producer.progress.PRODUCER_GONE_AFTER` (60 s) and that is not fully enqueued
as stopped: the producer died or was interrupted, and re-submitting with the same
``--run-id`` sends the rest.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from judgeq.errors import ConfigError
from judgeq.jobs.models import Job
from judgeq.jobs.reader import JobsFileLimits, iter_jobs
from judgeq.runspec import RunSpec
from judgeq.settings import Settings
from judgeq.store.base import Store

from .plan import Plan

__all__ = [
    "BACK_PRESSURE_POLL",
    "HEARTBEAT_EVERY",
    "Dispatcher",
    "EnqueueStats",
    "check_resubmission",
    "register_and_enqueue",
]


class Dispatcher(Protocol):
    """Puts grading messages on a queue."""

    def send(self, run_id: str, items: list[tuple[int, str]]) -> None: ...
    def depth(self) -> int: ...


HEARTBEAT_EVERY = 10.0
"""Longest gap (seconds) between two heartbeats of a producer reading its batch; far below
:data:`~judgeq.producer.progress.PRODUCER_GONE_AFTER`."""
BACK_PRESSURE_POLL = 0.5
"""Seconds between two queue-depth checks while the queue is over the bound."""


@dataclass(slots=True)
class EnqueueStats:
    enqueued: int = 0
    skipped: int = 0
    paused_s: float = 0.0
    canceled: bool = False


_SAME = (
    "total",
    "jobs_fingerprint",
    "judge_provider",
    "judge_model",
    "thresholds",
    "judge_timeout",
    "judge_deadline",
    "max_tokens",
    "safety_gate",
    "safety_cap",
    "retrieval",
    "lane",
)


_SHOWN = {"jobs_fingerprint": "batch_fingerprint"}
"""Names in the message as they were first written (scripts match them)."""


def check_resubmission(existing: RunSpec, plan: Plan) -> None:
    """A run id may be re-submitted only with the same jobs file, rubric and settings."""
    new = plan.spec
    problems = [
        f"{_SHOWN.get(name, name)} {getattr(existing, name)!r} (now {getattr(new, name)!r})"
        for name in _SAME
        if getattr(existing, name) != getattr(new, name)
    ]
    if existing.rubric.fingerprint != new.rubric.fingerprint:
        problems.append("a different rubric or weights")
    if problems:
        raise ConfigError(
            f"--run-id: run {new.run_id!r} already exists with {'; '.join(problems)}; use a new run id"
        )


@dataclass(slots=True)
class _QueueView:
    depth: int = 0
    """The queue's depth when last measured (jobs)."""
    sent: int = 0
    """Jobs sent since."""


def register_and_enqueue(
    plan: Plan,
    store: Store,
    dispatcher: Dispatcher,
    settings: Settings,
    *,
    on_progress: Callable[[EnqueueStats], None] | None = None,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> EnqueueStats:
    """Register the run (or check a re-submission) and enqueue its jobs.

    The producer owns three state fields: ``enqueue`` (``enqueuing``, ``paused``, ``done``),
    ``enqueued`` (how many jobs, in index order, have been sent) and ``producer_heartbeat``.
    The run's ``state`` is set to ``running`` once, at registration; only the reducer changes
    it (``finished``). A re-submission sends only the jobs never sent before (index >=
    ``enqueued``) that have no result: jobs already sent are in the queue or graded, and a
    message lost in transit is the workers' stalled-run repair's business, so nothing is
    graded twice.

    It writes ``producer_heartbeat`` and ``started_epoch`` on the store's clock
    (:meth:`~judgeq.Store.now`): the heartbeat at the start, with every chunk, at every
    back-pressure wait and at least every :data:`HEARTBEAT_EVERY` seconds (on the local
    ``clock``) while reading, so ``status`` can tell a producer that died mid-enqueue (see the
    module docstring) whatever this machine's clock says.  ``sleep`` and ``clock`` are
    injectable for tests.
    """
    spec = plan.spec
    existing = store.spec(spec.run_id)
    already_sent = 0
    last_beat = clock()
    if existing is not None:
        check_resubmission(existing, plan)
        spec = existing
        state = store.state(spec.run_id)
        already_sent = int(float(state.get("enqueued") or 0))
        if state.get("enqueue", "done") != "done":
            # the producer is back: no longer shown as stopped while it re-reads sent lines
            store.set_state(spec.run_id, enqueue="enqueuing", producer_heartbeat=store.now())
    else:
        store.register(spec)
        if spec.lane == "batch":
            store.lane_track(spec.run_id, True)
        started = store.now()
        store.set_state(
            spec.run_id,
            state="running",
            enqueue="enqueuing",
            started_at=spec.created_at,
            started_epoch=started,
            enqueued=0,
            producer_heartbeat=started,
            **({"max_cost_usd": settings.max_cost} if settings.max_cost else {}),
        )
    stats = EnqueueStats()
    limits = JobsFileLimits(settings.max_line_bytes, settings.max_field_chars)
    chunk: list[tuple[int, Job]] = []

    def beat(now: float | None = None, **fields: object) -> None:
        nonlocal last_beat
        last_beat = clock() if now is None else now
        store.set_state(spec.run_id, producer_heartbeat=store.now(), **fields)

    queue = _QueueView(depth=settings.max_queue_depth)  # unknown: measured before the first send

    def flush() -> None:
        fresh = [(i, job) for i, job in chunk if i >= already_sent]
        todo = set(store.missing(spec.run_id, [i for i, _ in fresh])) if existing is not None else None
        items = [(i, job) for i, job in fresh if todo is None or i in todo]
        stats.skipped += len(chunk) - len(items)
        last = chunk[-1][0] + 1
        chunk.clear()
        if items:
            # the queue grows only by what is sent: measure it again (a broker round trip, on
            # a connection of its own) only when what was sent since could reach the bound
            if queue.depth + queue.sent + len(items) > settings.max_queue_depth:
                queue.depth, queue.sent = dispatcher.depth(), 0
                while queue.depth > settings.max_queue_depth:
                    beat(enqueue="paused")
                    sleep(BACK_PRESSURE_POLL)
                    stats.paused_s += BACK_PRESSURE_POLL
                    queue.depth = dispatcher.depth()
            queue.sent += len(items)
            store.put_jobs(spec.run_id, [(i, job.model_dump_json(exclude_none=True)) for i, job in items])
            dispatcher.send(spec.run_id, [(i, job.id) for i, job in items])
            stats.enqueued += len(items)
        if last > already_sent:
            beat(enqueue="enqueuing", enqueued=last)
        else:
            beat()
        if on_progress is not None:
            on_progress(stats)

    for index, job in iter_jobs(plan.scan, limits):
        chunk.append((index, job))
        if len(chunk) >= settings.enqueue_chunk:
            if store.state(spec.run_id).get("state") == "canceled":
                stats.canceled = True  # judgeq cancel: nothing more is sent
                return stats
            flush()
        elif (now := clock()) - last_beat >= HEARTBEAT_EVERY:
            beat(now)
    if chunk:
        flush()
    store.set_state(spec.run_id, enqueue="done", enqueued=spec.total)
    return stats

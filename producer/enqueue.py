"""Registering a run and enqueuing its jobs, in pipelined chunks, with back-pressure.

For each chunk of valid jobs: the payloads go to the store in one pipelined write, then one
message per job carrying ``(run_id, index, job_id)`` goes to the queue.  Before each chunk
the producer checks the queue depth and pauses while it is over the bound
(``JUDGEQ_MAX_QUEUE_DEPTH``), so Redis holds at most about that many waiting jobs whatever
the batch size.  Re-submitting a run id skips the jobs that already have a result.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from judgeq._batch import BatchLimits, iter_jobs
from judgeq._errors import ConfigError
from judgeq._run import RunSpec
from judgeq._settings import Settings
from judgeq._store import Store

from .plan import Plan


class Dispatcher(Protocol):
    """Puts grading messages on a queue."""

    def send(self, run_id: str, items: list[tuple[int, str]]) -> None: ...
    def depth(self) -> int: ...


@dataclass(slots=True)
class EnqueueStats:
    enqueued: int = 0
    skipped: int = 0
    paused_s: float = 0.0


def check_resubmission(existing: RunSpec, plan: Plan) -> None:
    """A run id may be re-submitted only with the same batch size, rubric and judge."""
    new = plan.spec
    problems = []
    if existing.total != new.total:
        problems.append(f"{existing.total} jobs before, {new.total} now")
    if existing.rubric.fingerprint != new.rubric.fingerprint:
        problems.append("a different rubric or weights")
    if (existing.judge_provider, existing.judge_model) != (new.judge_provider, new.judge_model):
        problems.append(f"judge {existing.judge_provider}:{existing.judge_model} before")
    if problems:
        raise ConfigError(
            f"--run-id: run {new.run_id!r} already exists with {'; '.join(problems)}; use a new run id"
        )


def register_and_enqueue(
    plan: Plan,
    store: Store,
    dispatcher: Dispatcher,
    settings: Settings,
    *,
    on_progress: Callable[[EnqueueStats], None] | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> EnqueueStats:
    """Register the run (or check a re-submission) and enqueue every job without a result."""
    spec = plan.spec
    existing = store.spec(spec.run_id)
    if existing is not None:
        check_resubmission(existing, plan)
        spec = existing
    else:
        store.register(spec)
        store.set_state(
            spec.run_id, state="enqueuing", started_at=spec.created_at, started_epoch=time.time(), enqueued=0
        )
    stats = EnqueueStats()
    limits = BatchLimits(settings.max_line_bytes, settings.max_field_chars)
    chunk: list[tuple[int, object]] = []

    def flush() -> None:
        indices = [i for i, _ in chunk]
        todo = set(store.missing(spec.run_id, indices)) if existing is not None else set(indices)
        items = [(i, job) for i, job in chunk if i in todo]
        stats.skipped += len(chunk) - len(items)
        chunk.clear()
        if not items:
            return
        while dispatcher.depth() > settings.max_queue_depth:
            store.set_state(spec.run_id, state="enqueuing (paused: queue full)")
            sleep(0.5)
            stats.paused_s += 0.5
        store.put_jobs(spec.run_id, [(i, job.model_dump_json(exclude_none=True)) for i, job in items])  # type: ignore[attr-defined]
        dispatcher.send(spec.run_id, [(i, job.id) for i, job in items])  # type: ignore[attr-defined]
        stats.enqueued += len(items)
        store.set_state(spec.run_id, state="enqueuing", enqueued=stats.enqueued + stats.skipped)
        if on_progress is not None:
            on_progress(stats)

    for index, job in iter_jobs(plan.scan, limits):
        chunk.append((index, job))
        if len(chunk) >= settings.enqueue_chunk:
            flush()
    flush()
    if stats.enqueued or existing is None:
        store.set_state(spec.run_id, state="running", enqueued=spec.total)
    return stats

"""The distributed path as functions: submit a validated plan to Redis and the workers, wait
for a run's report.  ``judgeq submit``/``judgeq wait`` and :func:`judgeq.submit`/
:func:`judgeq.wait` are built on these."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from judgeq.errors import ConfigError
from judgeq.pipeline.messages import REDUCE_TASK
from judgeq.settings import Settings
from judgeq.store.base import Store
from judgeq.store.redis import RedisStore

from .enqueue import EnqueueStats, check_resubmission, register_and_enqueue
from .plan import Plan, preflight
from .progress import wait_for_report, write_files

__all__ = ["Submitted", "open_store", "set_judge_limits", "submit_plan", "wait_run"]


def open_store(settings: Settings) -> RedisStore:
    return RedisStore.open(settings)


@dataclass(slots=True)
class Submitted:
    run_id: str
    stats: EnqueueStats
    store: RedisStore
    dispatcher: Any


def submit_plan(plan: Plan, settings: Settings, *, on_start: Any = None) -> Submitted:
    """Preflight the judges, register the run and enqueue its jobs; KeyboardInterrupt passes
    through (the jobs already enqueued are graded; re-submitting the run id sends the rest)."""
    from judgeq.workers.celery_app import create_app

    from .celery_dispatch import CeleryDispatcher

    with ThreadPoolExecutor(1, thread_name_prefix="judgeq-preflight") as pool:
        checked = pool.submit(preflight, plan, settings)  # its round trip overlaps the setup below
        store = open_store(settings)
        dispatcher = CeleryDispatcher(
            create_app(settings), settings.queue, settings.jobs_per_message, plan.spec.judges
        )
        checked.result()  # a refused key or model raises here, before anything is registered
    existing = store.spec(plan.spec.run_id)
    if existing is not None:  # a run id reused for other jobs: refused before saying "enqueuing"
        check_resubmission(existing, plan)
    if on_start is not None:
        on_start(plan)
    set_judge_limits(plan, settings, store)
    stats = register_and_enqueue(plan, store, dispatcher, settings)
    return Submitted(plan.spec.run_id, stats, store, dispatcher)


def set_judge_limits(plan: Plan, settings: Settings, store: RedisStore) -> None:
    """Limits given to ``submit`` (``--rpm/--itpm/--otpm``, ``JUDGEQ_JUDGE_*``) are set on the
    run's judges' budgets in Redis: they belong to the judge, every run and worker obeys them."""
    from judgeq.judges import budget_factory
    from judgeq.ratelimit.redis import RedisBudget

    if settings.judge_limits():
        budgets = budget_factory(settings, lambda name: RedisBudget(store.r, name))
        for provider, model in plan.spec.judges:
            budgets(provider, model)  # configures it


def wait_run(
    run_id: str,
    settings: Settings,
    *,
    stream: TextIO | None,
    store: Store | None = None,
    nudge: Any = None,
    stop_on_pause: bool = True,
) -> tuple[dict[str, Any], dict[str, Path]]:
    """Wait for the run's report (showing progress on ``stream``), write its files; a pause
    raises :class:`~judgeq.errors.RunPaused` unless not ``stop_on_pause``."""
    store = store or open_store(settings)
    if store.spec(run_id) is None:
        raise ConfigError(f"run {run_id!r} is unknown or expired")
    if nudge is None:
        from judgeq.workers.celery_app import create_app

        app = create_app(settings)

        def nudge() -> None:
            app.send_task(REDUCE_TASK, args=[run_id], queue=settings.queue)

    report = wait_for_report(store, run_id, stream=stream, nudge=nudge, stop_on_pause=stop_on_pause)
    return report, write_files(store, run_id, report, settings.results_dir)

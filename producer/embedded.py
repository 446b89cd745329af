"""Embedded mode (``judgeq run``): the whole pipeline in one process, no services.

An in-process queue stands in for the broker and a :class:`~judgeq.MemoryStore` for Redis;
worker threads run the same stage functions the Celery tasks run
(:func:`~judgeq._pipeline.process_job`, :func:`~judgeq._pipeline.reduce_run`), so for the same
batch, rubric and a deterministic judge, ``run`` and ``submit`` give the same report apart
from timings and ids.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from typing import Any

from judgeq._budget import MemoryBudget
from judgeq._cache import SqliteCache
from judgeq._judge import Judge
from judgeq._pipeline import Contexts, Held, Outcome, process_job, reduce_run, settle_held
from judgeq._settings import Settings, load_settings
from judgeq._store import MemoryStore
from judgeq.judges import budget_factory

from .enqueue import register_and_enqueue
from .plan import Plan

log = logging.getLogger("judgeq.embedded")
_STOP = object()


class QueueDispatcher:
    """An in-process broker: a FIFO of (run_id, index) messages."""

    def __init__(self) -> None:
        self.q: queue.Queue[Any] = queue.Queue()

    def send(self, run_id: str, items: list[tuple[int, str]]) -> None:
        for index, _job_id in items:
            self.q.put((run_id, index))

    def depth(self) -> int:
        return self.q.qsize()


class EmbeddedRunner:
    """Worker threads over a :class:`QueueDispatcher` and a :class:`MemoryStore`."""

    def __init__(
        self,
        judge_factory: Callable[[str, str], Judge],
        concurrency: int = 16,
        settings: Settings | None = None,
    ) -> None:
        self.settings = settings or load_settings()
        self.store = MemoryStore()
        self.dispatcher = QueueDispatcher()
        cache = SqliteCache(self.settings.reply_cache_path(), self.settings.cache_ttl)
        budgets = budget_factory(self.settings, lambda _name: MemoryBudget())
        self.contexts = Contexts(judge_factory, budgets, cache)
        self.errors: list[BaseException] = []
        self._tries: dict[tuple[str, int], int] = {}
        self._stopping = threading.Event()
        self._threads = [
            threading.Thread(target=self._work, name=f"judgeq-worker-{i}", daemon=True)
            for i in range(concurrency)
        ]

    def _work(self) -> None:
        while True:
            item = self.dispatcher.q.get()
            if item is _STOP or self._stopping.is_set():
                return
            run_id, index = item
            try:
                if self.store.state(run_id).get("state") == "paused":
                    continue  # the job stays pending; the run's waiter reports the pause
                outcome = process_job(self.store, self.contexts, run_id, index)
                if isinstance(outcome, Held):
                    outcome = self._settle(run_id, index, outcome)
                if outcome is Outcome.LAST:
                    reduce_run(self.store, run_id)
            except BaseException as exc:  # a bug: keep it, stop waiting for this run
                log.exception("job %s/%s failed", run_id, index)
                self.errors.append(exc)
                self.store.set_state(run_id, state="failed", error=repr(exc))

    def _settle(self, run_id: str, index: int, held: Held) -> Outcome:
        """The same policy as a worker's: pause on a systemic streak, else retry with a delay,
        then a null."""
        s = self.settings
        tries = self._tries[(run_id, index)] = self._tries.get((run_id, index), 0) + 1
        final = tries > s.task_retries
        outcome = settle_held(
            self.store, run_id, [(index, held)], systemic_limit=s.systemic_failures, final=final
        )
        if outcome is Outcome.RETRY:
            delay = s.task_retry_delay * 2 ** (tries - 1)
            timer = threading.Timer(delay, self.dispatcher.q.put, args=((run_id, index),))
            timer.daemon = True
            timer.start()
        return outcome

    def __enter__(self) -> EmbeddedRunner:
        for t in self._threads:
            t.start()
        return self

    def __exit__(self, *_: object) -> None:
        """Stop at once: queued jobs are dropped (on Ctrl-C nothing more is graded or paid
        for); jobs in flight finish their current judge call."""
        self._stopping.set()
        while True:
            try:
                self.dispatcher.q.get_nowait()
            except queue.Empty:
                break
        for _t in self._threads:
            self.dispatcher.q.put(_STOP)
        deadline = time.monotonic() + 5
        for t in self._threads:
            t.join(timeout=max(0.0, deadline - time.monotonic()))

    def submit(self, plan: Plan, settings: Settings) -> str:
        register_and_enqueue(plan, self.store, self.dispatcher, settings)
        return plan.spec.run_id

"""The Celery tasks: thin wrappers over :mod:`judgeq._pipeline`.

Task arguments are ids only — ``(run_id, [index, …], [job_id, …])`` for a grade message,
``(run_id,)`` for the reducer — so Flower shows which jobs a task holds, and never job text or
secrets.  A grade message carries up to ``JUDGEQ_JOBS_PER_MESSAGE`` jobs (default 8), graded
concurrently: Celery's per-message cost (delivery, acknowledgement, events) was the largest
cost per job in ``benchmarks/throughput.py``; grouping divides it.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor, wait

import redis
from celery import Task
from celery.exceptions import Reject
from celery.signals import worker_process_init, worker_ready
from kombu.exceptions import OperationalError

from judgeq._errors import StoreError
from judgeq._pipeline import Contexts, Outcome, process_job, reduce_run
from judgeq._settings import Settings
from judgeq.judges import judge_factory

from . import app
from .app import GRADE_TASK, REDUCE_TASK, queue_depth
from .repair import check_interval, repair_stalled_runs
from .store import RedisStore, connect

log = logging.getLogger("judgeq.worker")

_lock = threading.Lock()
_state: dict[str, object] = {}


def _settings() -> Settings:
    return app.judgeq_settings  # type: ignore[attr-defined,no-any-return]


def runtime() -> tuple[RedisStore, Contexts]:
    """This process's store and grading contexts (created lazily, once per process)."""
    with _lock:
        if _state.get("pid") != os.getpid():
            s = _settings()
            client = connect(s.redis_url)
            _state.update(
                pid=os.getpid(),
                store=RedisStore(client, retention_s=int(s.retention_days * 86400)),
                contexts=Contexts(judge_factory(s)),  # type: ignore[arg-type]
            )
        return _state["store"], _state["contexts"]  # type: ignore[return-value]


HEALTH_INTERVAL = 10.0


@worker_ready.connect
def _on_ready(**_: object) -> None:
    """Log readiness; keep ``JUDGEQ_HEALTH_FILE`` fresh (a container healthcheck that is the
    file's age, no Python import); start the stalled-run repair loop."""
    s = _settings()
    log.warning("judgeq worker ready (redis %s, queue %s)", s.redis_url.split("@")[-1], s.queue)
    threading.Thread(target=_health_loop, args=(s,), name="judgeq-health", daemon=True).start()
    if s.repair_stalled:
        threading.Thread(target=_repair_loop, args=(s,), name="judgeq-repair", daemon=True).start()


def _health_loop(s: Settings) -> None:
    path = s.health_file
    while path is not None:
        try:
            path.touch()
        except OSError as exc:  # pragma: no cover - a read-only or vanished directory
            log.warning("cannot touch health file %s: %s", path, exc)
        time.sleep(HEALTH_INTERVAL)


def _repair_loop(s: Settings) -> None:
    def send(run_id: str, indices: list[int], job_ids: list[str]) -> None:
        app.send_task(GRADE_TASK, args=[run_id, indices, job_ids], queue=s.queue)

    while True:
        time.sleep(check_interval(s))
        try:
            repair_stalled_runs(runtime()[0], s, send, lambda: queue_depth(app, s.queue))
        except Exception as exc:  # keep the loop alive through Redis restarts and the like
            log.warning("stalled-run check failed: %s", exc)


@worker_process_init.connect
def _reset_after_fork(**_: object) -> None:
    with _lock:
        _state.clear()


def _executor() -> ThreadPoolExecutor:
    """This process's pool for the jobs of grade messages. Its threads are made on demand:
    at most (messages in hand) x (jobs per message) run at once, which the Celery pool's
    slots already bound."""
    with _lock:
        ex = _state.get("executor")
        if ex is None:
            ex = _state["executor"] = ThreadPoolExecutor(max_workers=4096, thread_name_prefix="judgeq-job")
        return ex  # type: ignore[return-value]


def _needs_reducer(store: RedisStore, run_id: str) -> bool:
    """A complete run without a report (e.g. the worker that stored the last result died
    before enqueuing the reducer): enqueue it again; the reducer is idempotent."""
    spec = store.spec(run_id)
    return (
        spec is not None
        and store.counters(run_id).get("done", 0) >= spec.total
        and store.report(run_id) is None
    )


@app.task(name=GRADE_TASK, bind=True, acks_late=True, reject_on_worker_lost=True, ignore_result=True)
def grade(self: Task, run_id: str, indices: list[int], job_ids: list[str] | None = None) -> str:
    """Grade jobs ``indices`` of ``run_id`` concurrently (``job_ids`` are for display only).

    The message is acknowledged after every job's result is stored; a redelivered message
    skips the jobs that already have one.
    """
    try:
        store, contexts = runtime()
        if len(indices) == 1:
            outcomes = [process_job(store, contexts, run_id, indices[0])]
        else:
            futures = [_executor().submit(process_job, store, contexts, run_id, i) for i in indices]
            wait(futures)  # every job settles before the message is acked or requeued
            outcomes = [f.result() for f in futures]
        if Outcome.LAST in outcomes or (Outcome.DUPLICATE in outcomes and _needs_reducer(store, run_id)):
            try:
                app.send_task(REDUCE_TASK, args=[run_id])
            except Exception:
                store.release_reducer(run_id)  # a redelivery of this message will try again
                raise
        return ",".join(sorted({o.value for o in outcomes}))
    except (redis.RedisError, StoreError, OperationalError) as exc:
        # the store or the broker is unreachable or refusing writes: nothing was lost (results
        # are written once); put the message back for another try
        log.warning("store/broker error while grading %s %s: %s; requeueing", run_id, indices, exc)
        raise Reject(str(exc), requeue=True) from None


@app.task(name=REDUCE_TASK, bind=True, acks_late=True, reject_on_worker_lost=True, ignore_result=True)
def reduce(self: Task, run_id: str) -> str:
    """Aggregate a run's results into its report (idempotent)."""
    try:
        report = reduce_run(runtime()[0], run_id)
    except LookupError as exc:
        log.warning("%s", exc)
        return "unknown-run"
    except (redis.RedisError, StoreError, OperationalError) as exc:
        raise Reject(str(exc), requeue=True) from None
    counts = report["counts"]
    log.info("run %s reduced: %s", run_id, counts)
    return "reduced"

"""The Celery tasks: thin wrappers over :mod:`judgeq._pipeline`.

Task arguments are ids only — ``(run_id, index, job_id)`` for a grade, ``(run_id,)`` for the
reducer — so Flower shows which job a task is, and never job text or secrets.
"""

from __future__ import annotations

import logging
import os
import threading

import redis
from celery import Task
from celery.exceptions import Reject
from celery.signals import worker_process_init

from judgeq._pipeline import Contexts, Outcome, process_job, reduce_run
from judgeq._settings import Settings

from . import app
from .app import GRADE_TASK, REDUCE_TASK
from .store import RedisStore, connect

log = logging.getLogger("judgeq.worker")

_lock = threading.Lock()
_state: dict[str, object] = {}


def _settings() -> Settings:
    return app.judgeq_settings  # type: ignore[attr-defined,no-any-return]


def _judge_factory(provider: str, model: str) -> object:
    from judgeq.judges import build_judge

    s = _settings()
    key = s.anthropic_api_key.get_secret_value() if s.anthropic_api_key else None
    return build_judge(provider, model, api_key=key, base_url=s.anthropic_base_url)


def runtime() -> tuple[RedisStore, Contexts]:
    """This process's store and grading contexts (created lazily, once per process)."""
    with _lock:
        if _state.get("pid") != os.getpid():
            s = _settings()
            client = connect(s.redis_url, **_retrying())
            _state.update(
                pid=os.getpid(),
                store=RedisStore(client, retention_s=int(s.retention_days * 86400)),
                contexts=Contexts(_judge_factory),  # type: ignore[arg-type]
            )
        return _state["store"], _state["contexts"]  # type: ignore[return-value]


def _retrying() -> dict[str, object]:
    """Client options that ride out a Redis restart (about a minute of retries)."""
    from redis.backoff import ExponentialBackoff
    from redis.retry import Retry

    return {
        "retry": Retry(ExponentialBackoff(cap=2.0, base=0.1), 40),
        "retry_on_error": [redis.ConnectionError, redis.TimeoutError],
    }


@worker_process_init.connect
def _reset_after_fork(**_: object) -> None:
    with _lock:
        _state.clear()


@app.task(name=GRADE_TASK, bind=True, acks_late=True, reject_on_worker_lost=True, ignore_result=True)
def grade(self: Task, run_id: str, index: int, job_id: str = "") -> str:
    """Grade job ``index`` of ``run_id`` (``job_id`` is for display only)."""
    try:
        store, contexts = runtime()
        outcome = process_job(store, contexts, run_id, index)
        if outcome is Outcome.LAST:
            app.send_task(REDUCE_TASK, args=[run_id])
        elif outcome is Outcome.DUPLICATE:
            # A redelivery: if the run is complete but has no report (the worker that
            # stored the last result died before enqueuing the reducer), enqueue it again.
            spec = store.spec(run_id)
            if (
                spec is not None
                and store.counters(run_id).get("done", 0) >= spec.total
                and store.report(run_id) is None
            ):
                app.send_task(REDUCE_TASK, args=[run_id])
        return outcome.value
    except (redis.ConnectionError, redis.TimeoutError) as exc:
        log.warning("store unreachable while grading %s/%s: %s; requeueing", run_id, index, exc)
        raise Reject(str(exc), requeue=True) from None


@app.task(name=REDUCE_TASK, bind=True, acks_late=True, reject_on_worker_lost=True, ignore_result=True)
def reduce(self: Task, run_id: str) -> str:
    """Aggregate a run's results into its report (idempotent)."""
    store, _ = runtime()
    try:
        report = reduce_run(store, run_id)
    except LookupError as exc:
        log.warning("%s", exc)
        return "unknown-run"
    except (redis.ConnectionError, redis.TimeoutError) as exc:
        raise Reject(str(exc), requeue=True) from None
    counts = report["counts"]
    log.info("run %s reduced: %s", run_id, counts)
    return "reduced"

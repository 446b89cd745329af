"""The Celery application factory: :func:`create_app` (nothing is built at import).

Entry points build the app: ``judgeq worker`` and ``judgeq flower`` call :func:`create_app`
with their settings; ``celery -A judgeq.workers …`` reads the package's ``app`` attribute,
built on first access.  Configuration comes from a :class:`judgeq.Settings`.  Choices:

* JSON only: ``accept_content=["json"]`` — a pickled message is refused, never executed;
* late acknowledgement with ``reject_on_worker_lost``: a job is acknowledged only after its
  result is stored; a killed worker's jobs are redelivered after the visibility timeout,
  derived from the judge deadline (``JUDGEQ_VISIBILITY_TIMEOUT``, default 2 x deadline +
  60 s, so a job waiting in a worker's prefetch buffer is not redelivered while it waits),
  swept every ``min(10, timeout / 6)`` s: a killed worker's jobs are back within the
  visibility timeout plus one sweep (310 s with the defaults);
* prefetch multiplier 1: a worker reserves at most one extra job per execution slot;
* the workers' task events on (Flower), the producer's task-sent events off (they cost a
  third of the enqueue rate), results ignored (results live in judgeq's own store);
* unlimited broker reconnection, so workers ride out a Redis restart;
* with a RabbitMQ broker (``JUDGEQ_BROKER_URL=amqp://…``): quorum queues and publisher
  confirms (:func:`amqp_options`);
* the worker's pool and slots in the app's configuration (``worker_pool``,
  ``worker_concurrency``: :func:`celery_slots`), so ``celery -A judgeq.workers worker`` starts
  the same pool as ``judgeq worker``; a worker names itself ``judgeq-PID@HOST`` unless given
  ``-n`` (two workers on one machine are two nodes in Flower), and its banner states its
  judge calls at once (:class:`JudgeqWorker`).
"""

from __future__ import annotations

import logging
import os
import sys
from typing import Any

import click
from celery import Celery, signals
from celery.apps.worker import Worker as CeleryWorker
from celery.utils.nodenames import default_nodename, gethostname, host_format
from kombu.utils.objects import cached_property

from judgeq.errors import ConfigError
from judgeq.pipeline.messages import GRADE_TASK, REDUCE_TASK
from judgeq.pipeline.timing import restore_interval, visibility_timeout
from judgeq.redis_connect import check_broker_url, mask_url
from judgeq.settings import Settings, load_settings

__all__ = [
    "HELD_PER_CALL",
    "POOL_NAMES",
    "JudgeqApp",
    "JudgeqWorker",
    "amqp_options",
    "celery_slots",
    "create_app",
    "is_amqp",
    "judge_calls",
    "unique_nodename",
]

HELD_PER_CALL = 2
"""Jobs a threads worker holds per judge call it may make at once: while some jobs are being
read, parsed or stored, others' calls keep the worker's JUDGEQ_CONCURRENCY places busy."""

POOL_NAMES = {"thread": "threads", "prefork": "prefork", "solo": "solo"}
"""Celery's pool modules by the names ``--pool`` takes."""

CELERY_DEFAULT_NODENAME = host_format(default_nodename(None))
"""``celery@HOST``: what Celery names a worker not given ``-n``."""


def celery_slots(concurrency: int, jobs_per_message: int, pool: str) -> int:
    """Celery's --concurrency: each slot holds a grade message of up to ``jobs_per_message``
    jobs. A threads worker holds :data:`HELD_PER_CALL` jobs per call place (its calls are
    bounded by a semaphore of ``concurrency``); a prefork child makes its message's calls
    itself, so there the slots alone give ``concurrency`` calls."""
    held = concurrency * (HELD_PER_CALL if pool == "threads" else 1)
    return max(1, -(-held // jobs_per_message))


def judge_calls(settings: Settings, slots: int, pool: str) -> int:
    """Judge calls a worker makes at once with ``slots`` Celery slots of ``pool``: a threads
    worker's calls share one bound of ``JUDGEQ_CONCURRENCY``; each prefork child (or the solo
    pool) grades its message's jobs under its own."""
    per_slot = min(settings.jobs_per_message, settings.concurrency)
    if pool == "threads":
        return min(settings.concurrency, slots * settings.jobs_per_message)
    return per_slot * (slots if pool == "prefork" else 1)


def unique_nodename() -> str:
    """``judgeq-PID@HOST``: unique per process on a machine (a container's hostname is its own)."""
    return f"judgeq-{os.getpid()}@{gethostname()}"


class _BrokerURL(logging.Filter):
    """Celery's 'Connected to URL' names the broker as kombu writes it, with ':**@' whether or
    not the URL has a password; this says the configured URL, its password masked if any."""

    def __init__(self, url: str) -> None:
        super().__init__()
        self.url = url

    def filter(self, record: logging.LogRecord) -> bool:
        if record.msg == "Connected to %s":
            record.args = (self.url,)
        return True


class JudgeqWorker(CeleryWorker):
    """Celery's worker program with judgeq's defaults: a unique node name, and a banner that
    states the judge calls made at once (Celery's own line counts message slots)."""

    def __init__(self, app: Any = None, hostname: str | None = None, **kwargs: Any) -> None:
        if not hostname or hostname == CELERY_DEFAULT_NODENAME:
            hostname = unique_nodename()
        super().__init__(app=app, hostname=hostname, **kwargs)
        shown = _BrokerURL(mask_url(self.app.judgeq_settings.effective_broker_url))
        logging.getLogger("celery.worker.consumer.connection").addFilter(shown)

    def startup_info(self, artlines: bool = True) -> str:
        info: str = super().startup_info(artlines)
        pool_cls = self.pool_cls if isinstance(self.pool_cls, str) else self.pool_cls.__module__
        pool = POOL_NAMES.get(pool_cls.split(".")[-1], pool_cls.split(".")[-1])
        settings = self.app.judgeq_settings
        slots = int(self.concurrency)
        celery_says = f"{slots} ({pool_cls.split('.')[-1]})"
        line = (
            f"concurrency: {judge_calls(settings, slots, pool)} judge calls at once ({pool} pool; "
            f"Celery's concurrency: {celery_says} message slots of up to {settings.jobs_per_message} jobs)"
        )
        # kombu writes ':**@' whether or not the URL has a password; say what is there
        transport = "transport:   " + mask_url(settings.effective_broker_url)
        out = []
        for text in info.split("\n"):
            for label, replacement in ((".> concurrency:", line), (".> transport:", transport)):
                if label in text:
                    text = text.split(label)[0] + ".> " + replacement
            out.append(text)
        return "\n".join(out)


class JudgeqApp(Celery):
    """The judgeq Celery app: its worker program is :class:`JudgeqWorker`."""

    @cached_property
    def Worker(self) -> Any:
        return self.subclass_with_self(JudgeqWorker)


def is_amqp(url: str) -> bool:
    return url.split("://", 1)[0] in ("amqp", "amqps", "pyamqp")


def amqp_options() -> dict[str, Any]:
    """RabbitMQ as a broker users can trust (Redis stays the store of results, budget and
    coordination):

    * quorum queues (``x-queue-type: quorum``): replicated, durable, survive a broker restart;
      Celery then uses per-consumer prefetch and RabbitMQ's native delayed delivery for the
      retries with a countdown (which needs a topic exchange);
    * publisher confirms: a publish returns once the broker has the message (the producer's
      enqueue, the re-sends of the repair, the reducer's message);
    * late acknowledgement stays on: a killed worker's unacknowledged jobs come back as soon
      as its connection drops (no visibility timeout with AMQP)."""
    return {
        "task_default_queue_type": "quorum",
        "task_create_missing_queue_type": "quorum",
        "task_default_exchange_type": "topic",
        "broker_transport_options": {"confirm_publish": True},
        "worker_detect_quorum_queues": True,
    }


def create_app(settings: Settings | None = None) -> Celery:
    """A configured judgeq Celery app with its tasks registered."""
    settings = settings or load_settings()
    broker_url = settings.effective_broker_url
    check_broker_url(broker_url, "broker URL (JUDGEQ_BROKER_URL)" if settings.broker_url else "Redis URL")
    sentinel = None
    if broker_url.startswith("sentinel://"):
        from judgeq.redis_connect import parse_sentinel_url

        sentinel = parse_sentinel_url(broker_url)
        broker_url = sentinel.kombu_url
    app = JudgeqApp("judgeq", broker=broker_url, set_as_current=False)
    app.conf.update(
        task_serializer="json",
        result_serializer="json",
        accept_content=["json"],
        result_accept_content=["json"],
        event_serializer="json",
        task_ignore_result=True,
        result_backend=None,
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        task_acks_on_failure_or_timeout=True,
        worker_prefetch_multiplier=1,
        worker_send_task_events=settings.task_events,
        # no task-sent events: one more publish per message, which cost the producer a third
        # of its enqueue rate; Flower shows a job from the moment a worker receives it
        task_send_sent_event=False,
        task_default_queue=settings.queue,
        task_routes={name: {"queue": settings.queue} for name in (GRADE_TASK, REDUCE_TASK)},
        broker_transport_options={
            "visibility_timeout": visibility_timeout(settings),
            # sweep for timed-out unacknowledged messages every few seconds, not every
            # 100 s (kombu's default: interval 10 s x throttle 10)
            "unacked_restore_interval": restore_interval(settings),
            "unacked_restore_throttle": 1,
            "socket_keepalive": True,
            # no retry_on_timeout: without a socket timeout it never applied, and with it
            # kombu refuses to pipeline the producer's publishes (a retried pipeline could
            # send a message twice)
            "health_check_interval": 30,
        },
        broker_connection_retry_on_startup=True,
        broker_connection_max_retries=None,
        broker_connection_timeout=5,
        worker_cancel_long_running_tasks_on_connection_loss=True,
        worker_hijack_root_logger=False,
        worker_pool=settings.pool,
        worker_concurrency=celery_slots(settings.concurrency, settings.jobs_per_message, settings.pool),
        worker_redirect_stdouts=False,
        task_track_started=True,
        enable_utc=True,
    )
    if is_amqp(settings.effective_broker_url):
        app.conf.update(amqp_options())
    if sentinel is not None:  # the master's name, for kombu's Sentinel transport
        app.conf.broker_transport_options = {
            **app.conf.broker_transport_options,
            "master_name": sentinel.master_name,
        }
    app.judgeq_settings = settings
    from .tasks import register

    register(app)
    signals.import_modules.connect(_flower_guard, sender=app, weak=False)
    return app


def _flower_guard(sender: Celery, **_: Any) -> None:
    """Flower is starting on this app (it imports the task modules): refuse to serve it open."""
    ctx = click.get_current_context(silent=True)
    if ctx is None or ctx.command.name != "flower":
        return
    from tornado.options import options

    from .flower_auth import bind_flower, check_flower_auth

    try:
        check_flower_auth(options, sender.judgeq_settings)
        bind_flower(options, sender.judgeq_settings)
    except ConfigError as err:
        print(f"judgeq: error: {err}", file=sys.stderr)
        raise SystemExit(2) from None

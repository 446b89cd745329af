"""The Celery tasks: thin wrappers over :mod:`judgeq.pipeline.stages`, registered on an app by
:func:`register` (importing this module builds nothing).

Task arguments are ids only — ``(run_id, [index, …], [job_id, …])`` for a grade message,
``(run_id,)`` for the reducer — so Flower shows which jobs a task holds, and never job text or
secrets.  A grade message carries up to ``JUDGEQ_JOBS_PER_MESSAGE`` jobs (default 8), graded
concurrently: Celery's per-message cost (delivery, acknowledgement, events) was the largest
cost per job in ``benchmarks/throughput.py``; grouping divides it.

No exception acknowledges jobs away: store or broker errors put the message back; jobs held
for a reason outside them (a systemic judge failure, a rubric or judge that fails to load, an
unexpected error in the task) are sent again with a delay up to ``JUDGEQ_TASK_RETRIES`` times,
then become nulls with their reason, unless the run paused (they then stay pending). Jobs
held because the judge answers no one (an outage, a 429 storm past the deadline) are sent
again without counting a retry while the run waits for its judge; meanwhile one message at a
time asks it (the probe), and the first answer ends the wait
(:func:`judgeq.pipeline.stages.hold_kind`).
"""

from __future__ import annotations

import logging
import math
import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, wait
from typing import Any

import redis
from celery import Celery, Task, signals
from celery.exceptions import Reject, Retry
from kombu.exceptions import OperationalError

from judgeq.errors import StoreError
from judgeq.figures import stats as _stats
from judgeq.judges import JudgeSpec, budget_factory, can_serve, judge_factory, judge_name, served_providers
from judgeq.judges.providers import provider as named
from judgeq.judges.providers import registered
from judgeq.pipeline.batch_lane import BatchLane, LaneConfig, lane_loop
from judgeq.pipeline.messages import GRADE_TASK, REDUCE_TASK, grade_queue, is_routed, worker_queues
from judgeq.pipeline.stages import (
    Contexts,
    Held,
    Outcome,
    claim_probe,
    process_jobs,
    reduce_unless_final,
    settle_held,
    wait_delay,
)
from judgeq.ratelimit.redis import RedisBudget
from judgeq.redis_connect import connect
from judgeq.report.model import RunReport
from judgeq.settings import Settings, unknown_variables
from judgeq.store.redis import RedisStore
from judgeq.store.redis_cache import RedisCache
from judgeq.telemetry import RunChanged, emit
from judgeq.telemetry.jsonlog import use_json_logs
from judgeq.telemetry.redact import redact_logs

from .broker import queue_depth
from .health import JudgeHealth
from .metrics import metrics, serve_metrics
from .repair import repair_loop

__all__ = [
    "HEALTH",
    "HEALTH_INTERVAL",
    "STORE_ERRORS",
    "grade",
    "needs_reducer",
    "reduce",
    "register",
    "runtime",
]

log = logging.getLogger("judgeq.worker")

_lock = threading.Lock()
_state: dict[str, object] = {}
STORE_ERRORS = (redis.RedisError, StoreError, OperationalError)


def _settings(app: Celery) -> Settings:
    return app.judgeq_settings


def serves(app: Celery) -> tuple[str, ...]:
    """The judge providers this worker can call (decided once per process)."""
    with _lock:
        if "serves" not in _state:
            _state["serves"] = served_providers(_settings(app))
        return _state["serves"]  # type: ignore[return-value]


def _unserved(app: Celery, judges: list[JudgeSpec]) -> list[str]:
    """The judges of a run this worker cannot call (no credential, a server or a custom
    judge's module it does not allow)."""
    with _lock:
        known: dict[tuple[str, str], bool] = _state.setdefault("can_serve", {})  # type: ignore[assignment]
    out = []
    for provider, model in judges:
        if (provider, model) not in known:
            known[(provider, model)] = can_serve(_settings(app), provider, model)
        if not known[(provider, model)]:
            out.append(judge_name(provider, model))
    return out


RECENT_RUNS = 256
"""Runs whose judges a worker process remembers (a spec never changes)."""


def _judges_of(store: RedisStore, run_id: str) -> list[JudgeSpec]:
    """The judges of ``run_id`` (empty when it is unknown), read from the store once per
    process: a grade message costs no round trip for it."""
    with _lock:
        known: dict[str, list[JudgeSpec]] = _state.setdefault("judges_of", {})  # type: ignore[assignment]
        hit = known.get(run_id)
    if hit is not None:
        return hit
    spec = store.spec(run_id)
    if spec is None:
        return []  # unknown or expired: process_jobs says so
    with _lock:
        if len(known) >= RECENT_RUNS:
            known.clear()
        known[run_id] = spec.judges
    return spec.judges


def runtime(app: Celery) -> tuple[RedisStore, Contexts]:
    """This process's store and grading contexts (created lazily, once per process)."""
    with _lock:
        if _state.get("pid") != os.getpid():
            s = _settings(app)
            client = connect(s.redis_url)
            budgets = budget_factory(s, lambda name: RedisBudget(client, name))
            _state.update(
                pid=os.getpid(),
                store=RedisStore.open(s, client),
                contexts=Contexts(
                    judge_factory(s),
                    budgets,
                    RedisCache(client, s.cache_ttl),
                    # JUDGEQ_CONCURRENCY judge calls at once in this process, whatever the
                    # number of jobs in hand (the worker holds more, see 'judgeq worker')
                    gate=threading.BoundedSemaphore(s.concurrency),
                ),
            )
        return _state["store"], _state["contexts"]  # type: ignore[return-value]


def _executor() -> ThreadPoolExecutor:
    """This process's pool for the jobs of grade messages. Its threads are made on demand:
    at most (messages in hand) x (jobs per message) run at once, which the Celery pool's
    slots already bound."""
    with _lock:
        ex = _state.get("executor")
        if ex is None:
            ex = _state["executor"] = ThreadPoolExecutor(max_workers=4096, thread_name_prefix="judgeq-job")
        return ex  # type: ignore[return-value]


def _run_all(fn: Callable[[Any], Any], items: list[Any]) -> list[Any]:
    """``fn`` over ``items`` concurrently on this process's pool; every call settles before
    this returns (the message is acked or requeued only then), then the first error raises."""
    if len(items) <= 1:
        return [fn(item) for item in items]
    futures = [_executor().submit(fn, item) for item in items]
    wait(futures)
    return [f.result() for f in futures]


def needs_reducer(store: RedisStore, run_id: str) -> bool:
    """A complete run without a report (e.g. the worker that stored the last result died
    before enqueuing the reducer, or the reduce message was lost); the reducer is idempotent."""
    spec = store.spec(run_id)
    return (
        spec is not None
        and store.counters(run_id).get("done", 0) >= spec.total
        and store.report(run_id) is None
    )


HEALTH = JudgeHealth()
"""This worker's judge set-up (checked at start-up; while broken it takes no jobs)."""


def grade(self: Task, run_id: str, indices: list[int], job_ids: list[str] | None = None) -> str:
    """Grade jobs ``indices`` of ``run_id`` concurrently (``job_ids`` are for display only).

    The message is acknowledged after every job's result is stored (or the job is held, see
    the module docstring); a redelivered message skips the jobs that already have one.
    """
    app = self.app
    s = _settings(app)
    try:
        store, contexts = runtime(app)
        state = store.state(run_id)
        if state.get("state") == "paused":
            return Outcome.PAUSED.value  # the jobs stay pending; 'judgeq resume' sends them again
        missing = _unserved(app, _judges_of(store, run_id))
        if missing:
            # not this worker's job: nothing graded, nothing counted; the message goes back
            # for a worker with the key ('judgeq status' says when there is none)
            log.warning(
                "run %s needs judge %s, which this worker cannot call (no key for it, or a server "
                "or module its JUDGEQ_JUDGE_URLS / JUDGEQ_JUDGE_MODULES do not allow): its jobs "
                "go back to the queue",
                run_id,
                ", ".join(missing),
            )
            later = max(1, math.ceil(s.task_retry_delay))  # whole seconds, never a busy loop
            app.send_task(
                GRADE_TASK,
                args=[run_id, list(indices), job_ids or []],
                queue=grade_queue(s.queue, _judges_of(store, run_id)),
                countdown=later,
            )
            return "unserved"
        go, probe = claim_probe(store, run_id, state, s.judge_deadline + 10)
        if not go:  # the run waits for its judge and another message is asking it: later
            _send_again(self, store, run_id, list(indices), state)
            return Outcome.WAIT.value
        gauge = metrics().in_flight if s.metrics_port is not None else None
        if gauge is not None:
            gauge.inc(len(indices))
        try:
            outcomes = process_jobs(store, contexts, run_id, list(indices), _run_all)
        finally:
            if gauge is not None:
                gauge.dec(len(indices))
            if probe is not None:
                store.release(run_id, "probe", probe)
        if probe is not None and not store.state(run_id).get("waiting_since"):
            log.warning("run %s: its judge answers again; the held jobs go on", run_id)
            emit(RunChanged(run_id, "answering"))
        held = [(i, o) for i, o in zip(indices, outcomes, strict=True) if isinstance(o, Held)]
        final = self.request.retries >= s.task_retries
        settled = settle_held(
            store, run_id, held, systemic_limit=s.systemic_failures, final=final, wait_limit=s.judge_wait_max
        )
        done = [o for o in outcomes if not isinstance(o, Held)]
        if (
            Outcome.LAST in done
            or settled is Outcome.LAST
            or (Outcome.DUPLICATE in done and needs_reducer(store, run_id))
        ):
            try:
                app.send_task(REDUCE_TASK, args=[run_id], queue=s.queue)
            except Exception:
                store.release_reducer(run_id)  # a redelivery of this message will try again
                raise
        if settled is Outcome.WAIT:
            _send_again(self, store, run_id, [i for i, _ in held], store.state(run_id))
        if settled is Outcome.RETRY:
            again = [i for i, _ in held]
            log.warning(
                "run %s: %d job(s) held (%s); retry %d of %d",
                run_id,
                len(again),
                held[0][1].reason,
                self.request.retries + 1,
                s.task_retries,
            )
            raise self.retry(args=[run_id, again, []], countdown=_delay(s, self.request.retries))
        return ",".join(sorted({o.value for o in done} | ({settled.value} if held else set())))
    except (Retry, Reject):
        raise
    except STORE_ERRORS as exc:
        # the store or the broker is unreachable or refusing writes: nothing was lost (results
        # are written once); put the message back for another try
        log.warning("store/broker error while grading %s %s: %s; requeueing", run_id, indices, exc)
        raise Reject(str(exc), requeue=True) from None
    except Exception as exc:  # a bug in the task itself: retry, then the jobs become nulls
        log.exception("grading %s %s failed", run_id, indices)
        if self.request.retries < s.task_retries:
            raise self.retry(countdown=_delay(s, self.request.retries)) from None
        why = f"{type(exc).__name__}: {exc}"
        try:
            store = runtime(app)[0]
            held = [(i, Held("internal_error", why, systemic=False)) for i in indices]
            if (
                settle_held(store, run_id, held, systemic_limit=s.systemic_failures, final=True)
                is Outcome.LAST
            ):
                app.send_task(REDUCE_TASK, args=[run_id], queue=s.queue)
        except Exception as again:  # not even a null can be stored: keep the message
            raise Reject(f"{why}; then {again}", requeue=True) from None
        return "internal-error"


def _send_again(
    self: Task, store: RedisStore, run_id: str, indices: list[int], state: dict[str, str]
) -> None:
    """Send jobs of a run waiting for its judge again after :func:`wait_delay`, as a new message
    with this one's retry count: waiting burns no retry."""
    s = _settings(self.app)
    self.app.send_task(
        GRADE_TASK,
        args=[run_id, indices, []],
        queue=grade_queue(s.queue, _judges_of(store, run_id)),
        countdown=wait_delay(state, store.now(), s.task_retry_delay),
        retries=self.request.retries,
    )


def _delay(s: Settings, retries: int) -> int:
    """Seconds before retry ``retries + 1``: ``JUDGEQ_TASK_RETRY_DELAY``, doubling, in whole
    seconds (RabbitMQ's delayed delivery takes whole seconds and refuses a countdown between 0
    and 1: the message was rejected, its jobs left to the stalled-run repair)."""
    delay = s.task_retry_delay * 2**retries
    return math.ceil(delay) if delay > 0 else 0


def reduce(self: Task, run_id: str) -> str:
    """Aggregate a run's results into its report (idempotent; a duplicate message for a run
    that already has its final report is skipped: :func:`reduce_unless_final`)."""
    store = runtime(self.app)[0]
    try:
        report = reduce_unless_final(store, run_id)
        if report is None:
            log.info("run %s already has its final report: a duplicate reduce message, skipped", run_id)
            return "already-reduced"
    except LookupError as exc:
        log.warning("%s", exc)
        return "unknown-run"
    except STORE_ERRORS as exc:
        raise Reject(str(exc), requeue=True) from None
    except Exception as exc:  # a bug: say so where people look, and stop the repair re-sending it
        log.exception("reducing run %s failed", run_id)
        store.set_state(run_id, state="failed", error=f"reducer: {type(exc).__name__}: {exc}")
        return "failed"
    log.info("run %s reduced: %s", run_id, RunReport.of(report).counts.to_dict())
    return "reduced"


def _sent_by(sender: Any, app: Celery) -> bool:
    """Whether a worker signal's sender is a worker of ``app`` (not of another app in the process)."""
    return getattr(sender, "app", None) is app


def json_console(worker: Any) -> None:
    """With JSON logs, what a Celery worker prints outside its logging is logged as JSON lines
    too: no ASCII-art banner (``quiet``: its facts are in the worker's log lines), Python
    warnings (Celery's SecurityWarning) through logging, the shutdown notices Celery writes to
    the terminal itself (``worker: Warm shutdown``) through logging, and what is logged before
    Celery sets its logging up (``celery worker``'s judge check) through a JSON handler."""
    import celery.apps.worker as celery_worker

    worker.quiet = True
    logging.captureWarnings(True)
    say = logging.getLogger("celery.apps.worker")

    def safe_say(msg: str, f: Any = None) -> None:
        say.warning("%s", str(msg).strip())

    celery_worker.safe_say = safe_say
    root = logging.getLogger()
    if not root.handlers:  # (celery worker: what is logged before Celery sets its logging up)
        handler = logging.StreamHandler()
        redact_logs([handler])
        use_json_logs([handler])
        root.addHandler(handler)


def consume_routed(app: Celery, providers: tuple[str, ...]) -> list[str]:
    """Add to the queues this worker consumes (``-Q``, or its default queue), for each base
    queue among them, the queue of every set of the judge providers it can call
    (:func:`~judgeq.pipeline.messages.worker_queues`): a run's grade messages reach only workers
    able to grade it. The queues consumed, in order."""
    queues = app.amqp.queues
    for name in list(queues.consume_from):
        if is_routed(name):
            continue  # a routed queue named on its own (-Q judgeq.openai): as it is
        for routed in worker_queues(name, providers)[1:]:
            queues.select_add(queues[routed])
    return list(queues.consume_from)


def register(app: Celery) -> None:
    """Register the tasks and the worker's lifecycle hooks on ``app``."""
    options: dict[str, Any] = {"bind": True, "acks_late": True, "reject_on_worker_lost": True}
    app.task(name=GRADE_TASK, ignore_result=True, max_retries=None, **options)(grade)
    app.task(name=REDUCE_TASK, ignore_result=True, **options)(reduce)

    def on_init(sender: Any = None, **_: object) -> None:
        if not _sent_by(sender, app):
            return
        for line in unknown_variables():
            log.warning("%s", line)
        _stats.prewarm()  # the reducer's libraries, loaded before the first job rather than during a reduce
        s = _settings(app)
        consumed = consume_routed(app, serves(app))
        if HEALTH.check(s):
            # before the consumer starts: a broken worker never takes a job (not even a prefetched one)
            app.amqp.queues.deselect(consumed)

            def fixed() -> None:
                for queue in consumed:
                    app.control.add_consumer(queue, destination=[sender.hostname])

            HEALTH.watch(s, on_fixed=fixed)

    def on_ready(sender: Any = None, **_: object) -> None:
        if _sent_by(sender, app):
            _on_ready(app, sender)

    def json_logs(logger: Any = None, **_: object) -> None:
        if logger is None:
            return
        redact_logs(list(logger.handlers) or None)  # text or JSON: no secret in a line
        if _settings(app).log_format == "json":
            use_json_logs(list(logger.handlers) or None)

    def console(sender: Any = None, instance: Any = None, **_: object) -> None:
        if (
            instance is not None
            and getattr(instance, "app", None) is app
            and _settings(app).log_format == "json"
        ):
            json_console(instance)

    def on_shutdown(sender: Any = None, **_: object) -> None:
        # a worker stopped on purpose says so at once: status no longer counts it (its
        # heartbeat lived up to 3 health intervals, 30 s and more, after it stopped)
        name = _state.get("worker_name")
        if not _sent_by(sender, app) or not isinstance(name, str):
            return
        STOPPING.set()
        try:
            runtime(app)[0].worker_gone(_settings(app).queue, name)
        except Exception as exc:  # Redis gone: the heartbeat expires by itself
            log.debug("withdrawing the worker heartbeat failed: %s", exc)

    signals.worker_shutdown.connect(on_shutdown, weak=False, dispatch_uid=f"judgeq-shutdown-{id(app)}")
    signals.celeryd_init.connect(console, weak=False, dispatch_uid=f"judgeq-console-{id(app)}")
    signals.after_setup_logger.connect(json_logs, weak=False, dispatch_uid=f"judgeq-json-{id(app)}")
    signals.after_setup_task_logger.connect(json_logs, weak=False, dispatch_uid=f"judgeq-jsont-{id(app)}")
    signals.worker_init.connect(on_init, weak=False, dispatch_uid=f"judgeq-init-{id(app)}")
    signals.worker_ready.connect(on_ready, weak=False, dispatch_uid=f"judgeq-ready-{id(app)}")
    signals.worker_process_init.connect(_reset_after_fork, weak=False, dispatch_uid="judgeq-fork")


HEALTH_INTERVAL = 10.0


def served_text(providers: tuple[str, ...]) -> str:
    """``any Anthropic model and the offline lexical judge`` (the worker's ready line): what the
    providers it can call (:func:`~judgeq.judges.served_providers`) serve."""
    apis = [named(p) for p in providers]
    if all(a.offline for a in apis):
        keys = [str(a.key_variable) for a in map(named, registered()) if a.served_by_key]
        return f"{' and '.join(a.serves_text for a in apis)} only (no {' or '.join(keys)})"
    names = [a.serves_text for a in apis]
    return ", ".join(names[:-1]) + " and " + names[-1] if len(names) > 1 else ", ".join(names)


def _on_ready(app: Celery, consumer: Any) -> None:
    """Log readiness; keep ``JUDGEQ_HEALTH_FILE`` fresh; start the stalled-run repair loop."""
    s = _settings(app)
    providers = serves(app)
    judges = served_text(providers)
    log.warning(
        "judgeq worker ready (redis %s, queue %s; consuming %s); judges it serves: %s",
        s.redis_url.split("@")[-1],
        s.queue,
        ", ".join(app.amqp.queues.consume_from),
        judges,
    )
    name = str(getattr(consumer, "hostname", "") or f"pid{os.getpid()}")
    with _lock:
        _state["worker_name"] = name
    threading.Thread(
        target=_health_loop,
        args=(s, lambda: runtime(app)[0], name, providers),
        name="judgeq-health",
        daemon=True,
    ).start()
    if s.metrics_port is not None:
        try:
            serve_metrics(s.metrics_port, s.listen_address)
        except OSError as exc:  # the port is taken: grading goes on, without metrics
            log.error("cannot serve metrics on port %d: %s", s.metrics_port, exc)
    store, contexts = runtime(app)
    lane = BatchLane(
        store,
        contexts,
        LaneConfig.from_settings(s),
        lambda run_id: app.send_task(REDUCE_TASK, args=[run_id], queue=s.queue),
    )
    threading.Thread(
        target=lane_loop, args=(lane, lambda: HEALTH.broken), name="judgeq-lane", daemon=True
    ).start()
    if s.repair_stalled or s.archive:

        def send(name: str, args: list[Any]) -> None:
            # a run's grade messages to its routed queue, a reducer to the base queue
            queue = grade_queue(s.queue, _judges_of(store, args[0])) if name == GRADE_TASK else s.queue
            app.send_task(name, args=args, queue=queue)

        threading.Thread(
            target=repair_loop,
            args=(s, lambda: runtime(app)[0], send, lambda queue: queue_depth(app, queue)),
            name="judgeq-repair",
            daemon=True,
        ).start()


STOPPING = threading.Event()
"""Set when this worker shuts down: its heartbeat is withdrawn and not renewed."""


def _health_loop(s: Settings, store: Callable[[], RedisStore], name: str, providers: tuple[str, ...]) -> None:
    """Every HEALTH_INTERVAL seconds: touch ``JUDGEQ_HEALTH_FILE`` (a container healthcheck)
    and, while the judge set-up works (the worker consumes), renew this worker's heartbeat in
    Redis, which ``judgeq status`` reads to say whether anyone consumes the queue."""
    path = s.health_file
    while True:
        if path is not None:
            try:
                path.touch()
            except OSError as exc:  # pragma: no cover - a read-only or vanished directory
                log.warning("cannot touch health file %s: %s", path, exc)
        if not HEALTH.broken and not STOPPING.is_set():
            if s.metrics_port is not None:
                metrics().beat()
            try:
                store().worker_heartbeat(s.queue, name, 3 * HEALTH_INTERVAL, serves=providers)
            except Exception as exc:  # Redis restarting: the next beat will do
                log.debug("worker heartbeat failed: %s", exc)
        time.sleep(HEALTH_INTERVAL)


def _reset_after_fork(**_: object) -> None:
    with _lock:
        _state.clear()

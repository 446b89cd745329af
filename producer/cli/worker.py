"""``judgeq worker``: start a Celery worker tuned for I/O-bound judge calls."""

from __future__ import annotations

from typing import Any

import click

from .options import redis_option, settings_from

__all__ = ["worker"]


@click.command(context_settings={"ignore_unknown_options": True})
@click.option(
    "--concurrency",
    "-c",
    type=int,
    default=None,
    help="Concurrent judge calls in this worker [JUDGEQ_CONCURRENCY; default 16].",
)
@click.option(
    "--pool",
    type=click.Choice(["threads", "prefork", "solo"]),
    default=None,
    help="Execution pool [JUDGEQ_POOL; default threads: judge calls wait on the network, "
    "so threads give many concurrent calls per process].",
)
@click.option("--queues", "-Q", default=None, help="Comma-separated queues [JUDGEQ_QUEUE; default judgeq].")
@click.option("--loglevel", "-l", default=None, help="Log level [JUDGEQ_LOG_LEVEL; default INFO].")
@click.option("--hostname", "-n", default=None, help="Worker node name (default: judgeq-PID@HOST).")
@redis_option
@click.argument("celery_args", nargs=-1, type=click.UNPROCESSED)
def worker(celery_args: tuple[str, ...], **flags: Any) -> None:
    """Start a grading worker (extra arguments are passed to 'celery worker')."""
    import atexit
    import logging
    import os
    import shutil
    import tempfile

    settings = settings_from(**flags)
    pool = flags["pool"] or settings.pool
    if (
        settings.metrics_port is not None
        and pool == "prefork"
        and not os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    ):
        # prefork children count in files the parent sums (prometheus_client's multiprocess
        # mode); the variable must be set before prometheus_client is first imported
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = made = tempfile.mkdtemp(prefix="judgeq-metrics-")
        atexit.register(shutil.rmtree, made, ignore_errors=True)

    from judgeq.telemetry.jsonlog import use_json_logs
    from judgeq.telemetry.redact import redact_logs
    from judgeq.workers.celery_app import celery_slots, create_app, unique_nodename

    level = (flags["loglevel"] or settings.log_level).upper()
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    redact_logs()
    if settings.log_format == "json":
        use_json_logs()
    # HTTP client and SDK chatter (a line per request) stays out of worker logs, whatever
    # the level: judgeq logs what matters per job itself.
    for noisy in ("httpx2", "httpx", "httpcore", "httpcore2", "anthropic"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    # the pool in the app's configuration too: Celery takes an explicit '--pool prefork' for
    # its default and would use the configured pool instead
    settings = settings.model_copy(update={"pool": pool})
    app = create_app(settings)
    argv = [
        "worker",
        f"--pool={pool}",
        f"--concurrency={celery_slots(settings.concurrency, settings.jobs_per_message, pool)}",
        f"--queues={flags['queues'] or settings.queue}",
        f"--loglevel={level}",
        "--events" if settings.task_events else "--without-heartbeat",
        "--without-gossip",
        "--without-mingle",
    ]
    # a unique node name given to Celery itself, so that its %n in --pidfile/--statedb is it too
    argv.append(f"--hostname={flags['hostname'] or unique_nodename()}")
    app.worker_main(argv=[*argv, *celery_args])

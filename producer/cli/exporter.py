"""``judgeq exporter``: serve the cluster's Redis-side figures to Prometheus
(:mod:`judgeq.producer.exporter`), once for the whole cluster."""

from __future__ import annotations

import signal
import threading
from typing import Any

import click

from .options import redis_option, settings_from

__all__ = ["exporter"]


@click.command()
@click.option(
    "--port", type=click.IntRange(0, 65535), default=None, help="Port [JUDGEQ_EXPORTER_PORT; default 9808]."
)
@click.option("--address", default=None, help="Listen address [JUDGEQ_LISTEN_ADDRESS; default 127.0.0.1].")
@click.option(
    "--grace", type=click.FloatRange(min=0), default=300.0, show_default=True,
    help="Seconds a finished run stays exported (its final figures get scraped).",
)  # fmt: skip
@click.option("--queue", default=None, help="The queue whose depth is exported [JUDGEQ_QUEUE].")
@redis_option
def exporter(port: int | None, address: str | None, grace: float, queue: str | None, **flags: Any) -> None:
    """Export queue depth, run progress and judge budgets to Prometheus (/metrics)."""
    from judgeq.pipeline.messages import all_queues
    from judgeq.producer.exporter import ClusterCollector, serve_exporter
    from judgeq.store.redis import RedisStore
    from judgeq.workers.broker import queues_depth
    from judgeq.workers.celery_app import create_app

    settings = settings_from(**flags)
    name = queue or settings.queue
    app = create_app(settings)
    store = RedisStore.open(settings)
    # what waits for the fleet: its base queue and every routed queue (judgeq.openai, ...)
    queues = all_queues(name)
    collector = ClusterCollector(store, name, lambda: queues_depth(app, queues), grace=grace)
    where = settings.exporter_port if port is None else port
    address = address or settings.listen_address
    try:
        server = serve_exporter(collector, where, address)
    except OSError as exc:
        raise click.ClickException(f"cannot serve on {address}:{where}: {exc.strerror or exc}") from None
    click.echo(f"judgeq exporter on http://{address}:{server.server_port}/metrics (queue {name!r})", err=True)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        stop.wait()
    except KeyboardInterrupt:
        pass
    finally:
        server.shutdown()

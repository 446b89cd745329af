"""What the broker says of a queue (used by the workers' repair loop and the producer's
backpressure alike; it needs a Celery app, not the workers' tasks)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterable

from celery import Celery

__all__ = ["queue_depth", "queues_depth"]


def queue_depth(app: Celery, queue: str) -> int:
    """Messages waiting in ``queue`` on the broker (not those reserved by workers)."""
    with app.connection_for_write() as conn:
        try:
            ok = conn.default_channel.queue_declare(queue, passive=True)
        except conn.channel_errors:
            return 0  # never declared: nothing waiting
        return int(ok.message_count)


def queues_depth(app: Celery, queues: Iterable[str]) -> int:
    """Messages waiting in all of ``queues`` (:func:`queue_depth`'s sum) over one connection:
    a fleet's every routed queue is a few hundred names, asked on each scrape of the exporter
    (a connection each took longer than a 1 s scrape allows on a loaded machine)."""
    total = 0
    with app.connection_for_write() as conn:
        channel = conn.channel()
        try:
            for queue in queues:
                try:
                    total += int(channel.queue_declare(queue, passive=True).message_count)
                except conn.channel_errors:  # never declared: nothing waiting
                    # (an AMQP broker closes the channel on a failed passive declare)
                    with contextlib.suppress(Exception):
                        channel.close()
                    channel = conn.channel()
        finally:
            with contextlib.suppress(Exception):
                channel.close()
    return total

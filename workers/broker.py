"""What the broker says of a queue (used by the workers' repair loop and the producer's
backpressure alike; it needs a Celery app, not the workers' tasks)."""

from __future__ import annotations

from celery import Celery

__all__ = ["queue_depth"]


def queue_depth(app: Celery, queue: str) -> int:
    """Messages waiting in ``queue`` on the broker (not those reserved by workers)."""
    with app.connection_for_write() as conn:
        try:
            ok = conn.default_channel.queue_declare(queue, passive=True)
        except conn.channel_errors:
            return 0  # never declared: nothing waiting
        return int(ok.message_count)

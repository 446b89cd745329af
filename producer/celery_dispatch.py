"""Sending grading messages through Celery (the distributed mode's :class:`Dispatcher`)."""

from __future__ import annotations

from celery import Celery
from judgeq.workers.app import GRADE_TASK, REDUCE_TASK


class CeleryDispatcher:
    """Publishes one message per job on one reused broker connection."""

    def __init__(self, app: Celery, queue: str) -> None:
        self.app = app
        self.queue = queue

    def send(self, run_id: str, items: list[tuple[int, str]]) -> None:
        with self.app.producer_or_acquire() as producer:
            for index, job_id in items:
                self.app.send_task(
                    GRADE_TASK, args=[run_id, index, job_id], queue=self.queue, producer=producer
                )

    def depth(self) -> int:
        """Messages waiting in the queue (not counting those reserved by workers)."""
        with self.app.connection_for_write() as conn:
            try:
                ok = conn.default_channel.queue_declare(self.queue, passive=True)
            except conn.channel_errors:
                return 0  # not declared yet: nothing waiting
            return int(ok.message_count)

    def reduce(self, run_id: str) -> None:
        self.app.send_task(REDUCE_TASK, args=[run_id], queue=self.queue)

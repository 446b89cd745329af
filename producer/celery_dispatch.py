"""Sending grading messages through Celery (the distributed mode's :class:`Dispatcher`)."""

from __future__ import annotations

import json
from collections.abc import Sequence

from celery import Celery

from judgeq.pipeline.messages import GRADE_TASK, REDUCE_TASK, grade_queue
from judgeq.workers.broker import queue_depth

__all__ = ["ARGSREPR_CHARS", "BATCH_COMMANDS", "CeleryDispatcher"]

ARGSREPR_CHARS = 1024
BATCH_COMMANDS = 500


class CeleryDispatcher:
    """Publishes one run's grade messages of up to ``jobs_per_message`` jobs on one reused
    connection, to the queue of the judge providers it needs (``judges``: its
    ``(provider, model)``; :func:`~judgeq.pipeline.messages.grade_queue`), and its reducer to
    the base ``queue``."""

    def __init__(
        self,
        app: Celery,
        queue: str,
        jobs_per_message: int = 8,
        judges: Sequence[tuple[str, str]] | None = None,
    ) -> None:
        self.app = app
        self.base = queue
        self.queue = grade_queue(queue, judges or [])
        self.jobs_per_message = max(1, jobs_per_message)

    def send(self, run_id: str, items: list[tuple[int, str]]) -> None:
        k = self.jobs_per_message
        with self.app.producer_or_acquire() as producer, producer.batch(max_size=BATCH_COMMANDS):
            # kombu's publish batch: the Redis transport sends the chunk's messages in one
            # pipeline (flushed on leaving the block; a transport without it publishes at once)
            for i in range(0, len(items), k):
                group = items[i : i + k]
                args = [run_id, [index for index, _ in group], [job_id for _, job_id in group]]
                self.app.send_task(
                    GRADE_TASK,
                    args=args,
                    # what Flower shows, made by the json module in C (Celery's safe repr of
                    # the same list cost more than the rest of the publish)
                    argsrepr=json.dumps(args)[:ARGSREPR_CHARS],
                    kwargsrepr="{}",
                    queue=self.queue,
                    producer=producer,
                )

    def depth(self) -> int:
        """Jobs waiting in the queue (messages x jobs per message; not those reserved)."""
        return queue_depth(self.app, self.queue) * self.jobs_per_message

    def resend(self, run_id: str, indices: list[int], job_ids: list[str]) -> None:
        """Send jobs again (resume, repair); a job with a result is skipped by the worker."""
        self.send(run_id, list(zip(indices, job_ids, strict=True)))

    def reduce(self, run_id: str) -> None:
        self.app.send_task(REDUCE_TASK, args=[run_id], queue=self.base)

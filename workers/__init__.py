"""Celery workers: ``celery -A judgeq.workers worker`` (or ``judgeq worker``).

The app is configured from ``JUDGEQ_*`` variables when this package is imported.
"""

from .app import GRADE_TASK, REDUCE_TASK, create_app

app = create_app()

__all__ = ["GRADE_TASK", "REDUCE_TASK", "app", "create_app"]

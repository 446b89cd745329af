"""Celery workers: ``judgeq worker``, or ``celery -A judgeq.workers worker``.

Importing this package builds nothing: the Celery app is made by
:func:`~judgeq.workers.celery_app.create_app`, which the entry points call with their
settings.  ``celery -A judgeq.workers`` reads the ``app`` attribute, built from the
``JUDGEQ_*`` environment on first access (once per process).
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

from judgeq.pipeline.messages import GRADE_TASK, REDUCE_TASK

from .celery_app import create_app

if TYPE_CHECKING:
    from celery import Celery

__all__ = ["GRADE_TASK", "REDUCE_TASK", "app", "create_app"]

_lock = threading.Lock()
_app: Celery | None = None


def __getattr__(name: str) -> Any:
    """``judgeq.workers.app``: the app of ``celery -A judgeq.workers``, built on first access."""
    global _app
    if name != "app":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    with _lock:
        if _app is None:
            _app = create_app()
        return _app

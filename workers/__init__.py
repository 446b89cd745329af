"""Celery workers: ``celery -A judgeq.workers worker`` (or ``judgeq worker``).

The app is configured from ``JUDGEQ_*`` variables when this package is imported.
"""

import os
import sys

from judgeq._settings import load_settings

from .app import GRADE_TASK, REDUCE_TASK, create_app


def _flower_auth_guard() -> None:
    """``celery -A judgeq.workers flower`` never serves without auth unless asked to.

    Credentials come from JUDGEQ_FLOWER_USER/JUDGEQ_FLOWER_PASSWORD (passed to Flower as
    FLOWER_BASIC_AUTH), or Flower's own FLOWER_BASIC_AUTH / --basic-auth / OAuth settings;
    JUDGEQ_FLOWER_NO_AUTH=true runs it open.
    """
    argv = sys.argv[1:]
    if "flower" not in argv:
        return
    settings = load_settings()
    if settings.flower_no_auth or os.environ.get("FLOWER_BASIC_AUTH") or os.environ.get("FLOWER_AUTH"):
        return
    if any(a.startswith(("--basic-auth", "--auth", "--basic_auth")) for a in argv):
        return
    if settings.flower_user and settings.flower_password:
        os.environ["FLOWER_BASIC_AUTH"] = (
            f"{settings.flower_user}:{settings.flower_password.get_secret_value()}"
        )
        return
    sys.exit(
        "judgeq: error: Flower would run without authentication. Set JUDGEQ_FLOWER_USER and "
        "JUDGEQ_FLOWER_PASSWORD (or FLOWER_BASIC_AUTH=user:password), or JUDGEQ_FLOWER_NO_AUTH=true."
    )


_flower_auth_guard()
app = create_app()

__all__ = ["GRADE_TASK", "REDUCE_TASK", "app", "create_app"]

"""How long redelivery and repair take, derived from the settings (pure: no Celery, no Redis).

* :func:`visibility_timeout` — when an unacknowledged message is redelivered (default
  2 x judge deadline + 60 s, so a message waiting in a worker's prefetch buffer for up to one
  deadline is not redelivered while it waits);
* :func:`restore_interval` — how often workers sweep for such messages;
* :func:`stall_after` — how long a run may make no progress before its pending jobs (or its
  missing report) count as lost: one redelivery plus two sweeps plus a margin;
* :func:`check_interval` — how often each worker looks for stalled runs.

The producer (``finalize``, ``status``) and the workers (the repair loop, the Celery app)
share these, so both sides agree on when a run is stalled.
"""

from __future__ import annotations

from judgeq.settings import Settings

__all__ = ["check_interval", "restore_interval", "stall_after", "visibility_timeout"]


def visibility_timeout(settings: Settings) -> float:
    if settings.visibility_timeout is not None:
        return settings.visibility_timeout
    return 2 * settings.judge_deadline + 60.0


def restore_interval(settings: Settings) -> float:
    """Seconds between sweeps that requeue messages past the visibility timeout."""
    return max(1.0, min(10.0, visibility_timeout(settings) / 6))


def stall_after(settings: Settings) -> float:
    """Seconds without progress after which a run counts as stalled (350 s by default)."""
    vt = visibility_timeout(settings)
    return vt + 2 * restore_interval(settings) + min(30.0, vt)


def check_interval(settings: Settings) -> float:
    """Seconds between two stalled-run checks of one worker (at most 30)."""
    return max(1.0, min(30.0, stall_after(settings) / 3))

"""Is this worker's judge set-up usable?  Checked at start-up; while it is broken the worker
takes no jobs (it stops consuming its queue) and checks again every
``JUDGEQ_JUDGE_CHECK_INTERVAL`` seconds, consuming again once it works.

The judge checked is the worker's default judge (:func:`judgeq.judges.default_judge`, the
same rule as ``run`` and ``submit``: ``JUDGEQ_JUDGE``, else the Anthropic default model with
a key, else the offline lexical judge). A worker without a key serves the offline judge only;
a grade message of a run whose judge it cannot call goes back to the queue for a worker that
can (``judgeq status`` says when none does). ``JUDGEQ_JUDGE=anthropic:MODEL`` without a key
is broken, as is an OpenAI judge without ``OPENAI_API_KEY`` or a server or module the worker
does not allow. The check is the judge's own preflight (``check``: Anthropic's Models API, no
tokens spent, one Messages token where that API cannot tell; OpenAI's model record or list):
a refused key or an unknown model is broken; an unreachable API is not (calls then fail per
job and are retried).  A run's own model is checked by its producer's preflight, and a run
whose calls fail systemically pauses (:func:`judgeq.pipeline.stages.settle_held`).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from judgeq.errors import ConfigError, JudgeError
from judgeq.judges import can_serve, default_judge, judge_factory
from judgeq.settings import Settings

__all__ = ["JudgeHealth", "judge_setup_problem"]

log = logging.getLogger("judgeq.worker")


def judge_setup_problem(settings: Settings) -> str | None:
    """Why the worker's judge cannot work, or None when it can (or cannot be told now)."""
    try:
        spec, _ = default_judge(settings)
    except ConfigError as err:
        return f"JUDGEQ_JUDGE: {err}"
    if spec.api.offline:
        return None
    if not can_serve(settings, spec.provider, spec.model):
        need = spec.api.serve_needs or "its set-up"
        # (leaving JUDGEQ_JUDGE out, a worker with no key serves the offline judge)
        alone = (
            " or JUDGEQ_JUDGE left out (it then serves the offline judge)" if spec.api.served_by_key else ""
        )
        return (
            f"JUDGEQ_JUDGE={settings.judge} but this worker cannot call it: it needs {need}{alone}; "
            "then restart it"
        )
    try:
        judge = judge_factory(settings)(spec.provider, spec.model)
    except ConfigError as err:
        return f"JUDGEQ_JUDGE={settings.judge}: {err}"
    if not judge.can_check:  # a custom judge without a preflight: its first calls tell
        return None
    try:
        judge.check(timeout=settings.judge_timeout)
    except JudgeError as exc:
        if exc.systemic:
            return f"judge {spec} is unusable ({exc.reason}: {exc})"
        log.warning("judge check of %s failed (%s); taking jobs anyway", spec, exc)
    return None


class JudgeHealth:
    """This process's view of its judge set-up."""

    def __init__(self, check: Callable[[Settings], str | None] = judge_setup_problem) -> None:
        self._check = check
        self.problem: str | None = None
        self._watching = threading.Event()

    @property
    def broken(self) -> bool:
        return self.problem is not None

    def check(self, settings: Settings) -> str | None:
        self.problem = self._check(settings)
        if self.problem:
            log.error("judge set-up broken: %s. This worker takes no jobs until it works.", self.problem)
        return self.problem

    def watch(self, settings: Settings, on_fixed: Callable[[], object]) -> None:
        """Check again every interval in a thread; call ``on_fixed`` once it works."""
        if self._watching.is_set():
            return
        self._watching.set()

        def loop() -> None:
            while self.broken:
                threading.Event().wait(settings.judge_check_interval)
                try:
                    problem = self._check(settings)
                except Exception as exc:  # keep watching through anything
                    log.warning("judge check failed: %s", exc)
                    continue
                if problem is None:
                    self.problem = None
                    log.warning("judge set-up works now: taking jobs")
                    on_fixed()
            self._watching.clear()

        threading.Thread(target=loop, name="judgeq-judge-check", daemon=True).start()

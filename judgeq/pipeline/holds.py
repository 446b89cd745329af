"""What becomes of a job its judge could not grade, decided by the state of the whole run, not
the job alone (pure policy: no Celery, no Redis; the store is the :class:`~judgeq.store.base.Store`
protocol).

* :func:`hold_kind` — a judge failure is the job's own null while the judge answers other jobs
  of the run (:func:`judge_answering`); else it is the set-up's (a refused key, a 400 every
  call gets: toward the pause) or the judge is unavailable to everyone (an outage, a 429 storm:
  the run waits for it);
* :class:`Held` — a job not graded for such a reason: nothing stored;
* :func:`claim_probe` / :func:`wait_delay` — while a run waits for its judge, one message at a
  time asks it, the others come back later without counting a retry.

What a held job becomes (pause, wait, retry, null) is :func:`judgeq.pipeline.stages.settle_held`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from judgeq.errors import SYSTEMIC_REASONS, UNAVAILABLE_REASONS
from judgeq.grading.result import Result
from judgeq.store.base import Store

__all__ = [
    "ANSWER_FLOOR_S",
    "REACHABLE_FOR_S",
    "Held",
    "claim_probe",
    "hold_kind",
    "judge_answering",
    "wait_delay",
]


@dataclass(frozen=True, slots=True)
class Held:
    """A job not graded for a reason outside it; nothing was stored (what it becomes:
    :func:`judgeq.pipeline.stages.settle_held`).

    ``reason`` is the null it ends as if retries run out (``result``, when the judge was
    called: that null, with its attempts and latency); ``streak`` the run's systemic failures
    in a row so far (0 when not systemic); ``wait``: the judge answered no one (an outage):
    the job waits for it, its retries untouched."""

    reason: str
    message: str
    systemic: bool
    streak: int = 0
    result: Result | None = None
    wait: bool = False


ANSWER_FLOOR_S = 2.0
"""The shortest look back for another job's answer (a call refused at once has failed for no
time): a judge that answered any job of the run this recently, or since the failed job's first
failed attempt, is answering."""

REACHABLE_FOR_S = 15.0
"""How long a judge's check (:meth:`judgeq.pipeline.stages.Contexts.reachable`) is trusted, per process."""


def hold_kind(reason: str | None, answering: bool, *, own_refusal: bool = False) -> str | None:
    """What a judge failure ending a job says, given whether the judge is ``answering`` other
    jobs of the run: ``"pause"`` (the set-up is broken: held, counted toward the pause),
    ``"wait"`` (the judge is unavailable to everyone: held while the run waits for it), or
    None (the job's own null, stored).

    A refused key, credit or model is the set-up's whatever else happens. An
    ``invalid_request`` is the job's own while the judge answers others, else the set-up's (a
    gateway answering 400 to a wrong key for every job). A job out of attempts
    (:data:`~judgeq.errors.UNAVAILABLE_REASONS`) is its own while the judge answers others (or
    a 429 the budget judged its own, ``own_refusal``), else the judge is down or refusing
    everyone (an outage, a 429 storm past the deadline). Before it waits for anything but 429s
    the caller asks the judge itself (:meth:`judgeq.pipeline.stages.Contexts.reachable`): one
    that answers its check is up (the tail of a run, with no other job left to answer, tells
    that way)."""
    if reason in SYSTEMIC_REASONS:
        return "pause"
    if answering or reason is None:
        return None
    if reason == "invalid_request":
        return "pause"
    if reason in UNAVAILABLE_REASONS and not (reason == "rate_limited" and own_refusal):
        return "wait"
    return None


def judge_answering(state: dict[str, str], now: float, failing_s: float) -> bool:
    """Whether the judge answered a job of the run since the failed job's first failed attempt,
    ``failing_s`` ago (at least :data:`ANSWER_FLOOR_S`); ``state``: the run's state, with
    ``last_answer_at`` on the store's clock like ``now``."""
    try:
        last = float(state.get("last_answer_at") or 0)
    except ValueError:
        return False
    return bool(last) and now - last <= max(ANSWER_FLOOR_S, failing_s)


def claim_probe(store: Store, run_id: str, state: dict[str, str], seconds: float) -> tuple[bool, str | None]:
    """May a message of ``run_id`` (whose ``state`` was just read) call the judge? Always, unless
    the run waits for its judge: then one message at a time, the probe, shared by every worker
    for up to ``seconds`` (its lock's token, to release when it ends); the others are sent again
    after :func:`wait_delay`, nothing called, nothing counted."""
    if not state.get("waiting_since"):
        return True, None
    token = store.claim(run_id, "probe", seconds)
    return token is not None, token


def wait_delay(state: dict[str, str], now: float, floor: float = 1.0) -> int:
    """Seconds before a held job of a run waiting for its judge is sent again: a quarter of the
    wait so far, at least ``floor`` (and 1), at most 30; whole seconds (RabbitMQ's delays)."""
    try:
        waited = now - float(state.get("waiting_since") or now)
    except ValueError:
        waited = 0.0
    return math.ceil(min(30.0, max(floor, 1.0, waited / 4)))

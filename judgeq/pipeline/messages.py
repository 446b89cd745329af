"""The messages between the producer and the workers: task names and their arguments.

Both sides import this (the producer publishes, the workers register and re-send), so neither
imports the other's code to agree on a name. A message carries ids, never a secret nor a job's
text (the store holds the jobs):

* :data:`GRADE_TASK` — ``[run_id, [index, ...], [job_id, ...]]``: grade these jobs of the run
  (the ids are for people reading Flower; the indices are what counts);
* :data:`REDUCE_TASK` — ``[run_id]``: aggregate the run's results into its report.

**Routing.** A mixed fleet (workers with an Anthropic key only, a GPU box serving a local model,
...) never bounces a job: a run's grade messages go to the queue of the judge providers it needs
(:func:`grade_queue`: ``judgeq.openai``, ``judgeq.anthropic+openai`` for a council of both), and
each worker consumes the base queue (reduce messages, runs of the offline judge alone) and one
queue per set of the providers it can call (:func:`worker_queues`).
"""

from __future__ import annotations

from collections.abc import Iterable
from itertools import combinations

from judgeq.judges.providers import is_offline, registered

__all__ = ["GRADE_TASK", "REDUCE_TASK", "all_queues", "grade_queue", "is_routed", "routed", "worker_queues"]

GRADE_TASK = "judgeq.grade"
REDUCE_TASK = "judgeq.reduce"


def routed() -> tuple[str, ...]:
    """The providers a worker may not be able to call (a key, an allowed server or module):
    every registered one that calls an API; their runs are routed. Every worker serves the
    offline ones (``lexical``)."""
    return tuple(p for p in registered() if not is_offline(p))


def grade_queue(base: str, judges: Iterable[tuple[str, str]]) -> str:
    """The queue a run's grade messages go to: ``base`` and the providers of its ``judges``
    (``(provider, model)``) that are routed, sorted and joined with ``+``
    (``judgeq.anthropic+openai``); ``base`` itself for a run of the offline judge alone."""
    need = sorted({provider for provider, _ in judges if provider in routed()})
    return f"{base}.{'+'.join(need)}" if need else base


def worker_queues(base: str, providers: Iterable[str]) -> list[str]:
    """The queues a worker that can call ``providers`` consumes: ``base`` first, then the queue
    of every set of them (a run needing any of those sets is one it can grade)."""
    served = sorted({p for p in providers if p in routed()})
    sets = (c for n in range(1, len(served) + 1) for c in combinations(served, n))
    return [base, *(grade_queue(base, ((p, "") for p in c)) for c in sets)]


def is_routed(queue: str) -> bool:
    """Whether ``queue`` is a routed queue (``judgeq.openai``), not a base one."""
    base, dot, need = queue.rpartition(".")
    return bool(base and dot) and all(p in routed() for p in need.split("+"))


def all_queues(base: str) -> list[str]:
    """Every queue a fleet on ``base`` may use (what waits in them is what waits for it)."""
    return worker_queues(base, routed())

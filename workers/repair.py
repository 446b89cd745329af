"""Re-enqueue the jobs of stalled runs: the backstop for messages lost in transit.

kombu's Redis transport takes a message off the queue (BRPOP) before recording it as
unacknowledged; a worker killed with SIGKILL in between loses that message (seen in
``benchmarks/chaos.py``: 2 messages in 20 kills). Every job keeps its payload in Redis until
its result is stored, so no job is ever unknowable: a run that has made no progress for
longer than a redelivery can take (visibility timeout + two sweeps + a margin: 380 s with the
defaults), with an empty
queue and enqueuing finished, gets its pending jobs sent again. Results are written once, so
a job sent twice is still counted once.

Every worker checks every ``check_interval`` seconds; a per-run lock in Redis lets one worker
repair a run per stall period.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from judgeq._settings import Settings

from .app import restore_interval, visibility_timeout
from .store import RedisStore

log = logging.getLogger("judgeq.worker")

Send = Callable[[str, list[int], list[str]], None]


def stall_after(settings: Settings) -> float:
    """Seconds without progress after which a run counts as stalled."""
    vt = visibility_timeout(settings)
    return vt + 2 * restore_interval(settings) + min(30.0, vt)


def check_interval(settings: Settings) -> float:
    return max(1.0, min(30.0, stall_after(settings) / 3))


def repair_stalled_runs(
    store: RedisStore,
    settings: Settings,
    send: Send,
    depth: Callable[[], int],
    *,
    now: float | None = None,
    chunk: int = 8,
) -> dict[str, int]:
    """Re-send the pending jobs of every stalled run; {run_id: jobs re-sent}.

    ``depth`` counts the messages waiting on the broker (which may not be the store)."""
    now = time.time() if now is None else now
    if depth():
        return {}  # messages are still waiting: nothing can be declared lost yet
    limit = stall_after(settings)
    repaired: dict[str, int] = {}
    for run_id in store.runs(limit=200):
        state = store.state(run_id)
        if state.get("state") != "running" or state.get("enqueue") != "done":
            continue  # finished, unknown, or a producer is still enqueuing
        spec = store.spec(run_id)
        if spec is None:
            continue
        counters = store.counters(run_id)
        if counters.get("done", 0) >= spec.total:
            continue
        last = store.last_progress(run_id) or float(state.get("started_epoch") or now)
        if now - last < limit or not store.claim(run_id, "repair", limit):
            continue
        indices = store.pending_indices(run_id)
        if not indices:
            continue
        for i in range(0, len(indices), chunk):
            group = indices[i : i + chunk]
            send(run_id, group, store.job_ids(run_id, group))
        log.warning(
            "run %s made no progress for %.0f s with %d job(s) without a result and an empty "
            "queue: re-enqueued them (a message was lost in transit; results are counted once)",
            run_id,
            now - last,
            len(indices),
        )
        repaired[run_id] = len(indices)
    return repaired

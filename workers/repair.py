"""The workers' backstop for messages lost in transit: pending jobs and missing reports.

kombu's Redis transport takes a message off the queue (BRPOP) before recording it as
unacknowledged; a worker killed with SIGKILL in between loses that message (seen in
``benchmarks/chaos.py``: 2 messages in 20 kills). Every job keeps its payload in Redis until
its result is stored, so no job is ever unknowable. Each worker checks every
:func:`~judgeq.pipeline.timing.check_interval` seconds:

* a running run that has made no progress for :func:`~judgeq.pipeline.timing.stall_after` seconds
  (visibility timeout + two sweeps + a margin: 350 s with the defaults; on Redis's clock, not
  the worker's), with enqueuing finished, gets its pending jobs sent again while the queue is
  empty (a waiting message may be one of them);
* a run whose every job is stored but which has no report that long after its last result
  (its reduce message was lost, or the worker reducing it died) gets its reducer sent again,
  whatever waits in the queue (the reducer is idempotent and one holds a run at a time): every
  run gets its report within stall_after + check_interval (380 s by default) of its last
  result, with no process waiting on it, however busy the workers are with other runs.

Results are written once and the reducer is idempotent, so a job or a reducer sent twice is
still counted once. A per-run lock in Redis lets one worker repair a run per stall period.
Paused runs are left alone (``judgeq resume`` sends their jobs), and so are runs with jobs in
the Message Batches lane (a batch may take hours; :mod:`judgeq.pipeline.batch_lane` watches it).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from typing import Any

from judgeq.pipeline.messages import GRADE_TASK, REDUCE_TASK, grade_queue
from judgeq.pipeline.timing import check_interval, stall_after
from judgeq.settings import Settings
from judgeq.store.archive import ENDED, archive_run
from judgeq.store.redis import RedisStore

__all__ = ["Send", "archive_ended_runs", "repair_loop", "repair_stalled_runs"]

log = logging.getLogger("judgeq.worker")

Send = Callable[[str, list[Any]], None]
"""``send(task_name, args)``: publish a task message."""


def repair_stalled_runs(
    store: RedisStore,
    settings: Settings,
    send: Send,
    depth: Callable[[str], int],
    *,
    now: float | None = None,
    chunk: int = 8,
) -> dict[str, int]:
    """Re-send the pending jobs of every stalled run, and the reducer of every complete run
    without a report; {run_id: jobs re-sent (0: the reducer)}.

    ``depth(queue)`` counts the messages waiting in a queue on the broker (which may not be the
    store): a run's own queue (:func:`~judgeq.pipeline.messages.grade_queue`) is asked. ``now``
    defaults to the store's clock (Redis's ``TIME``), the clock ``last_done_at`` and
    ``started_epoch`` are written on: a worker whose own clock runs ahead re-sends no healthy
    run's jobs."""
    now = store.now() if now is None else now
    waiting: dict[str, int] = {}  # messages on the broker per queue, asked once, when a run needs to know
    limit = stall_after(settings)
    repaired: dict[str, int] = {}
    for run_id in store.runs(limit=200):
        state = store.state(run_id)
        if state.get("state") != "running" or state.get("enqueue") != "done":
            continue  # finished, paused, unknown, or a producer is still enqueuing
        spec = store.spec(run_id)
        if spec is None:
            continue
        last = store.last_progress(run_id) or float(state.get("started_epoch") or now)
        if now - last < limit:
            continue
        complete = store.counters(run_id).get("done", 0) >= spec.total
        if complete:
            if store.report(run_id) is None and store.claim(run_id, "repair", limit):
                send(REDUCE_TASK, [run_id])
                log.warning(
                    "run %s has every result but no report %.0f s after its last one: "
                    "sent its reducer again (the reduce message was lost)",
                    run_id,
                    now - last,
                )
                repaired[run_id] = 0
            continue
        if spec.lane == "batch" and store.lane_counts(run_id)[1]:
            continue  # jobs wait in the Message Batches lane (hours, at worst): not stalled
        if not _served(store, settings.queue, spec.judges):
            continue  # no live worker can call the run's judge: its messages bounce, none is lost
        queue = grade_queue(settings.queue, spec.judges)
        if queue not in waiting:
            waiting[queue] = depth(queue)
        if waiting[queue]:
            continue  # messages are still waiting: no job can be declared lost yet
        if not store.claim(run_id, "repair", limit):
            continue
        indices = store.pending_indices(run_id)
        if not indices:
            continue
        for i in range(0, len(indices), chunk):
            group = indices[i : i + chunk]
            send(GRADE_TASK, [run_id, group, store.job_ids(run_id, group)])
        log.warning(
            "run %s made no progress for %.0f s with %d job(s) without a result and an empty "
            "queue: re-enqueued them (a message was lost in transit; results are counted once)",
            run_id,
            now - last,
            len(indices),
        )
        repaired[run_id] = len(indices)
    return repaired


def _served(store: RedisStore, queue: str, judges: Sequence[tuple[str, str]]) -> bool:
    """Whether a live worker of ``queue`` says it can call every judge provider of a run (a
    worker that does not say, an older one, is taken as able)."""
    workers = store.worker_judges(queue)
    needs = {provider for provider, _ in judges}
    return not workers or any(provs is None or needs <= set(provs) for provs in workers.values())


def archive_ended_runs(store: RedisStore, settings: Settings, *, now: float | None = None) -> list[str]:
    """With ``JUDGEQ_ARCHIVE``: move every run whose report is older than
    ``JUDGEQ_ARCHIVE_AFTER`` seconds out of Redis into ``JUDGEQ_RESULTS_DIR`` (one worker per
    run, under a lock); the runs archived. ``now`` defaults to the store's clock, the one the
    reducer writes ``finished_at`` on."""
    if not settings.archive:
        return []
    now = store.now() if now is None else now
    done = []
    for run_id in store.runs(limit=1000):
        state = store.state(run_id)
        if state.get("state") not in ENDED:
            continue
        finished = _epoch_of(state.get("finished_at"))
        if finished is None or now - finished < settings.archive_after:
            continue
        if not store.claim(run_id, "archive", 600):
            continue
        try:
            folder = archive_run(store, run_id, settings.results_dir)
        except LookupError:
            continue
        log.info("run %s archived to %s (JUDGEQ_ARCHIVE)", run_id, folder)
        done.append(run_id)
    return done


def _epoch_of(iso: str | None) -> float | None:
    from datetime import datetime

    try:
        return datetime.fromisoformat((iso or "").replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def repair_loop(
    settings: Settings, store: Callable[[], RedisStore], send: Send, depth: Callable[[str], int]
) -> None:
    """Run :func:`repair_stalled_runs` (and, with ``JUDGEQ_ARCHIVE``, :func:`archive_ended_runs`)
    every check interval, forever (a worker's thread)."""
    while True:
        time.sleep(check_interval(settings))
        try:
            if settings.repair_stalled:
                repair_stalled_runs(store(), settings, send, depth)
            archive_ended_runs(store(), settings)
        except Exception as exc:  # keep the loop alive through Redis restarts and the like
            log.warning("stalled-run check failed: %s", exc)

"""Embedded mode (``judgeq run``): the whole pipeline in one process, no services.

An in-process queue stands in for the broker and a :class:`~judgeq.MemoryStore` for Redis;
worker threads run the same stage functions the Celery tasks run
(:func:`~judgeq.pipeline.stages.process_job`, :func:`~judgeq.pipeline.stages.reduce_run`), so for the same
batch, rubric and a deterministic judge, ``run`` and ``submit`` give the same report apart
from timings and ids.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

from judgeq.errors import JudgeqError, RunPaused
from judgeq.judges import budget_factory
from judgeq.judges.base import Judge
from judgeq.pipeline.batch_lane import BatchLane, LaneConfig
from judgeq.pipeline.stages import (
    Contexts,
    Held,
    Outcome,
    cancel_run,
    claim_probe,
    process_job,
    reduce_run,
    settle_held,
    wait_delay,
)
from judgeq.ratelimit import MemoryBudget
from judgeq.report.model import RunReport
from judgeq.runspec import utcnow
from judgeq.settings import Settings, default, load_settings
from judgeq.store.base import MemoryStore
from judgeq.store.reply_cache import SqliteCache
from judgeq.store.runfolder import iter_results, read_spec, verdicts_path
from judgeq.telemetry.redact import redact

from .enqueue import check_resubmission, register_and_enqueue
from .plan import Plan, preflight
from .progress import wait_for_report, write_files

__all__ = ["EmbeddedRunner", "Interrupted", "QueueDispatcher", "Stopped", "run_plan"]

log = logging.getLogger("judgeq.embedded")
_STOP = object()


class QueueDispatcher:
    """An in-process broker: a FIFO of (run_id, index) messages."""

    def __init__(self) -> None:
        self.q: queue.Queue[Any] = queue.Queue()

    def send(self, run_id: str, items: list[tuple[int, str]]) -> None:
        for index, _job_id in items:
            self.q.put((run_id, index))

    def depth(self) -> int:
        return self.q.qsize()


class EmbeddedRunner:
    """Worker threads over a :class:`QueueDispatcher` and a :class:`MemoryStore`."""

    def __init__(
        self,
        judge_factory: Callable[[str, str], Judge],
        concurrency: int = default("concurrency"),
        settings: Settings | None = None,
    ) -> None:
        self.settings = settings or load_settings()
        self.store = MemoryStore()
        self.dispatcher = QueueDispatcher()
        cache = SqliteCache(self.settings.reply_cache_path(), self.settings.cache_ttl)
        budgets = budget_factory(self.settings, MemoryBudget)
        self.contexts = Contexts(judge_factory, budgets, cache)
        self.errors: list[BaseException] = []
        self._tries: dict[tuple[str, int], int] = {}
        self._stopping = threading.Event()
        self._threads = [
            threading.Thread(target=self._work, name=f"judgeq-worker-{i}", daemon=True)
            for i in range(concurrency)
        ]
        self.lane = BatchLane(
            self.store, self.contexts, LaneConfig.from_settings(self.settings), self._reduce
        )
        self._threads.append(threading.Thread(target=self._lane_work, name="judgeq-lane", daemon=True))

    def _reduce(self, run_id: str) -> None:
        reduce_run(self.store, run_id)

    def _lane_work(self) -> None:
        """The Message Batches lane (``--batch-api``), as a worker's lane loop does it."""
        while not self._stopping.wait(self.lane.config.tick_interval):
            try:
                self.lane.tick()
            except Exception as exc:
                log.exception("batch lane failed")
                self.errors.append(exc)

    def _work(self) -> None:
        while True:
            item = self.dispatcher.q.get()
            if item is _STOP or self._stopping.is_set():
                return
            run_id, index = item
            try:
                state = self.store.state(run_id)
                if state.get("state") == "paused":
                    continue  # the job stays pending; the run's waiter reports the pause
                go, probe = claim_probe(self.store, run_id, state, self.settings.judge_deadline + 10)
                if not go:  # the run waits for its judge and another job is asking it
                    floor = self.settings.task_retry_delay
                    self._later(run_id, index, wait_delay(state, self.store.now(), floor))
                    continue
                try:
                    outcome = process_job(self.store, self.contexts, run_id, index)
                finally:
                    if probe is not None:
                        self.store.release(run_id, "probe", probe)
                if isinstance(outcome, Held):
                    outcome = self._settle(run_id, index, outcome)
                if outcome is Outcome.LAST:
                    reduce_run(self.store, run_id)
            except BaseException as exc:  # a bug: keep it, stop waiting for this run
                log.exception("job %s/%s failed", run_id, index)
                self.errors.append(exc)
                self.store.set_state(run_id, state="failed", error=redact(repr(exc)))

    def _settle(self, run_id: str, index: int, held: Held) -> Outcome:
        """The same policy as a worker's: pause on a systemic streak, wait for a judge that
        answers no one, else retry with a delay, then a null."""
        s = self.settings
        tries = self._tries[(run_id, index)] = self._tries.get((run_id, index), 0) + 1
        final = tries > s.task_retries
        outcome = settle_held(
            self.store,
            run_id,
            [(index, held)],
            systemic_limit=s.systemic_failures,
            final=final,
            wait_limit=s.judge_wait_max,
        )
        if outcome is Outcome.WAIT:  # waiting for the judge burns no retry
            self._tries[(run_id, index)] = tries - 1
            state = self.store.state(run_id)
            self._later(run_id, index, wait_delay(state, self.store.now(), s.task_retry_delay))
        if outcome is Outcome.RETRY:
            self._later(run_id, index, s.task_retry_delay * 2 ** (tries - 1))
        return outcome

    def _later(self, run_id: str, index: int, delay: float) -> None:
        """Queue job ``index`` again in ``delay`` seconds (unless the runner stops meanwhile)."""
        timer = threading.Timer(delay, self.dispatcher.q.put, args=((run_id, index),))
        timer.daemon = True
        timer.start()

    def __enter__(self) -> EmbeddedRunner:
        for t in self._threads:
            t.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop()

    def stop(self, wait: float = 5.0) -> None:
        """Stop at once: queued jobs are dropped (on Ctrl-C nothing more is graded or paid
        for); jobs in flight finish their current judge call (waited for up to ``wait``
        seconds). Idempotent."""
        if self._stopping.is_set():
            return
        self._stopping.set()
        while True:
            try:
                self.dispatcher.q.get_nowait()
            except queue.Empty:
                break
        for _t in self._threads:
            self.dispatcher.q.put(_STOP)  # one per thread (the lane thread watches _stopping)
        deadline = time.monotonic() + wait
        for t in self._threads:
            t.join(timeout=max(0.0, deadline - time.monotonic()))

    def submit(self, plan: Plan, settings: Settings) -> str:
        register_and_enqueue(plan, self.store, self.dispatcher, settings)
        return plan.spec.run_id

    def resume(self, plan: Plan, folder: Path) -> int:
        """Load the results an earlier ``judgeq run`` of this run id left in ``folder`` (an
        interrupted run's partial report): its jobs are not graded again. The batch, rubric and
        settings must be the same. How many results were loaded."""
        spec = read_spec(folder)
        path = verdicts_path(folder)
        if spec is None or path is None:
            return 0
        check_resubmission(spec, plan)
        self.store.register(spec)
        if spec.lane == "batch":
            self.store.lane_track(spec.run_id, True)
        self.store.set_state(
            spec.run_id,
            state="running",
            enqueue="enqueuing",
            enqueued=0,
            started_at=utcnow(),
            started_epoch=self.store.now(),
        )
        loaded = 0
        for result in iter_results(path):
            if result.null_reason == "canceled":
                continue  # stopped before it was graded: grade it now
            if self.store.store_result(spec.run_id, result) is not None:
                loaded += 1
        return loaded


def _done(report: dict[str, Any]) -> tuple[int, int]:
    """A partial report's jobs done (graded or null, not canceled) and jobs in all."""
    c = RunReport.of(report).counts
    return c.graded + c.null - c.null_by_reason.get("canceled", 0), c.total


class Interrupted(JudgeqError):
    """``judgeq run`` was interrupted: a partial report of what finished was written."""

    def __init__(self, run_id: str, report: dict[str, Any], paths: dict[str, Path]) -> None:
        done, total = _done(report)
        super().__init__(
            f"interrupted: run {run_id} stopped with {done} of {total} jobs done; a partial report "
            f"is in {paths['report.json'].parent} "
            "(unfinished jobs are null 'canceled'). Re-run the same command with --run-id "
            f"{run_id} to grade the rest (finished jobs are not graded again)"
        )
        self.run_id, self.report, self.paths = run_id, report, paths


class Stopped(RunPaused):
    """``judgeq run`` paused for something a person must do (its cost cap, a refused key): it
    stopped, and a partial report was written (exit code 3)."""

    def __init__(self, run_id: str, reason: str, report: dict[str, Any], paths: dict[str, Path]) -> None:
        done, total = _done(report)
        spent = RunReport.of(report).usage.estimated_cost_usd
        cause = reason.split(" (raise it with")[0]
        if cause.startswith("max_cost:") and isinstance(spent, int | float):
            cause += f"; ${spent:.4f} spent in all, with the calls in flight when it stopped"
        fix = "a higher --max-cost" if cause.startswith("max_cost:") else "the judge set-up fixed"
        super().__init__(
            f"run {run_id} stopped: {cause}. {done} of {total} jobs done; a partial report is in "
            f"{paths['report.json'].parent} (the rest are null 'canceled'). Re-run the same command "
            f"with --run-id {run_id} and {fix} to grade the rest (finished jobs are not graded again)",
            run_id,
            reason,
        )
        self.report, self.paths = report, paths


def run_plan(
    plan: Plan,
    settings: Settings,
    *,
    stream: TextIO | None = None,
    factory: Callable[[str, str], Judge] | None = None,
) -> tuple[dict[str, Any], dict[str, Path]]:
    """Grade a validated plan in this process and write its files: (report, paths).

    An earlier interrupted run of the same run id (its folder under the results directory)
    is resumed: its finished jobs are loaded, the rest graded. Ctrl-C stops the grading,
    writes a partial report of what finished and raises :class:`Interrupted`."""
    from judgeq.judges import judge_factory

    preflight(plan, settings)
    folder = Path(settings.results_dir) / plan.spec.run_id
    with EmbeddedRunner(factory or judge_factory(settings), settings.concurrency, settings) as runner:
        resumed = runner.resume(plan, folder)
        if resumed and stream is not None:
            stream.write(f"judgeq: run {plan.spec.run_id}: {resumed} finished job(s) loaded from {folder}\n")
        run_id = runner.submit(plan, settings)
        try:
            report = wait_for_report(runner.store, run_id, stream=stream, interval=0.2, stop_on_pause=True)
        except RunPaused as paused:
            # the calls in flight end (they are paid: their results count), the rest are
            # null 'canceled' with the pause's reason, and the partial report is written
            runner.stop(wait=settings.judge_deadline + 5.0)
            cause = paused.reason.split(" (raise it with")[0]  # (no resume: this run ends here)
            why = f"judgeq run stopped before this job was graded: {cause}"
            report = cancel_run(runner.store, run_id, why)[1]
            paths = write_files(runner.store, run_id, report, settings.results_dir)
            raise Stopped(run_id, paused.reason, report, paths) from None
        except KeyboardInterrupt:
            runner.stop()
            # every job without a result becomes a canceled null now, so a judge call that
            # returns later is a duplicate: the report and the verdicts show one state
            why = "judgeq run was interrupted before this job was graded"
            report = cancel_run(runner.store, run_id, why)[1]
            paths = write_files(runner.store, run_id, report, settings.results_dir)
            raise Interrupted(run_id, report, paths) from None
        if runner.errors:
            raise JudgeqError(f"run {run_id} failed: {runner.errors[0]!r}")
        paths = write_files(runner.store, run_id, report, settings.results_dir)
    return report, paths

"""The stages every worker runs, whatever the transport (Celery or in-process threads).

* :func:`process_job` — one job: skip if its result exists, load the payload, grade, store
  once.  Returns whether this write completed the run (the caller then enqueues the
  reducer, exactly once thanks to :meth:`Store.claim_reducer`).
* :func:`reduce_run` — stream every stored result through the aggregator and save the
  report.  Idempotent: running it twice gives the same report.
* :func:`finalize_run` — for a run whose last messages were lost: record every job without
  a result as null (``lost``) and reduce.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

from ._grading import GradingContext, grade_job
from ._jobs import JOB_MODELS, infer_kind
from ._judge import Judge
from ._report import build_report, new_aggregator
from ._result import Result
from ._run import RunSpec, utcnow
from ._store import Store

log = logging.getLogger("judgeq.worker")

JudgeFactory = Callable[[str, str], Judge]


class Outcome(StrEnum):
    STORED = "stored"
    LAST = "last"  # stored, and this completed the run: enqueue the reducer
    DUPLICATE = "duplicate"
    UNKNOWN_RUN = "unknown-run"
    NO_PAYLOAD = "no-payload"


@dataclass
class Contexts:
    """Per-process cache of run specs and grading contexts (judges are built once)."""

    judge_factory: JudgeFactory
    max_runs: int = 64

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._contexts: OrderedDict[str, tuple[RunSpec, GradingContext]] = OrderedDict()
        self._judges: dict[tuple[str, str], Judge] = {}

    def judge(self, provider: str, model: str) -> Judge:
        key = (provider, model)
        with self._lock:
            judge = self._judges.get(key)
            if judge is None:
                judge = self._judges[key] = self.judge_factory(provider, model)
            return judge

    def get(self, store: Store, run_id: str) -> tuple[RunSpec, GradingContext] | None:
        with self._lock:
            hit = self._contexts.get(run_id)
            if hit is not None:
                self._contexts.move_to_end(run_id)
                return hit
        spec = store.spec(run_id)
        if spec is None:
            return None
        ctx = spec.context(self.judge(spec.judge_provider, spec.judge_model))
        with self._lock:
            self._contexts[run_id] = (spec, ctx)
            while len(self._contexts) > self.max_runs:
                self._contexts.popitem(last=False)
        return spec, ctx


def process_job(store: Store, contexts: Contexts, run_id: str, index: int) -> Outcome:
    """Grade job ``index`` of ``run_id`` unless it already has a result."""
    if store.has_result(run_id, index):
        return Outcome.DUPLICATE
    loaded = contexts.get(store, run_id)
    if loaded is None:
        log.warning("run %s is unknown or expired; dropping job %d", run_id, index)
        return Outcome.UNKNOWN_RUN
    spec, ctx = loaded
    raw = store.job(run_id, index)
    if raw is None:
        # graded meanwhile by another delivery (payloads are deleted on store), or expired
        return Outcome.DUPLICATE if store.has_result(run_id, index) else Outcome.NO_PAYLOAD
    try:
        obj = json.loads(raw)
        job = JOB_MODELS[infer_kind(obj)].model_validate(obj)
        result = grade_job(ctx, job, index)
    except Exception as exc:  # a bug must not lose the job: it becomes a null with its reason
        log.exception("job %d of run %s failed unexpectedly", index, run_id)
        result = _null(spec, index, _job_id(raw, index), "internal_error", f"{type(exc).__name__}: {exc}")
    if result.kind == "question" and log.isEnabledFor(logging.DEBUG):
        log.debug(
            "question %s retrieved=%s rank=%s grade=%s total=%s reasoning=%r",
            job.id,
            result.retrieved_doc_ids,
            result.rank,
            result.llm_grade,
            result.total_score,
            (result.llm_reasoning or "")[:300],
        )
    done = store.store_result(run_id, result)
    if done is None:
        return Outcome.DUPLICATE
    if done >= spec.total and store.claim_reducer(run_id):
        return Outcome.LAST
    return Outcome.STORED


def _job_id(raw: str | None, index: int) -> str:
    try:
        return str(json.loads(raw or "{}").get("id", f"#{index}"))
    except ValueError:
        return f"#{index}"


def _null(spec: RunSpec, index: int, job_id: str, reason: str, why: str) -> Result:
    rubric = spec.rubric
    return Result(
        job_id=job_id,
        index=index,
        status="null",
        null_reason=reason,
        raw=why[:500],
        rubric_name=rubric.name,
        rubric_version=rubric.version,
        judge_model=spec.judge_model,
    )


def reduce_run(store: Store, run_id: str) -> dict[str, object]:
    """Aggregate every stored result of a run (streaming) and save its report."""
    spec = store.spec(run_id)
    if spec is None:
        raise LookupError(f"run {run_id} is unknown or expired")
    state = store.state(run_id)
    agg = new_aggregator(spec)
    missing = 0
    for index, result in enumerate(store.results(run_id, spec.total)):
        if result is None:  # vanished (expired?): a null, so every rate keeps all jobs as denominator
            missing += 1
            result = _null(spec, index, f"#{index}", "lost", "no result was stored for this job")
        agg.add(result)
    started = state.get("started_at") or spec.created_at
    finished = utcnow()
    epoch = float(state.get("started_epoch") or 0)
    wall_s = time.time() - epoch if epoch else 0.0
    report = build_report(spec, agg, started_at=started, finished_at=finished, wall_s=wall_s, missing=missing)
    store.save_report(run_id, report)
    store.set_state(run_id, state="finished" if not missing else "incomplete", finished_at=finished)
    return report


def finalize_run(store: Store, run_id: str) -> tuple[int, dict[str, object]]:
    """Mark every job without a result as null ``lost``, then reduce. Returns (lost, report)."""
    spec = store.spec(run_id)
    if spec is None:
        raise LookupError(f"run {run_id} is unknown or expired")
    lost = 0
    for index, result in enumerate(store.results(run_id, spec.total)):
        if result is not None:
            continue
        placeholder = _null(
            spec,
            index,
            _job_id(store.job(run_id, index), index),
            "lost",
            "no result was stored for this job before the run was finalized",
        )
        if store.store_result(run_id, placeholder) is not None:
            lost += 1
    return lost, reduce_run(store, run_id)

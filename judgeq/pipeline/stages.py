"""The stages every worker runs, whatever the transport (Celery or in-process threads).

* :func:`process_jobs` — the jobs of one message, top to bottom: load, plan the calls, grade
  (cache, judge, parse, score), hold systemic failures, store once; returns whether this write
  completed the run (the caller then enqueues the reducer, exactly once thanks to
  :meth:`Store.claim_reducer`).
* :func:`store_results_once` — the one place results are stored, for every path.
* :func:`reduce_run` — stream every stored result through the aggregator and save the
  report.  Idempotent: running it twice gives the same report.
* :func:`finalize_run` — for a run whose last messages were lost: record every job without
  a result as null (``lost``) and reduce.
* :func:`cancel_run` — stop a run: every job without a result becomes null ``canceled``.
* :func:`settle_held` — what becomes of jobs that could not be graded for a reason outside
  the job (a systemic judge failure, a rubric or judge that fails to load): the run pauses
  after ``JUDGEQ_SYSTEMIC_FAILURES`` systemic failures in a row (jobs stay pending, nothing
  becomes a null), else they are retried, and after the last retry they become nulls.

Every null made outside a judge's reply, whatever the path, is made by
:func:`judgeq.pipeline.job.null_result`.
"""

from __future__ import annotations

import copy
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from judgeq.errors import SYSTEMIC_REASONS, UNAVAILABLE_REASONS, StoreError
from judgeq.grading.result import Result
from judgeq.jobs.kinds import KINDS
from judgeq.jobs.models import Job
from judgeq.judges.base import Gate, Judge, JudgeBase, adopt
from judgeq.pipeline.holds import (
    REACHABLE_FOR_S,
    Held,
    claim_probe,
    hold_kind,
    judge_answering,
    wait_delay,
)
from judgeq.pipeline.job import (
    Call,
    GradingContext,
    context_for,
    grade_job,
    null_result,
    parse_job,
    plan_calls,
)
from judgeq.ratelimit import Budget
from judgeq.ratelimit.headers import fmt_duration
from judgeq.report.aggregate import served_list
from judgeq.report.build import build_report, new_aggregator
from judgeq.report.model import RunReport
from judgeq.runspec import RunSpec, iso_time
from judgeq.store.base import Store, result_costs
from judgeq.store.reply_cache import Prefetched, ReplyCache, get_many
from judgeq.telemetry import JobStored, RunChanged, emit, observed
from judgeq.telemetry.redact import redact

__all__ = [
    "FINAL_STATES",
    "REDUCE_LEASE_S",
    "BudgetFactory",
    "Contexts",
    "Held",
    "JudgeFactory",
    "Outcome",
    "cancel_run",
    "claim_probe",
    "finalize_run",
    "hold_kind",
    "judge_answering",
    "process_job",
    "process_jobs",
    "reduce_run",
    "reduce_unless_final",
    "settle_held",
    "store_results_once",
    "wait_delay",
]

log = logging.getLogger("judgeq.worker")

JudgeFactory = Callable[[str, str], Judge]
BudgetFactory = Callable[[str, str], Budget | None]


class Outcome(StrEnum):
    STORED = "stored"
    LAST = "last"  # stored, and this completed the run: enqueue the reducer
    DUPLICATE = "duplicate"
    UNKNOWN_RUN = "unknown-run"
    NO_PAYLOAD = "no-payload"
    PAUSED = "paused"  # the run is paused: not graded, the job stays pending
    RETRY = "retry"  # held: send the job again later
    WAIT = "wait"  # held while the judge answers no one: send it again later, no retry counted
    BATCHED = "batched"  # buffered for the Message Batches lane: still pending, graded later


@dataclass
class Contexts:
    """Per-process cache of run specs and grading contexts (judges are built once)."""

    judge_factory: JudgeFactory
    budget_factory: BudgetFactory | None = None
    cache: ReplyCache | None = None
    max_runs: int = 64
    gate: Gate | None = None
    """Bounds the judge calls in flight in this process, across runs."""

    clock: Callable[[], float] = time.monotonic

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._contexts: OrderedDict[str, tuple[RunSpec, GradingContext]] = OrderedDict()
        self._judges: dict[tuple[str, str], tuple[JudgeBase, Budget | None]] = {}
        self._checked: dict[int, tuple[float, bool]] = {}

    def reachable(self, ctx: GradingContext) -> bool:
        """Whether every judge of ``ctx`` answers its own check (its preflight: no tokens, or
        one), asked at most once per :data:`REACHABLE_FOR_S` per judge in this process. A judge
        without a check cannot tell: False (the caller waits for an answer to a job)."""
        for judge, _ in ctx.judges:
            if not judge.can_check:
                return False
            now = self.clock()
            with self._lock:
                seen = self._checked.get(id(judge))
            if seen is None or now - seen[0] > REACHABLE_FOR_S:
                try:
                    judge.check(timeout=min(ctx.policy.timeout, 10.0))
                    ok = True
                except Exception as exc:  # unreachable, refused, or a check that broke: not up
                    log.info("judge %s does not answer its check: %s", judge.model, redact(str(exc)))
                    ok = False
                with self._lock:
                    self._checked[id(judge)] = seen = (now, ok)
            if not seen[1]:
                return False
        return True

    def judge(self, provider: str, model: str) -> tuple[JudgeBase, Budget | None]:
        """The judge and its budget (built once per process)."""
        key = (provider, model)
        with self._lock:
            built = self._judges.get(key)
            if built is None:
                judge = adopt(self.judge_factory(provider, model))
                budget = self.budget_factory(provider, model) if self.budget_factory else None
                built = self._judges[key] = (judge, budget)
            return built

    def get(self, store: Store, run_id: str) -> tuple[RunSpec, GradingContext] | None:
        with self._lock:
            hit = self._contexts.get(run_id)
            if hit is not None:
                self._contexts.move_to_end(run_id)
                return hit
        spec = store.spec(run_id)
        if spec is None:
            return None
        council = tuple(self.judge(provider, model) for provider, model in spec.judges[1:])
        ctx = context_for(
            spec, *self.judge(spec.judge_provider, spec.judge_model), self.cache, council, gate=self.gate
        )
        with self._lock:
            self._contexts[run_id] = (spec, ctx)
            while len(self._contexts) > self.max_runs:
                self._contexts.popitem(last=False)
        return spec, ctx


def process_job(store: Store, contexts: Contexts, run_id: str, index: int) -> Outcome | Held:
    """Grade job ``index`` of ``run_id`` unless it already has a result (a message of one job:
    ``judgeq run``'s threads take one job at a time)."""
    return process_jobs(store, contexts, run_id, [index], _serial)[0]


def _serial(fn: Callable[[Any], Any], items: list[Any]) -> list[Any]:
    return [fn(item) for item in items]


@dataclass(slots=True)
class _Todo:
    """A job of the message to grade: its payload, the job (None: the payload is damaged) and
    its calls with their reply-cache keys."""

    index: int
    raw: str
    job: Job | None
    planned: list[tuple[Call, str | None]]


def process_jobs(
    store: Store,
    contexts: Contexts,
    run_id: str,
    indices: list[int],
    run_all: Callable[[Callable[[Any], Any], list[Any]], list[Any]] = _serial,
) -> list[Outcome | Held]:
    """Grade the jobs ``indices`` of ``run_id`` (one grade message) that have no result yet.

    The stages, in order, each a function of this module called from here only:

    1. :func:`_load` the run's grading context and the jobs' payloads; a job with a result
       already is a duplicate, one for the Message Batches lane is buffered there;
    2. :func:`_plan` each job's judge calls with their reply-cache keys, and read the cached
       replies of all of them at once;
    3. :func:`_grade` every job (``run_all(fn, items)``: the workers pass a thread pool): each
       call answered by the cache or made to the judge under the budget and retries, then the
       verdicts parsed and scored (:func:`judgeq.pipeline.job.grade_job`);
    4. :func:`_hold_systemic`: a systemic judge failure (auth, billing, unknown model) stores
       nothing: the job is :class:`Held` (the caller retries or pauses: :func:`settle_held`);
    5. :func:`store_results_once`: one write of the results and new cache entries; the write
       that completes the run claims its reducer (:attr:`Outcome.LAST`: the caller enqueues it).

    A judge failure or a bug in grading a job gives a null result, stored like a grade; a
    grading context that cannot be built holds every job. A store failure raises
    :class:`StoreError` (the message goes back)."""
    try:
        loaded = contexts.get(store, run_id)
    except Exception as exc:
        log.exception("cannot build the grading context of run %s", run_id)
        return [Held("internal_error", f"{type(exc).__name__}: {exc}", systemic=False) for _ in indices]
    if loaded is None:
        log.warning("run %s is unknown or expired; dropping jobs %s", run_id, indices)
        return [Outcome.UNKNOWN_RUN for _ in indices]
    spec, ctx = loaded
    out, todo = _load(store, spec, ctx, indices)
    view = _plan(ctx, todo)
    results = _grade(spec, view, todo, run_all)
    out.update(_hold_systemic(store, contexts, view, run_id, results))
    if isinstance(view.cache, Prefetched):
        view.cache.flush()
    keep = [r for r in results if r.index not in out]
    out.update(zip((r.index for r in keep), store_results_once(store, spec, keep), strict=True))
    return [out[i] for i in indices]


def _load(
    store: Store, spec: RunSpec, ctx: GradingContext, indices: list[int]
) -> tuple[dict[int, Outcome | Held], list[_Todo]]:
    """Stage 1: the outcome of each job settled without grading (a duplicate, a payload gone,
    buffered for the batch lane), and the jobs to grade."""
    out: dict[int, Outcome | Held] = {}
    todo: list[_Todo] = []
    buffered_at: float | None = None  # the store's clock: other workers judge the buffer's age
    for index, (has, raw) in zip(indices, store.fetch_jobs(spec.run_id, indices), strict=True):
        if has:
            out[index] = Outcome.DUPLICATE
        elif raw is None:  # payloads are deleted when results are stored, or it expired
            out[index] = Outcome.NO_PAYLOAD
        else:
            job = parse_job(raw)
            if job is not None and spec.lane == "batch" and not ctx.cached_replies(job):
                # the batch lane sends it (judgeq.pipeline.batch_lane); a cached reply grades at once
                buffered_at = store.now() if buffered_at is None else buffered_at
                added = store.lane_add(spec.run_id, index, buffered_at)
                out[index] = Outcome.BATCHED if added else Outcome.DUPLICATE
                continue
            todo.append(_Todo(index, raw, job, []))
    return out, todo


def _plan(ctx: GradingContext, todo: list[_Todo]) -> GradingContext:
    """Stage 2: each job's calls and their cache keys; the grading context to grade them with
    (its reply cache answering from one read of every key, when the run has a cache)."""
    for item in todo:
        if item.job is not None:
            item.planned = plan_calls(ctx, item.job)
    if ctx.cache is None or not todo:
        return ctx
    keys = [key for item in todo for _, key in item.planned if key is not None]
    view = copy.copy(ctx)
    view.cache = Prefetched(ctx.cache, get_many(ctx.cache, keys))
    return view


def _grade(
    spec: RunSpec,
    ctx: GradingContext,
    todo: list[_Todo],
    run_all: Callable[[Callable[[Any], Any], list[Any]], list[Any]],
) -> list[Result]:
    """Stage 3: every job's result (a null with its reason when grading it failed)."""

    def grade(item: _Todo) -> Result:
        try:
            if item.job is None:
                raise ValueError("the stored job payload is not a valid job")
            return grade_job(ctx, item.job, item.index, planned=item.planned)
        except StoreError:
            raise  # the store failed, not the job: the message goes back
        except Exception as exc:  # a bug must not lose the job: it becomes a null with its reason
            log.exception("job %d of run %s failed unexpectedly", item.index, spec.run_id)
            why = redact(f"{type(exc).__name__}: {exc}")  # (a judge's error may quote a header)
            return null_result(spec=spec, index=item.index, reason="internal_error", why=why, raw=item.raw)

    return run_all(grade, todo) if todo else []


def _hold_systemic(
    store: Store, contexts: Contexts, ctx: GradingContext, run_id: str, results: list[Result]
) -> dict[int, Outcome | Held]:
    """Stage 4: the jobs whose judge failure says nothing about the job (:func:`hold_kind`),
    held (nothing stored)."""
    held: dict[int, Outcome | Held] = {}
    view: tuple[dict[str, str], float] | None = None  # read once, when a failure needs it
    for result in results:
        reason = result.null_reason if result.status == "null" else None
        kind = None
        if reason in SYSTEMIC_REASONS:
            kind = "pause"
        elif reason == "invalid_request" or reason in UNAVAILABLE_REASONS:
            if view is None:
                view = store.state(run_id), store.now()
            answering = judge_answering(*view, result._failing_s)
            kind = hold_kind(reason, answering, own_refusal=result._own_refusal)
            if kind == "wait" and reason != "rate_limited" and contexts.reachable(ctx):
                # the judge answers its check: the failure is the job's own (not for 429s: a
                # server refusing every Messages call still answers its Models API)
                kind = None
        if kind == "pause":
            streak = store.note_systemic(run_id)
            held[result.index] = Held(reason or "", result.raw or reason or "", True, streak, result)
        elif kind == "wait":
            held[result.index] = Held(reason or "", result.raw or reason or "", False, 0, result, wait=True)
        elif log.isEnabledFor(logging.DEBUG) and result.kind in KINDS:
            line = KINDS[result.kind].debug(result)
            if line is not None:
                log.debug("%s", line)
    return held


def store_results_once(store: Store, spec: RunSpec, results: list[Result]) -> list[Outcome]:
    """Stage 5, the one place a result is stored: each result once, in one write (a job with
    a result already is a DUPLICATE and nothing of it counts); the write that completed the
    run and claimed its reducer is LAST (the caller enqueues it), the others STORED. Used by
    every path that stores: a grade message, held jobs out of retries, the batch lane."""
    outcomes: list[Outcome] = []
    for done in store.store_results(spec.run_id, results) if results else []:
        if done is None:
            outcomes.append(Outcome.DUPLICATE)
        elif done >= spec.total and store.claim_reducer(spec.run_id):
            outcomes.append(Outcome.LAST)
        else:
            outcomes.append(Outcome.STORED)
    if observed():
        prices = spec.price_book()
        judge = str(spec.judge)
        for result, outcome in zip(results, outcomes, strict=True):
            if outcome is not Outcome.DUPLICATE:
                emit(
                    JobStored(
                        spec.run_id,
                        result.index,
                        result.status,
                        result.null_reason,
                        judge,
                        result.grading_latency_ms / 1000,
                        result_costs(result, prices),
                        batch=result.batch,
                        cached=result.cached,
                    )
                )
    return outcomes


def settle_held(
    store: Store,
    run_id: str,
    held: list[tuple[int, Held]],
    *,
    systemic_limit: int,
    final: bool,
    wait_limit: float = 3600.0,
) -> Outcome:
    """Decide what becomes of held jobs; returns the outcome for the caller:

    * :attr:`Outcome.PAUSED` — the run is (now) paused: the jobs stay pending, nothing is
      stored; ``judgeq resume`` sends them again. A run pauses when a systemic failure made
      the streak reach ``systemic_limit``.
    * :attr:`Outcome.WAIT` — the judge answers no one (:func:`hold_kind`): the run now waits
      for it (``waiting_since`` in its state, cleared by the next answer); the caller sends the
      jobs again after :func:`wait_delay`, without counting a retry. A wait longer than
      ``wait_limit`` seconds pauses the run instead (PAUSED: a person looks);
    * :attr:`Outcome.RETRY` (``final`` False) — the caller sends them again later;
    * after the last retry (``final``): each becomes a null with its reason, stored once;
      :attr:`Outcome.LAST` when that completed the run (enqueue the reducer), else STORED.
    """
    if not held:
        return Outcome.STORED
    state = store.state(run_id)
    if state.get("state") == "paused":
        return Outcome.PAUSED
    systemic = [h for _, h in held if h.systemic]
    worst = max(systemic, key=lambda h: h.streak, default=None)
    if worst is not None and worst.streak >= systemic_limit:
        why = f"{worst.reason}: {worst.message} ({worst.streak} judge calls in a row failed this way)"
        store.pause(run_id, why)
        log.error("run %s paused: %s. Fix the judge set-up, then: judgeq resume %s", run_id, why, run_id)
        return Outcome.PAUSED
    waiting = next((h for _, h in held if h.wait), None)
    if waiting is not None:
        why = f"{waiting.reason}: {waiting.message}"[:300]
        since = float(state.get("waiting_since") or 0)
        if since and store.now() - since > wait_limit:
            why = f"the judge answered no job for {fmt_duration(wait_limit)} ({why})"
            store.pause(run_id, why)
            log.error("run %s paused: %s. When it answers: judgeq resume %s", run_id, why, run_id)
            return Outcome.PAUSED
        if store.wait_for_judge(run_id, why):
            log.warning(
                "run %s waits for its judge: it answered no job for a while (%s); %d job(s) held, "
                "graded once it answers again",
                run_id,
                why,
                len(held),
            )
        return Outcome.WAIT
    if not final:
        return Outcome.RETRY
    spec = store.spec(run_id)
    if spec is None:
        return Outcome.UNKNOWN_RUN
    results = [
        h.result
        or null_result(spec=spec, index=index, reason=h.reason, why=h.message, raw=store.job(run_id, index))
        for index, h in held
    ]
    return Outcome.LAST if Outcome.LAST in store_results_once(store, spec, results) else Outcome.STORED


FINAL_STATES = frozenset({"finished", "canceled"})
"""States after which a run's report cannot change: every job has a stored result (which never
changes), or the run was stopped and its partial report is the last word. An ``incomplete``
run may still receive late results, so it is not final."""


def reduce_run(store: Store, run_id: str, *, partial: bool = False) -> dict[str, object]:
    """Aggregate every stored result of a run (streaming) and save its report.

    ``partial``: the run was interrupted (``judgeq run`` and Ctrl-C, ``judgeq cancel``): jobs
    without a result count as null ``canceled`` (not ``lost``) and the report says
    ``"partial": true``."""
    spec = store.spec(run_id)
    if spec is None:
        raise LookupError(f"run {run_id} is unknown or expired")
    state = store.state(run_id)
    agg = new_aggregator(spec)
    missing = 0
    reason, why = (
        ("canceled", "the run was stopped before this job was graded")
        if partial
        else ("lost", "no result was stored for this job")
    )
    for index, result in enumerate(store.results(run_id, spec.total)):
        if result is None:  # vanished (expired?): a null, so every rate keeps all jobs as denominator
            missing += 1
            result = null_result(spec=spec, index=index, reason=reason, why=why, raw=store.job(run_id, index))
        agg.add(result)
    started = state.get("started_at") or spec.created_at
    now = store.now()  # started_epoch is on the store's clock too; archiving compares with finished_at
    finished = iso_time(now)
    epoch = float(state.get("started_epoch") or 0)
    wall_s = now - epoch if epoch else 0.0
    served = served_list(store.counters(run_id))
    report = build_report(
        spec,
        agg,
        started_at=started,
        finished_at=finished,
        wall_s=wall_s,
        missing=missing,
        served=served,
        partial=partial,
    )
    store.save_report(run_id, report)
    final = "canceled" if partial else "finished" if not missing else "incomplete"
    store.set_state(run_id, state=final, finished_at=finished)
    counts = RunReport.of(report).counts
    emit(RunChanged(run_id, "finalized", f"{final}: {counts.graded} graded, {counts.null} null"))
    return report


REDUCE_LEASE_S = 30.0
"""How long a reducer's hold on its run outlives the reducer (it is renewed every third of it
while the reduce goes on): a duplicate reducer waiting for a reducer that died waits this long."""


def reduce_unless_final(
    store: Store, run_id: str, *, lease_s: float = REDUCE_LEASE_S, poll_s: float = 1.0
) -> dict[str, object] | None:
    """What a reduce message does: :func:`reduce_run`, once per run at a time, and not at all
    when the run already has its final report (:data:`FINAL_STATES`): then None.

    Duplicate messages are common: a waiting producer nudges the reducer while a large run's
    reduce is still going (a million results take about a minute), the last result of
    ``judgeq cancel`` sends one. A reducer holds the run's ``reducing`` lock (renewed while it
    works); a duplicate waits for it, then finds the final report and stops, or takes over if
    that reducer died (its lock lapses within ``lease_s``). A late message never turns a
    canceled run's partial report into a finished one."""
    while (token := store.claim(run_id, "reducing", lease_s)) is None:
        if _has_final_report(store, run_id):
            return None
        time.sleep(poll_s)
    stop = threading.Event()

    def keep() -> None:
        while not stop.wait(lease_s / 3):
            if not store.renew(run_id, "reducing", token, lease_s):
                return

    keeper = threading.Thread(target=keep, name="judgeq-reducing", daemon=True)
    keeper.start()
    try:
        return None if _has_final_report(store, run_id) else reduce_run(store, run_id)
    finally:
        stop.set()
        store.release(run_id, "reducing", token)


def _has_final_report(store: Store, run_id: str) -> bool:
    return store.state(run_id).get("state") in FINAL_STATES and store.report(run_id) is not None


def finalize_run(store: Store, run_id: str) -> tuple[int, dict[str, object]]:
    """Mark every job without a result as null ``lost``, then reduce. Returns (lost, report)."""
    spec = store.spec(run_id)
    if spec is None:
        raise LookupError(f"run {run_id} is unknown or expired")
    lost = 0
    for index, result in enumerate(store.results(run_id, spec.total)):
        if result is not None:
            continue
        placeholder = null_result(
            spec=spec,
            index=index,
            reason="lost",
            why="no result was stored for this job before the run was finalized",
            raw=store.job(run_id, index),
        )
        if store.store_result(run_id, placeholder) is not None:
            lost += 1
    return lost, reduce_run(store, run_id)


def cancel_run(
    store: Store, run_id: str, why: str = "the run was canceled (judgeq cancel) before this job was graded"
) -> tuple[int, dict[str, object]]:
    """Stop a run (``judgeq cancel``): its state becomes ``canceled`` (producers stop
    enqueuing, the batch lane sends no new batch and cancels those in flight), every job
    without a result is stored as a null ``canceled`` (a queued message then finds its job
    done and makes no judge call; a call already in flight is not counted), and the report of
    what finished is saved. Returns (jobs canceled, report)."""
    spec = store.spec(run_id)
    if spec is None:
        raise LookupError(f"run {run_id} is unknown or expired")
    store.set_state(run_id, state="canceled")
    emit(RunChanged(run_id, "canceled"))
    canceled = 0
    for index, result in enumerate(store.results(run_id, spec.total)):
        if result is not None:
            continue
        null = null_result(spec=spec, index=index, reason="canceled", why=why, raw=store.job(run_id, index))
        if store.store_result(run_id, null) is not None:
            canceled += 1
    return canceled, reduce_run(store, run_id, partial=True)

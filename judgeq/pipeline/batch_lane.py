"""The Message Batches lane (``--batch-api``): judge calls grouped into Message Batches, at
the batch discount, through the same parse/score/store path as the live lane.

How a job travels:

1. A worker takes the job's grade message like any other (:func:`judgeq.pipeline.stages.process_job`).
   A reply in the reply cache grades it at once; otherwise the job is put in the run's lane
   buffer in the store (:meth:`Store.lane_add`) and the message is acknowledged: the job stays
   pending (its payload stays in the store) until its result is stored.
2. :meth:`BatchLane.tick`, run every few seconds by every worker (and by ``judgeq run``),
   sends the buffer as one Message Batch when it holds ``max_requests`` jobs, when its oldest
   job has waited ``flush_interval`` seconds, or when every job of the run not yet stored is
   in the lane (nothing more will come). A batch holds at most ``max_requests`` requests
   (100,000 at most) and ``max_bytes`` of request JSON (the API takes 256 MB); the rest stays
   buffered for the next one. Each request's ``custom_id`` is ``j<index>``.
3. The batch's record (token, the API's batch id, state, request counts) and its job indices
   are kept in the store, so any worker polls it (one at a time, every ``poll_interval``
   seconds, under a lock): a killed or restarted worker never resubmits a batch that was sent,
   another one goes on polling it.
4. When the batch has ended its results are streamed and matched by ``custom_id``: a
   succeeded result goes through :func:`judgeq.pipeline.job.combine` (parse, score) and
   :func:`judgeq.pipeline.stages.store_results_once` (store once), as in the live lane; an
   errored one becomes a null ``api_error``, an expired one ``timeout``, a
   canceled one ``canceled``, each with its reason. A job missing from the results is an
   ``api_error`` null. Reading results twice (a worker died while ingesting) stores nothing
   twice: results are written once.

Failure windows, stated: the jobs of a batch are taken from the buffer together with the
batch's record (state ``creating``), in one step; a worker that dies before the API has the
batch, or whose upload takes longer than ``creating_timeout`` (30 minutes), has its batch given
up by another worker (compare-and-set: exactly one) and its jobs go back to the buffer; if that
slow upload succeeds after all, its worker finds the batch given up and cancels it, so it is
not paid twice. A worker that dies in the instant between the API's answer and recording the
batch id leaves a batch that is paid twice (its results are still counted once). A batch the
API refuses for a transient reason (429, 5xx, connection) goes back to the buffer and is sent
at a later tick; a systemic refusal (key, credit, model) pauses the run; any other refusal (the
request itself is invalid) makes its jobs nulls with that reason. A batch the API no longer
knows (404) is given up and its jobs sent again.

The cost limit (``--max-cost``): a batch is paid whole once sent, so the limit is held before
sending. Each batch reserves, in the store and atomically against the run's limit together with
what its stored results spent and what the other batches in flight hold
(:meth:`Store.lane_reserve`), the most it can cost (:func:`request_bound`: every request's
``max_tokens`` of output and one input token per byte of its JSON, at the batch price); a batch
that would not fit is made smaller (the oldest jobs that fit), or not sent: the lane waits while
batches in flight hold reservations, and pauses the run (``max_cost: ...``) when none does. A
batch gives its reservation back when it leaves flight (ingested: its results' real cost counted
instead; given up, refused, canceled), in the same step as its state changes, so a dead worker's
reservation is held until its batch is polled and ingested or given up. The spend therefore
stays within the limit as long as no request has more input tokens than bytes.

Pure core: no Celery, Redis or SDK import; the judge (:class:`BatchJudge`) and the store are
passed in.
"""

from __future__ import annotations

import contextlib
import json
import logging
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from judgeq.errors import JudgeAPIError, JudgeError, JudgeModelNotFound
from judgeq.grading.result import Result
from judgeq.judges.base import CallOutcome, provider_of
from judgeq.judges.batches import BatchItem, BatchJudge, batch_label
from judgeq.judges.prices import Prices, unpriced_text
from judgeq.pipeline.job import (
    CallResult,
    GradingContext,
    call_count,
    combine,
    job_calls,
    null_result,
    parse_job,
)
from judgeq.pipeline.stages import Contexts, Outcome, store_results_once
from judgeq.runspec import RunSpec
from judgeq.settings import Settings
from judgeq.store.base import IN_FLIGHT, Store
from judgeq.telemetry import JudgeCall, emit, observed

__all__ = [
    "ACTIVE",
    "BatchLane",
    "LaneConfig",
    "custom_id",
    "index_of",
    "lane_loop",
    "lane_summary",
    "lane_text",
]

log = logging.getLogger("judgeq.lane")

MAX_REQUESTS = 100_000
"""The Message Batches API's limit of requests per batch."""
MAX_BYTES = 256_000_000
"""The Message Batches API's limit on the size of one batch's body."""
ENVELOPE_BYTES = 64
"""JSON around one request's params in the batch body (custom_id and keys), an upper bound."""


def custom_id(index: int, tag: str | None = None) -> str:
    """``j<index>`` for a job of one call, ``j<index>_<tag>`` for each call of a job of
    several (a pair judged in both orders, a council)."""
    return f"j{index}" if tag is None else f"j{index}_{tag}"


def index_of(cid: str) -> int | None:
    """The job index of a custom_id (see :func:`custom_id`); None when it is not one of ours."""
    head = cid.partition("_")[0]
    if head.startswith("j") and head[1:].isdigit():
        return int(head[1:])
    return None


def tag_of(cid: str) -> str:
    """The call tag of a custom_id (``0`` for a job of one call)."""
    return cid.partition("_")[2] or "0"


@dataclass(frozen=True, slots=True)
class LaneConfig:
    """``JUDGEQ_BATCH_*`` settings."""

    flush_interval: float = 60.0
    poll_interval: float = 30.0
    max_requests: int = MAX_REQUESTS
    max_bytes: int = 250_000_000
    failed_backoff: float = 300.0
    """Seconds no batch of a run is sent after the API failed one for the moment (OpenAI's
    enqueued-token limit: room comes back as earlier batches finish)."""
    creating_timeout: float = 1800.0
    """Seconds a batch may stay ``creating`` (its upload: up to 256 MB) before it is given up."""
    ingest_lock: float = 900.0

    @classmethod
    def from_settings(cls, s: Settings) -> LaneConfig:
        return cls(
            flush_interval=s.batch_flush_interval,
            poll_interval=s.batch_poll_interval,
            max_requests=s.batch_max_requests,
            max_bytes=s.batch_max_bytes,
        )

    @property
    def tick_interval(self) -> float:
        """Seconds between two ticks of a worker's lane loop."""
        return max(0.05, min(5.0, self.poll_interval, self.flush_interval))


POLL_LOCK = 120.0
"""Seconds a worker may hold a batch's poll lock (released when the poll is done; a lock left
by a dead worker expires)."""

ACTIVE = IN_FLIGHT
"""Record states of a batch still in flight (``ended`` is the API's; ours end ``ingested``,
``abandoned`` or ``refused``)."""

MARGIN_USD = 1e-9
"""Kept free below the cost limit when fitting a batch, so float rounding never makes the
store refuse a reservation the lane computed to fit (which it would then try again each tick)."""


def request_bound(prices: Prices, model: str, params_bytes: int, max_tokens: int) -> float | None:
    """The most one Message Batches request can cost (USD; None: the model has no price):
    ``max_tokens`` output tokens (the API never exceeds them) and one input token per byte of
    the request's JSON (a token is at least one byte of text: typical text runs 3-4 bytes a
    token, so this over-estimates its input about fourfold), input priced at the model's
    dearest input rate (a prompt-cache write), all with the batch discount."""
    price = prices.lookup(model)
    if price is None:
        return None
    gross = (params_bytes * price.dearest_input + max_tokens * price.output) / 1e6
    return gross * (1 - price.batch_discount)


class BatchLane:
    """The batch lane's work for every run of the store: flush, poll, ingest (see the module
    docstring). ``on_last(run_id)`` is called when a stored result completed a run (enqueue
    the reducer).

    Several workers run it at once: a batch's state changes only by compare-and-set
    (:meth:`Store.lane_set_batch`), and a job goes back to the buffer only while it is still
    in the batch that gives it back (:meth:`Store.lane_return`), so no job is sent twice by two
    workers acting on the same batch.

    Its clock is the store's (:meth:`Store.now`, Redis's ``TIME``) unless ``clock`` is given:
    a buffered job's age, a batch's ``created``, ``sent`` and ``polled`` are written by one
    worker and compared by another, so a worker whose own clock is off flushes no batch early
    and gives up no batch still being created."""

    def __init__(
        self,
        store: Store,
        contexts: Contexts,
        config: LaneConfig,
        on_last: Callable[[str], None],
        *,
        clock: Callable[[], float] | None = None,
    ) -> None:
        self.store, self.contexts, self.config, self.on_last = store, contexts, config, on_last
        self.clock: Callable[[], float] = store.now if clock is None else clock
        self._held: dict[str, tuple[float, float, float]] = {}
        """Runs whose next batch did not fit under their cost limit, with (limit, spent,
        reserved) at the time: not tried again (not rendered again) until one of them changes."""

    def tick(self) -> None:
        """One pass over every run of the lane; a failing run does not stop the others."""
        for run_id in self.store.lane_runs():
            try:
                self.tick_run(run_id)
            except Exception:
                log.exception("batch lane: run %s", run_id)

    def tick_run(self, run_id: str) -> None:
        store = self.store
        if store.spec(run_id) is None:  # expired or deleted
            store.lane_track(run_id, False)
            return
        loaded = self.contexts.get(store, run_id)
        if loaded is None:
            store.lane_track(run_id, False)
            return
        spec, ctx = loaded
        judge = ctx.judge.as_batch_judge()
        if judge is None:
            log.error("run %s: judge %s cannot take batches", run_id, ctx.judge.model)
            return
        if store.state(run_id).get("state") == "canceled":
            self._cancel(run_id, judge)
            return
        self._recover(run_id)
        self._maybe_flush(spec, judge, max(1, self._limits(judge)[0] // call_count(ctx)))
        now = self.clock()
        for record in store.lane_batches(run_id):
            due = now - float(record.get("polled") or 0) >= self.config.poll_interval
            if record["state"] == "in_progress" and due:
                lock = f"lane-poll:{record['token']}"
                held = store.claim(run_id, lock, POLL_LOCK)
                if held:
                    try:
                        self._poll(spec, judge, record["token"])
                    finally:
                        store.release(run_id, lock, held)
        in_lane = store.lane_counts(run_id)[1]
        idle = not in_lane and not any(r["state"] in ACTIVE for r in store.lane_batches(run_id))
        if idle and store.counters(run_id).get("done", 0) >= spec.total:
            store.lane_track(run_id, False)

    def _cancel(self, run_id: str, judge: BatchJudge) -> None:
        """A canceled run: cancel its batches in flight (one worker each, by compare-and-set)
        and leave the lane (its jobs are nulls ``canceled`` already)."""
        for record in self.store.lane_batches(run_id):
            if record["state"] not in ACTIVE:
                continue
            won = self.store.lane_set_batch(run_id, {**record, "state": "canceled"}, ACTIVE)
            if won and record.get("id"):
                with contextlib.suppress(JudgeError):
                    judge.batch_cancel(record["id"])
                    log.info("run %s canceled: canceled its %s %s", run_id, batch_label(judge), record["id"])
        self.store.lane_track(run_id, False)

    # -- flush -------------------------------------------------------------------------
    def _due(self, spec: RunSpec, per_batch: int) -> bool:
        buffered, in_lane, since = self.store.lane_counts(spec.run_id)
        if not buffered:
            return False
        if buffered >= per_batch:
            return True
        if since is not None and self.clock() - since >= self.config.flush_interval:
            return True
        state = self.store.state(spec.run_id)
        done = self.store.counters(spec.run_id).get("done", 0)
        # every job not yet stored is in the lane: nothing more will come, send now (a job
        # stored but not yet out of the lane only makes a batch go early: batches cost alike)
        return state.get("enqueue", "done") == "done" and done + in_lane >= spec.total

    def _maybe_flush(self, spec: RunSpec, judge: BatchJudge, per_batch: int) -> None:
        run_id = spec.run_id
        if self.store.state(run_id).get("state") != "running" or not self._due(spec, per_batch):
            return  # a paused run sends no new batch (a cost limit, a broken judge set-up)
        now = self.clock()
        if any(float(r.get("retry_at") or 0) > now for r in self.store.lane_batches(run_id)):
            return  # a batch failed for the moment (see _poll): wait before sending more
        held = self.store.claim(run_id, "lane-flush", 600)
        if not held:
            return
        try:
            while self.store.state(run_id).get("state") == "running" and self._due(spec, per_batch):
                if not self.flush(spec, judge, per_batch):
                    break
        finally:
            self.store.release(run_id, "lane-flush", held)

    def flush(self, spec: RunSpec, judge: BatchJudge, per_batch: int | None = None) -> bool:
        """Send one batch of buffered jobs (at most ``per_batch`` jobs, every call of a job in
        the same batch); False when nothing was sent (and should not be tried again at once).

        The jobs are taken with their batch's record (state ``creating``) in one step, so a
        worker dying anywhere from here on leaves a record :meth:`_recover` finds.

        Under a cost limit the batch holds only the jobs whose cost bound
        (:func:`request_bound`) fits in what the limit leaves (the spend so far and the
        reservations of the batches in flight taken off), and that bound is reserved in the
        store, atomically against the limit, before the batch is sent; the reservation is given
        back when the batch is ingested (its results' real cost counted instead), given up or
        refused. When not even the next job fits: the lane waits while batches in flight hold
        reservations, and pauses the run (``max_cost: ...``) when none does."""
        store, run_id, now = self.store, spec.run_id, self.clock()
        loaded = self.contexts.get(store, run_id)
        if loaded is None:
            return False
        ctx = loaded[1]
        prices = spec.price_book()
        max_requests, max_bytes = self._limits(judge)
        per_batch = min(per_batch or max_requests, max_requests // call_count(ctx)) or 1
        label = batch_label(judge)
        spend = self._cost_limit(run_id)
        room: float | None = None
        if spend is not None:
            if self._held.get(run_id) == spend:
                return False  # nothing changed since the next job did not fit
            limit, spent, reserved = spend
            room = limit - spent - reserved - MARGIN_USD
            least = self._least_job_cost(ctx, prices)
            if least is None:
                return self._unpriced(spec, ctx, prices, label)
            if room < least:
                return self._hold(spec, spend, least, label)
            if least > 0:
                per_batch = max(1, min(per_batch, int(room // least)))
        token = secrets.token_hex(6)
        indices = store.lane_take(run_id, per_batch, token, now)
        if not indices:
            return False
        requests: list[tuple[str, dict[str, Any]]] = []
        sent: list[int] = []
        rest: list[int] = []
        size = 0
        reserve = 0.0
        misfit: float | None = None  # the cost bound of the first job that did not fit
        for index in indices:
            if misfit is not None:  # jobs keep their order: none jumps the one that did not fit
                rest.append(index)
                continue
            raw = store.job(run_id, index)
            job = parse_job(raw)
            if job is None:
                if raw is not None:  # a damaged payload: a null, as in the live lane
                    why = "unreadable job payload"
                    null = null_result(spec=spec, index=index, reason="internal_error", why=why, raw=raw)
                    if self._store(spec, null) is Outcome.LAST:
                        self.on_last(run_id)
                rest.append(index)  # stored meanwhile (or just now): leaves the lane
                continue
            calls = job_calls(ctx, job)
            if not calls:  # settled by a hard check: no judge call, graded now
                if self._store(spec, combine(ctx, job, index, [])) is Outcome.LAST:
                    self.on_last(run_id)
                rest.append(index)  # stored: leaves the lane
                continue
            members = [ctx.judges[call.judge][0].as_batch_judge() for call in calls]
            items = [
                (custom_id(index, call.tag if len(calls) > 1 else None), member.batch_params(call.request))
                for call, member in zip(calls, members, strict=True)
                if member is not None
            ]
            if len(items) < len(calls):  # the plan refuses such a run: a judge without batches
                why = "a judge of this run cannot take batches (grade it without --batch-api)"
                null = null_result(spec=spec, index=index, reason="invalid_request", why=why, raw=raw)
                if self._store(spec, null) is Outcome.LAST:
                    self.on_last(run_id)
                rest.append(index)  # stored: leaves the lane
                continue
            sizes = [len(json.dumps(p, ensure_ascii=False).encode()) for _, p in items]
            body = sum(sizes) + ENVELOPE_BYTES * len(items)
            # (a conversation graded turn by turn makes a call per turn: jobs differ in calls)
            if requests and (size + body > max_bytes or len(requests) + len(items) > max_requests):
                rest.append(index)
                continue
            bounds = [
                request_bound(prices, ctx.judges[call.judge][0].model, n, call.request.max_tokens)
                for call, n in zip(calls, sizes, strict=True)
            ]
            cost = sum(b or 0.0 for b in bounds)
            if room is not None and (None in bounds or reserve + cost > room):
                misfit = cost
                rest.append(index)
                continue
            requests += items
            sent.append(index)
            size += body
            reserve += cost
        store.lane_return(run_id, rest, now, token)
        record: dict[str, Any] = {
            "token": token,
            "id": None,
            "state": "creating",
            "status": None,
            "jobs": len(sent),
            "requests": len(requests),
            "bytes": size,
            "reserved_usd": reserve,
            "created": self.clock(),  # the upload starts now: the creating timeout counts from here
            "counts": {},
        }
        if not requests:
            record["state"] = "abandoned"
            if misfit is not None:
                record["error"] = "not sent: it would pass the run's cost limit"
            store.lane_set_batch(run_id, record, ("creating",))
            if misfit is not None and spend is not None:
                return self._hold(spec, spend, misfit, label)
            return bool(rest)
        if not store.lane_reserve(run_id, token, reserve):
            # the spend or the reservations moved since they were read (results were stored), or
            # another worker gave this batch up: nothing is sent now, the jobs go back
            store.lane_return(run_id, sent, now, token)
            record.update(state="abandoned", error="not sent: its cost reservation was refused")
            store.lane_set_batch(run_id, record, ("creating",))
            return False
        self._held.pop(run_id, None)
        if not store.lane_set_batch(run_id, record, ("creating",)):
            return False  # another worker gave this batch up meanwhile: its jobs are back
        try:
            info = judge.batch_create(requests)
        except JudgeError as exc:
            return self._refused(spec, record, sent, exc, label)
        record.update(
            id=info.id, state="in_progress", status=info.status, counts=info.counts, sent=self.clock()
        )
        if not store.lane_set_batch(run_id, record, ("creating",)):
            # given up by another worker while it was being sent (it took longer than the creating
            # timeout): its jobs went back to the buffer; cancel this copy so it is not paid twice
            log.warning("run %s: %s %s was given up while being sent: canceling it", run_id, label, info.id)
            with contextlib.suppress(JudgeError):
                judge.batch_cancel(info.id)
            return True
        log.info(
            "run %s: sent %s %s (%d jobs, %d requests, %d bytes, $%.4f reserved)",
            run_id,
            label,
            info.id,
            len(sent),
            len(requests),
            size,
            reserve,
        )
        return True

    # -- the cost limit ----------------------------------------------------------------
    def _cost_limit(self, run_id: str) -> tuple[float, float, float] | None:
        """(limit, spent, reserved) of a run with a cost limit; None without one."""
        limit = float(self.store.state(run_id).get("max_cost_usd") or 0)
        if limit <= 0:
            return None
        spent = float(self.store.counters(run_id).get("cost_usd", 0.0))
        return limit, spent, self.store.lane_reserved(run_id)

    @staticmethod
    def _least_job_cost(ctx: GradingContext, prices: Prices) -> float | None:
        """The least a job's reservation can be: its calls' ``max_tokens`` of output alone
        (None: a judge has no price)."""
        per_judge = call_count(ctx) // len(ctx.judges)
        total = 0.0
        for judge, _ in ctx.judges:
            bound = request_bound(prices, judge.model, 0, ctx.max_tokens)
            if bound is None:
                return None
            total += per_judge * bound
        return total

    def _hold(self, spec: RunSpec, spend: tuple[float, float, float], need: float, label: str) -> bool:
        """The next job (its cost bound: ``need``) does not fit under the run's cost limit. While
        batches in flight hold reservations, wait: what they do not spend comes back when they
        are ingested. When none does, pause the run, as the live lane does when a stored result
        reaches the limit. False: nothing was sent."""
        limit, spent, reserved = spend
        if reserved > 0:
            if self._held.get(spec.run_id) != spend:
                log.info(
                    "run %s: the next %s waits: a job may cost up to $%.4f and $%.4f of the "
                    "$%.4f limit is left once the batches in flight have their $%.4f reserved",
                    spec.run_id,
                    label,
                    need,
                    max(0.0, limit - spent - reserved),
                    limit,
                    reserved,
                )
            self._held[spec.run_id] = spend
            return False
        self._held.pop(spec.run_id, None)
        reason = (
            f"max_cost: ${spent:.4f} spent of the ${limit:.4f} allowed, and the next {label} "
            f"could cost up to ${need:.4f} (raise it with: judgeq resume RUN --max-cost USD)"
        )
        if self.store.pause(spec.run_id, reason):
            log.warning("run %s paused: %s", spec.run_id, reason)
        return False

    def _unpriced(self, spec: RunSpec, ctx: GradingContext, prices: Prices, label: str) -> bool:
        """A run with a cost limit whose judge has no price (registered before the limit was
        refused for it): no batch can be bounded, none is sent; the run pauses."""
        missing = [j.model for j, _ in ctx.judges if prices.lookup(j.model) is None]
        reason = (
            f"max_cost: the cost of a {label} cannot be bounded ({unpriced_text(missing)}); "
            "nothing more is sent (judgeq resume RUN --max-cost USD after submitting with a price)"
        )
        if self.store.pause(spec.run_id, reason):
            log.error("run %s paused: %s", spec.run_id, reason)
        return False

    def _refused(
        self, spec: RunSpec, record: dict[str, Any], indices: list[int], exc: JudgeError, label: str
    ) -> bool:
        store, run_id, token = self.store, spec.run_id, record["token"]
        if exc.retryable or exc.systemic:
            record.update(state="refused", error=f"{exc.reason}: {exc}"[:300])
            if store.lane_set_batch(run_id, record, ("creating",)):
                store.lane_return(run_id, indices, self.clock(), token)
            if exc.systemic:
                store.pause(run_id, f"{exc.reason}: {exc} (creating a {label})")
                log.error("run %s paused: the batch API refused the key or model: %s", run_id, exc)
            else:
                log.warning("run %s: %s not created (%s); will try again", run_id, label, exc)
            return False
        log.error("run %s: %s refused (%s): its %d jobs become nulls", run_id, label, exc, len(indices))
        last = False
        for index in indices:  # nulls first: a worker dying here leaves the batch 'creating'
            why = f"the {label} was refused: {exc}"
            raw = store.job(run_id, index)
            null = null_result(spec=spec, index=index, reason=exc.reason, why=why, raw=raw)
            last |= self._store(spec, null) is Outcome.LAST
        store.lane_done(run_id, indices)
        record.update(state="refused", error=f"{exc.reason}: {exc}"[:300])
        store.lane_set_batch(run_id, record, ("creating",))
        if last:
            self.on_last(run_id)
        return True

    def _give_up(self, run_id: str, record: dict[str, Any], expect: tuple[str, ...], why: str) -> None:
        """Mark a batch abandoned (compare-and-set: one worker does it) and put its jobs that
        are still in it back in the buffer, to be sent again."""
        record = {**record, "state": "abandoned", "error": why}
        if self.store.lane_set_batch(run_id, record, expect):
            indices = self.store.lane_batch_indices(run_id, record["token"])
            back = self.store.lane_return(run_id, indices, self.clock(), record["token"])
            log.warning(
                "run %s: batch %s given up (%s): %d jobs go back to the buffer",
                run_id,
                record["token"],
                why,
                back,
            )

    def _recover(self, run_id: str) -> None:
        """Give up batches left ``creating`` for longer than the creating timeout (their
        worker died, or its upload hangs): their jobs are sent again."""
        now = self.clock()
        for record in self.store.lane_batches(run_id):
            if (
                record["state"] == "creating"
                and now - float(record["created"]) > self.config.creating_timeout
            ):
                self._give_up(
                    run_id,
                    record,
                    ("creating",),
                    f"still being created {now - record['created']:.0f} s later",
                )

    # -- poll and ingest ---------------------------------------------------------------
    def _poll(self, spec: RunSpec, judge: BatchJudge, token: str) -> None:
        record = self.store.lane_batch(spec.run_id, token)  # fresh: another worker may have moved it on
        if record is None or record["state"] != "in_progress":
            return
        try:
            info = judge.batch_retrieve(record["id"])
        except JudgeModelNotFound:  # 404: the API no longer knows the batch (deleted)
            self._give_up(
                spec.run_id, record, ("in_progress",), f"{batch_label(judge)} {record['id']} is gone (404)"
            )
            return
        except JudgeError as exc:
            log.warning("run %s: cannot poll %s %s: %s", spec.run_id, batch_label(judge), record["id"], exc)
            return
        record.update(status=info.status, counts=info.counts, polled=self.clock())
        if info.status == "ended" and info.retryable:
            # the API failed the batch for the moment (too many tokens enqueued): its jobs go
            # back to the buffer, and no batch of the run is sent for a while
            why = f"{batch_label(judge)} {record['id']} failed for now ({info.error}); sent again later"
            held = {**record, "retry_at": self.clock() + self.config.failed_backoff}
            self._give_up(spec.run_id, held, ("in_progress",), why[:500])
            return
        if info.error:
            record["error"] = info.error[:500]
        if not self.store.lane_set_batch(spec.run_id, record, ("in_progress",)):
            return
        if info.status == "ended":
            self.ingest(spec, judge, record)

    def ingest(self, spec: RunSpec, judge: BatchJudge, record: dict[str, Any]) -> int:
        """Store the results of an ended batch; how many were stored (once each)."""
        store, run_id, token = self.store, spec.run_id, record["token"]
        lock = f"lane-ingest:{token}"
        held = store.claim(run_id, lock, self.config.ingest_lock)
        if not held:
            return 0
        try:
            stored = self._ingest(spec, judge, record)
        finally:
            store.release(run_id, lock, held)  # after a failure, the next poll reads the results again
        return stored

    def _ingest(self, spec: RunSpec, judge: BatchJudge, record: dict[str, Any]) -> int:
        store, run_id, token = self.store, spec.run_id, record["token"]
        loaded = self.contexts.get(store, run_id)
        if loaded is None:
            return 0
        ctx = loaded[1]
        indices = store.lane_batch_indices(run_id, token)
        expected = set(indices)
        label, failed = batch_label(judge), record.get("error")
        elapsed = max(0.0, self.clock() - float(record.get("sent") or record["created"]))
        partial: dict[int, dict[str, BatchItem]] = {}
        stored = 0
        last = False

        def settle(index: int, items: dict[str, BatchItem]) -> None:
            nonlocal stored, last
            job = parse_job(store.job(run_id, index))
            if job is None:
                return  # stored already (a second reading of the same results)
            results = []
            for call in job_calls(ctx, job):
                item = items.get(call.tag)
                if item is None:
                    why = (
                        f"the {label} failed: {failed}"
                        if failed
                        else f"the request is missing from the {label}'s results"
                    )
                    error: JudgeError = JudgeAPIError(why)
                    outcome = CallOutcome(None, error, 1, elapsed)
                else:
                    outcome = CallOutcome(item.reply, item.error, 1, elapsed)
                if observed():
                    member = ctx.judges[call.judge][0]
                    reply = item.reply if item is not None else None
                    emit(
                        JudgeCall(
                            provider_of(member),
                            member.model,
                            "ok"
                            if reply is not None
                            else outcome.error.reason
                            if outcome.error
                            else "api_error",
                            elapsed,
                            reply.input_tokens + reply.cache_creation_input_tokens if reply else 0,
                            reply.output_tokens if reply else 0,
                            reply.cache_read_input_tokens if reply else 0,
                            run_id=run_id,
                            index=index,
                            batch=True,
                        )
                    )
                key = ctx.cache_key(call.request, ctx.judges[call.judge][0]) if outcome.reply else None
                results.append(CallResult(call, outcome, key))
            done = self._store(spec, combine(ctx, job, index, results, batch=True))
            stored += done is not None
            last |= done is Outcome.LAST

        per_job = call_count(ctx)
        counts: dict[int, int] = {}

        def calls_of(index: int) -> int:
            """The calls of job ``index`` (the run's per-job count, unless its jobs differ)."""
            if ctx.rubric.turn_scope is None:
                return per_job
            if index not in counts:
                job = parse_job(store.job(run_id, index))
                counts[index] = call_count(ctx, job) if job is not None else per_job
            return counts[index]

        for item in judge.batch_results(record["id"]):
            index = index_of(item.custom_id)
            if index is None or index not in expected:
                log.warning(
                    "run %s: unexpected custom_id %r in batch %s", run_id, item.custom_id, record["id"]
                )
                continue
            items = partial.setdefault(index, {})
            items[tag_of(item.custom_id)] = item
            if len(items) == calls_of(index):  # every call of the job is in: grade it now
                settle(index, partial.pop(index))
                expected.discard(index)
        for index in sorted(expected):  # calls missing from the results: the API lost them
            settle(index, partial.pop(index, {}))
        store.lane_done(run_id, indices)
        record = {**record, "state": "ingested"}
        store.lane_set_batch(run_id, record, ("in_progress",))
        log.info("run %s: %s %s ingested (%d results stored)", run_id, label, record["id"], stored)
        if last:
            self.on_last(run_id)
        return stored

    def _limits(self, judge: BatchJudge) -> tuple[int, int]:
        """Requests and bytes one batch may hold: the lane's settings, capped by the API's."""
        requests = judge.batch_max_requests or MAX_REQUESTS
        size = judge.batch_max_bytes or MAX_BYTES
        return min(self.config.max_requests, requests), min(self.config.max_bytes, size)

    def _store(self, spec: RunSpec, result: Result) -> Outcome | None:
        (outcome,) = store_results_once(self.store, spec, [result])
        return None if outcome is Outcome.DUPLICATE else outcome


def lane_loop(lane: BatchLane, idle: Callable[[], bool] = lambda: False) -> None:
    """Tick ``lane`` every :attr:`LaneConfig.tick_interval` seconds, forever, skipping the
    ticks while ``idle()`` (a worker whose judge set-up is broken); errors are logged and
    the loop goes on (e.g. through a Redis restart). A worker's daemon thread."""
    while True:
        if not idle():
            try:
                lane.tick()
            except Exception as exc:
                log.warning("batch lane tick failed: %s", exc)
        time.sleep(lane.config.tick_interval)


def lane_summary(store: Store, run_id: str) -> dict[str, Any]:
    """What ``status`` and the progress line show of a run's batch lane: jobs buffered, batches
    by state with their requests (a batch that sent nothing is left out), and, under a cost
    limit, the USD the batches in flight hold reserved against it."""
    buffered, in_lane, _ = store.lane_counts(run_id)
    by_state: dict[str, dict[str, int]] = {}
    for record in store.lane_batches(run_id):
        if record["state"] == "abandoned" and not record.get("requests"):
            continue  # never sent: its jobs went back to the buffer
        state = record.get("status") or record["state"]
        if record["state"] in ("ingested", "abandoned", "refused"):
            state = record["state"]
        slot = by_state.setdefault(state, {"batches": 0, "requests": 0})
        slot["batches"] += 1
        slot["requests"] += int(record.get("requests") or 0)
    return {
        "buffered": buffered,
        "in_lane": in_lane,
        "batches": by_state,
        "reserved_usd": store.lane_reserved(run_id) if store.state(run_id).get("max_cost_usd") else 0.0,
    }


def lane_text(summary: dict[str, Any]) -> str:
    """``2 in_progress (1,200 requests), 1 ingested; 40 waiting to be batched``."""
    parts = [
        f"{v['batches']} {state} ({v['requests']:,} requests)"
        for state, v in sorted(summary["batches"].items())
    ]
    text = ", ".join(parts) or "no batch sent yet"
    if summary.get("reserved_usd"):
        text += f" (${summary['reserved_usd']:.4f} reserved against the cost limit)"
    if summary["buffered"]:
        text += f"; {summary['buffered']:,} job(s) waiting to be batched"
    return text

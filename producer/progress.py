"""Waiting for a run: the live progress line, status snapshots, and writing the report files."""

from __future__ import annotations

import re
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol, TextIO

import redis
from kombu.exceptions import OperationalError

from judgeq.errors import ConfigError, JudgeqError, RunPaused
from judgeq.figures.formatting import fmt, fmt_count
from judgeq.jobs.kinds import DEFAULT, KINDS
from judgeq.judges import judge_name
from judgeq.judges.prices import unpriced_text
from judgeq.judges.providers import is_offline, lane_name
from judgeq.pipeline.batch_lane import lane_summary, lane_text
from judgeq.ratelimit.headers import fmt_duration
from judgeq.report.files import jobs_file_texts, write_report_files
from judgeq.report.model import CascadeFigures, RunReport
from judgeq.store.base import Store

__all__ = [
    "PRODUCER_GONE_AFTER",
    "STOPPED",
    "Snapshot",
    "fmt_duration",
    "pause_line",
    "producer_gone",
    "progress_line",
    "snapshot",
    "state_text",
    "stopped_text",
    "summary_text",
    "wait_for_report",
    "write_files",
]

PRODUCER_GONE_AFTER = 60.0
"""Seconds without a producer heartbeat after which a run that is not fully enqueued is shown
as stopped (the producer died or was interrupted).  The producer
(:func:`~judgeq.producer.enqueue.register_and_enqueue`) writes ``producer_heartbeat`` (epoch
seconds on the store's clock, which :func:`snapshot` compares with: a machine whose clock is
off never calls a live producer gone) into the run state at registration, at every chunk,
while it waits on back-pressure (every 0.5 s) and at least every
:data:`~judgeq.producer.enqueue.HEARTBEAT_EVERY` seconds while it reads the batch, so a live
producer is never that quiet (a Redis outage that long stops it anyway).  A run state
without a heartbeat (written by an older producer) is shown as enqueuing: nothing tells
whether that producer lives."""


@dataclass(slots=True)
class Snapshot:
    """Where a run stands (from the store's live counters).

    ``state`` is the run's state for display: ``running``, ``paused``, ``finished``, …,
    ``enqueuing`` / ``enqueuing (paused: queue full)`` while the producer sends jobs, or
    ``stopped while enqueuing`` when the producer's heartbeat is older than
    :data:`PRODUCER_GONE_AFTER` (see :func:`stopped_text`).  ``rate`` is jobs per second
    from the start to the run's end (``finished_at``) or, while it runs, to now.
    """

    run_id: str
    state: str
    total: int
    done: int
    enqueued: int
    nulls: dict[str, int]
    rate: float | None
    eta_s: float | None
    questions: int = 0
    hit1: int = 0
    rr_sum: float = 0.0
    pass7: int = 0
    pause_reason: str = ""
    producer_gone: bool = False
    lane: str = ""
    """The Message Batches lane (``--batch-api`` runs): batches by state, jobs buffered."""
    graded: int = 0
    mean: float | None = None
    """The running mean overall score of the graded jobs."""
    cost_usd: float = 0.0
    unpriced: tuple[str, ...] = ()
    """The run's judge models without a price: ``cost_usd`` leaves their calls out (unknown)."""
    started_at: str = ""
    last_done_s: float | None = None
    """Seconds since a result was last stored (None: never)."""
    waiting_s: float | None = None
    """Seconds the run has waited for its judge, which answers no one (None: it answers)."""
    waiting_reason: str = ""

    @property
    def null_count(self) -> int:
        return sum(self.nulls.values())


STOPPED = "stopped while enqueuing"


def snapshot(store: Store, run_id: str, *, now: float | None = None) -> Snapshot | None:
    """The run's snapshot at ``now`` (epoch seconds; default: the store's clock, the one the
    producer's heartbeat, ``started_epoch`` and the last result's time are written on, whatever
    this machine's clock says), None if unknown."""
    spec = store.spec(run_id)
    if spec is None:
        return None
    now = store.now() if now is None else now
    c = store.counters(run_id)
    st = store.state(run_id)
    gone = producer_gone(st, now)
    done = int(c.get("done", 0))
    started = float(st.get("started_epoch") or 0)
    finished = _epoch(st.get("finished_at"))
    end = finished if finished is not None else now
    elapsed = end - started if started else 0.0
    # jobs graded or judged: a job closed without grading (canceled, lost) took no time
    worked = done - sum(int(c.get(f"null:{reason}", 0)) for reason in ("canceled", "lost"))
    rate = worked / elapsed if elapsed > 0 and worked > 0 else None
    if finished is not None:
        eta: float | None = 0.0
    else:
        eta = (spec.total - done) / rate if rate else None
    return Snapshot(
        run_id=run_id,
        state=_display_state(st, gone),
        total=spec.total,
        done=done,
        enqueued=int(float(st.get("enqueued") or 0)),
        nulls={k.removeprefix("null:"): int(v) for k, v in sorted(c.items()) if k.startswith("null:")},
        rate=rate,
        eta_s=eta,
        questions=int(c.get("questions", 0)),
        hit1=int(c.get("hit1", 0)),
        rr_sum=float(c.get("rr_sum", 0.0)),
        pass7=int(c.get("pass7", 0)),
        pause_reason=st.get("pause_reason", "") if st.get("state") == "paused" else "",
        producer_gone=gone,
        lane=lane_text(lane_summary(store, run_id)) if spec.lane == "batch" else "",
        graded=int(c.get("graded", 0)),
        mean=round(c["overall_sum"] / c["graded"], 4) if c.get("graded") and "overall_sum" in c else None,
        cost_usd=float(c.get("cost_usd", 0.0)),
        unpriced=tuple(spec.unpriced_models()),
        started_at=st.get("started_at") or spec.created_at,
        last_done_s=_quiet_for(store, run_id, now),
        waiting_s=_waiting_for(st, now),
        waiting_reason=st.get("waiting_reason", ""),
    )


def _waiting_for(st: dict[str, str], now: float) -> float | None:
    """Seconds a running run has waited for its judge (None: it is not waiting)."""
    if st.get("state") != "running" or not st.get("waiting_since"):
        return None
    try:
        return max(0.0, now - float(st["waiting_since"]))
    except ValueError:
        return None


def waiting_line(snap: Snapshot) -> str:
    """The one line that says a run waits for its judge, why, and that it goes on by itself."""
    return (
        f"WAITING for the judge for {fmt_duration(snap.waiting_s or 0.0)}: it answered no job "
        f"({snap.waiting_reason or 'no answer'}); the jobs are held, not nulled, and the run goes "
        f"on when it answers (judgeq cancel {snap.run_id} stops it)"
    )


def _quiet_for(store: Store, run_id: str, now: float) -> float | None:
    """Seconds since the run's last stored result (None: none yet)."""
    last = store.last_progress(run_id)
    return now - last if last else None


def pause_line(snap: Snapshot) -> str:
    """The one line that says why a run is paused and how to continue it."""
    if snap.pause_reason.startswith("max_cost:"):
        reason = snap.pause_reason.replace("resume RUN", f"resume {snap.run_id}")
        at = re.match(r"max_cost: \$([0-9.]+) spent", reason)
        if at and snap.cost_usd > float(at.group(1)) + 5e-5:  # calls in flight when it paused were paid
            reason = reason.replace(
                " allowed",
                f" allowed when it paused; ${snap.cost_usd:.4f} spent in all, with the calls then in flight",
                1,
            )
        return f"PAUSED: {reason}"
    return f"PAUSED: {snap.pause_reason}. Fix the judge set-up, then: judgeq resume {snap.run_id}"


def stopped_text(snap: Snapshot) -> str:
    """What a run whose producer is gone needs: ``stopped while enqueuing (N/T sent; …)``."""
    return (
        f"{STOPPED} ({snap.enqueued}/{snap.total} sent; the producer is gone: re-run the same "
        f"submit with --run-id {snap.run_id} to send the rest)"
    )


def state_text(snap: Snapshot) -> str:
    """The state with what a stopped producer needs (for one run's status line)."""
    return stopped_text(snap) if snap.state == STOPPED else snap.state


def _epoch(iso: str | None) -> float | None:
    if not iso:
        return None
    try:
        return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def producer_gone(st: dict[str, str], now: float) -> bool:
    """True when a live (running or paused) run is not fully enqueued and its producer's
    heartbeat is older than :data:`PRODUCER_GONE_AFTER` seconds (False without a heartbeat:
    nothing tells)."""
    if st.get("enqueue", "done") == "done" or st.get("state") not in ("running", "paused"):
        return False
    try:
        beat = float(st.get("producer_heartbeat") or 0)
    except ValueError:
        return False
    return bool(beat) and now - beat > PRODUCER_GONE_AFTER


def _display_state(st: dict[str, str], gone: bool) -> str:
    state = st.get("state", "unknown")
    enqueue = st.get("enqueue", "done")
    if state != "running" or enqueue == "done":
        return state  # a paused run shows its pause (and its reason) first
    if gone:
        return STOPPED
    if enqueue == "paused":
        return "enqueuing (paused: queue full)"
    return "enqueuing"


def eta_text(snap: Snapshot) -> str:
    """The time left, or why there is none: a paused run, or one whose producer stopped
    before sending every job (it cannot finish until they are sent)."""
    if snap.state == "paused":
        return "– (paused)"
    if snap.waiting_s is not None:
        return "– (waiting for the judge)"
    if snap.state == STOPPED:
        return "– (not all jobs sent)"
    return fmt_duration(snap.eta_s) if snap.done < snap.total else "0s"


def progress_line(snap: Snapshot, width: int = 24) -> str:
    frac = snap.done / snap.total if snap.total else 0.0
    filled = int(frac * width)
    bar = "#" * filled + "." * (width - filled)
    rate = f"{snap.rate:.1f} jobs/s" if snap.rate else "– jobs/s"
    parts = [
        f"[{bar}] {snap.done}/{snap.total} {100 * frac:5.1f}%",
        rate,
        f"ETA {eta_text(snap)}",
        f"nulls {snap.null_count}",
    ]
    if snap.questions:
        q = snap.questions
        parts.append(
            f"hit@1 {100 * snap.hit1 / q:.1f}% MRR {snap.rr_sum / q:.3f} pass@7 {100 * snap.pass7 / q:.1f}%"
        )
    if snap.lane:
        parts.append(f"batches: {snap.lane}")
    if snap.state.startswith("enqueuing"):
        parts.append(f"{snap.state} ({snap.enqueued}/{snap.total})")
    if snap.state == STOPPED:
        parts.append(stopped_text(snap))
    if snap.state == "paused":
        parts.append(pause_line(snap))
    elif snap.waiting_s is not None:
        parts.append(waiting_line(snap))
    return " | ".join(parts)


def wait_for_report(
    store: Store,
    run_id: str,
    *,
    stream: TextIO | None = sys.stderr,
    interval: float = 0.5,
    nudge: Callable[[], None] | None = None,
    nudge_after: float = 20.0,
    sleep: Callable[[float], None] = time.sleep,
    stop_on_pause: bool = False,
) -> dict[str, Any]:
    """Show progress until the run's report exists; return it.

    ``nudge`` re-enqueues the reducer when every job is done but no report appears for
    ``nudge_after`` seconds, then after twice as long each time up to 320 s (the reducer is
    idempotent, and skips a run that already has its final report).  A paused run is shown with its
    reason (and waited for: ``judgeq resume`` continues it), or, with ``stop_on_pause``,
    raises :class:`RunPaused` with that line.  KeyboardInterrupt propagates: it stops the
    waiting, never the run.
    """
    out: _Stream = stream if stream is not None else _Quiet()
    tty = out.isatty()
    last_print = 0.0
    complete_since: float | None = None
    outage_since: float | None = None
    was_paused = False
    was_waiting = False
    while True:
        try:
            report = store.report(run_id)
            if report is not None:
                if tty:
                    out.write("\r\033[K")
                return report
            snap = snapshot(store, run_id)
            if snap is not None and snap.state == "failed":
                raise JudgeqError(f"run {run_id} failed: {store.state(run_id).get('error', '?')}")
            if snap is not None and snap.state == "paused" and stop_on_pause:
                if tty:
                    out.write("\r\033[K")
                line = pause_line(snap).removeprefix("PAUSED")
                raise RunPaused(f"run {run_id} paused{line}", run_id, snap.pause_reason)
            if snap is not None and snap.done >= snap.total and nudge is not None:
                now = time.monotonic()
                if complete_since is None:
                    complete_since = now
                if now - complete_since >= nudge_after:
                    nudge()
                    complete_since = now
                    # a large run's reduce takes a while: ask again later each time, not every 20 s
                    nudge_after = min(nudge_after * 2, 320.0)
            outage_since = None
        except (redis.RedisError, OperationalError, OSError) as exc:
            # the store's client already retried for about a minute: say so, keep waiting
            now = time.monotonic()
            if outage_since is None:
                outage_since = now
                out.write(
                    f"\njudgeq: the store is unreachable ({type(exc).__name__}); still waiting "
                    f"(the run goes on; Ctrl-C stops waiting)\n"
                )
                out.flush()
            sleep(max(interval, 2.0))
            continue
        if snap is None:
            raise ConfigError(f"run {run_id} is unknown or expired")
        now = time.monotonic()
        if tty:
            out.write("\r\033[K" + progress_line(snap))
            out.flush()
        elif (snap.state == "paused" and not was_paused) or (snap.waiting_s is not None and not was_waiting):
            out.write(progress_line(snap) + "\n")  # a pause or a wait for the judge: said at once
            out.flush()
        elif now - last_print >= 5.0:
            out.write(progress_line(snap) + "\n")
            out.flush()
            last_print = now
        was_paused = snap.state == "paused"
        was_waiting = snap.waiting_s is not None
        # every job done: the report is a reduce away, look for it more often
        sleep(interval if snap.done < snap.total else min(interval, 0.05))


class _Stream(Protocol):
    """What :func:`wait_for_report` writes its progress to: a text stream or :class:`_Quiet`."""

    def write(self, text: str, /) -> int: ...

    def flush(self) -> None: ...

    def isatty(self) -> bool: ...


class _Quiet:
    """A stream that shows nothing (progress of a Python API call made without one)."""

    def write(self, text: str) -> int:
        return len(text)

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return False


def write_files(
    store: Store, run_id: str, report: dict[str, Any], out: Path, *, batch: Path | None = None
) -> dict[str, Path]:
    """Write the report files (results streamed from the store); the HTML table's texts come
    from ``batch``, else from the run's batch file when it is at hand."""
    results = (r for r in store.results(run_id, report["counts"]["total"]) if r is not None)
    texts = (lambda ids: jobs_file_texts(batch, ids)) if batch is not None else None
    return write_report_files(out, report, results, spec=store.spec(run_id), texts=texts)


def summary_text(document: RunReport | dict[str, Any], paths: dict[str, Path] | None = None) -> str:
    """The few lines printed when a run finishes (or stops: a partial run says so first).
    Every figure is named for what it measures; a missing one is a dash, never ``None``. The
    run's kind says what its score is called and adds its own lines (:attr:`JobKind.summary`)."""
    report = RunReport.of(document)
    c = report.counts
    o = report.overall
    judge = report.judge
    judges = judge.council or [judge_name(judge.provider, judge.model)]
    kind = next((k for k in KINDS.values() if k.section and report.section(k.section)), DEFAULT)
    section = report.section(kind.section) if kind.section else None
    lines = []
    if report.partial:
        lines.append(
            f"PARTIAL: run {report.run_id} was stopped (canceled or interrupted) before every job "
            "was graded: its figures cover what finished"
        )
    lines += [
        f"run {report.run_id}: {fmt_count(c.graded)}/{fmt_count(c.total)} graded, "
        f"{fmt_count(c.null)} null"
        + (f" ({', '.join(f'{k} {v:,}' for k, v in c.null_by_reason.items())})" if c.null else "")
        + (f", {c.rejected:,} rejected input lines" if c.rejected else ""),
        f"rubric {report.rubric.name} {report.rubric.version}, "
        + (
            f"cascade of {len(judges)} judges: {', '.join(judges)}"
            if judge.council_mode == "cascade"
            else f"council of {len(judges)} judges: {', '.join(judges)} ({judge.council_mode or 'mean'})"
            if len(judges) > 1
            else f"judge {judges[0]}"
        ),
    ]
    if report.cascade is not None:
        lines.append(cascade_line(report.cascade))
    if kind.scored:
        if o.n:
            lines.append(
                f"{kind.score_name}: mean {fmt(o.mean, nd=4)} median {fmt(o.median, nd=4)} "
                f"std {fmt(o.std, nd=4)} (min {fmt(o.min)}, max {fmt(o.max)})"
            )
        if report.pass_rates is not None:
            rates = ", ".join(f">={t}: {fmt(v, '%')}" for t, v in report.pass_rates.items())
            lines.append(f"pass rates ({kind.rates_of}): {rates}")
        elif "pass_rate" in report.model_fields_set:
            lines.append(f"pass rate ({kind.rates_of}): {fmt(report.pass_rate, '%')}")
    if section and kind.summary is not None and kind.validity:
        lines += kind.summary(section)
    agreement = report.agreement
    if agreement:
        parts = []
        if agreement.pairs is not None:
            pa = agreement.pairs
            parts.append(
                f"pairs accuracy {fmt(pa.accuracy_ties_half, '%')} (ties as half, as published "
                f"judge benchmarks count), {fmt(pa.accuracy_ties_excluded, '%')} ties excluded "
                f"(of {fmt_count(pa.ties_excluded_n)} pairs with no tie)"
            )
        if agreement.pass_fail is not None:
            pf = agreement.pass_fail
            parts.append(f"pass/fail accuracy {fmt(pf.accuracy, '%')}, kappa {fmt(pf.kappa)}")
        if agreement.numeric is not None:
            num = agreement.numeric
            parts.append(f"Spearman {fmt(num.spearman)}, QWK {fmt(num.qwk)}")
        lines.append(f"agreement with {fmt_count(agreement.graded)} labels: " + "; ".join(parts))
        est = agreement.estimates
        rate = est.pass_rate if est is not None else None
        if rate is not None and rate.ppi is not None:
            people = rate.human_only.value if rate.human_only is not None else None
            ci = rate.ppi.ci95 or [rate.ppi.value, rate.ppi.value]
            lines.append(
                f"pass rate from labels and verdicts (PPI++): {fmt(float(rate.ppi.value), '%')} "
                f"({fmt(float(ci[0]), '%')}-{fmt(float(ci[1]), '%')}) with "
                f"{fmt_count(rate.labelled)} labels; judge alone {fmt(float(rate.judge_only.value), '%')}, "
                f"people alone {fmt(None if people is None else float(people), '%')}"
            )
    council = report.council
    if council:
        lines.append(
            f"council agreement: Krippendorff's alpha {fmt(council.krippendorff_alpha)}, "
            f"{report.flags.get('judges_disagree', 0):,} jobs the judges disagree on"
        )
    if section and kind.summary is not None and not kind.validity:
        lines += kind.summary(section)
    use = report.usage
    cost = use.estimated_cost_usd
    lat = report.latency_ms
    latency = (
        f"latency p50 {fmt(lat.p50, nd=0)} ms, p95 {fmt(lat.p95, nd=0)} ms"
        if lat.p50 is not None
        else "latency – (no judge call was made)"
    )
    if is_offline(judge.provider):
        lines.append(f"tokens: none (the lexical judge calls no LLM); {latency}")
    else:
        lines.append(
            f"tokens: {use.input_tokens:,} in / {use.output_tokens:,} out; est. cost "
            + (f"${cost:.4f}" if cost is not None else f"unknown ({unpriced_text(use.unpriced_models)})")
            + f"; {latency}"
        )
        lane = use.batch_api
        if lane.jobs:
            off = lane.discount_usd
            lines.append(
                f"{lane_name(judge.provider)}: {lane.jobs:,} jobs"
                + (f", batch discount ${-off:.4f} (included)" if off is not None else "")
            )
        hits = use.reply_cache.hits
        if hits:
            saved = use.reply_cache.saved_usd
            lines.append(
                f"reply cache: {hits:,} of {c.total:,} jobs from cached judge replies"
                + (f", ${saved:.4f} saved" if saved else "")
            )
    if paths:
        lines += [f"  {name}: {path}" for name, path in paths.items()]
    return "\n".join(lines)


def cascade_line(cascade: CascadeFigures) -> str:
    """A cascade run's figures in one line: its guarantee, coverage, who answered, its cost."""
    share = ", ".join(f"{s.judge} {fmt_count(s.answered)}" for s in cascade.stages)
    observed = cascade.observed
    seen = (
        f"; {fmt(observed.agreement, '%')} agree with the run's {fmt_count(observed.labelled)} labelled jobs"
        if observed.labelled
        else ""
    )
    cost = (
        f"; cost {fmt(cascade.cost_fraction * 100, '%')} of the strongest judge alone"
        if cascade.cost_fraction is not None
        else ""
    )
    return (
        f"cascade: agreement >= {100 * cascade.agreement:g}% guaranteed with probability "
        f">= {100 * (1 - cascade.risk):g}%; {fmt(cascade.coverage, '%')} of jobs kept ({share}), "
        f"{fmt_count(cascade.abstained)} abstained{seen}{cost}"
    )

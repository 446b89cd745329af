"""``judgeq status``, ``judgeq report`` and ``judgeq finalize``: runs, from any machine."""

from __future__ import annotations

import sys
from typing import Any

import click

from judgeq.errors import ConfigError
from judgeq.judges import judge_name
from judgeq.judges.prices import unpriced_text
from judgeq.judges.providers import REGISTRY, is_offline
from judgeq.judges.providers import provider as named
from judgeq.ratelimit.headers import fmt_duration

from ..progress import eta_text, pause_line, snapshot, state_text, summary_text, waiting_line, write_files
from .options import out_option, redis_option, settings_from

__all__ = ["WORKERS_QUIET_AFTER", "archive", "budget_lines", "finalize", "report", "status", "worker_lines"]


def _store(**flags: Any) -> Any:
    from judgeq.store.redis import RedisStore

    settings = settings_from(**flags)
    return settings, RedisStore.open(settings)


@click.command()
@click.argument("run_id", required=False)
@redis_option
def status(run_id: str | None, **flags: Any) -> None:
    """Show a run's state (or list recent runs)."""
    settings, store = _store(**flags)
    if run_id is None:
        runs = store.runs()
        if not runs:
            click.echo("no runs")
        for rid in runs:
            snap = snapshot(store, rid)
            if snap:
                click.echo(f"{rid}  {snap.state:<10} {snap.done}/{snap.total}  nulls {snap.null_count}")
        return
    snap = snapshot(store, run_id)
    if snap is None:
        state = store.state(run_id)
        if state.get("state") == "archived":
            click.echo(
                f"run {run_id}: archived to {state.get('archived_to')} (its files; nothing left in Redis)"
            )
            return
        raise ConfigError(f"run {run_id!r} is unknown or expired")
    spec = store.spec(run_id)
    pct = 100 * snap.done / snap.total if snap.total else 0
    click.echo(f"run {run_id}: {state_text(snap)}")
    if snap.state == "paused":
        click.echo(f"  {pause_line(snap)}")
    elif snap.waiting_s is not None:
        click.echo(f"  {waiting_line(snap)}")
    judges = ", ".join(judge_name(p, m) for p, m in spec.judges)
    click.echo(f"  rubric   {spec.rubric_source.removeprefix('builtin:')}; judge {judges} ({spec.lane} lane)")
    click.echo(
        f"  started  {snap.started_at.replace('T', ' ').removesuffix('Z')} UTC; jobs file {spec.jobs_file}"
    )
    click.echo(f"  done     {snap.done}/{snap.total} ({pct:.1f}%)")
    mean = f"{snap.mean:g} over {snap.graded} graded" if snap.mean is not None else "– (nothing graded yet)"
    cost = f"${snap.cost_usd:.4f}" if not snap.unpriced else f"unknown ({unpriced_text(snap.unpriced)})"
    click.echo(f"  score    mean {mean}; cost so far {cost}")
    if snap.enqueued < snap.total:
        if snap.producer_gone:
            why = f"the producer is gone: re-run the same submit with --run-id {run_id}"
        elif snap.state.startswith("enqueuing") or snap.state == "paused":
            why = "enqueuing still under way"
        else:
            why = "never fully enqueued"
        click.echo(f"  enqueued {snap.enqueued}/{snap.total} ({why})")
    if snap.lane:
        click.echo(f"  batches  {snap.lane}")
    nulls = ", ".join(f"{k} {v}" for k, v in snap.nulls.items()) or "none"
    click.echo(f"  nulls    {snap.null_count} ({nulls})")
    rate = f"{snap.rate:.1f} jobs/s" if snap.rate else "–"
    click.echo(f"  rate     {rate}, ETA {eta_text(snap)}")
    if snap.state in ("running", "enqueuing", "enqueuing (paused: queue full)") and snap.done < snap.total:
        for line in worker_lines(store, settings.queue, snap, spec.judges):
            click.echo(f"  {line}")
        for line in budget_lines(settings, spec.judges):
            click.echo(f"  {line}")
    if snap.questions:
        q = snap.questions
        click.echo(
            f"  hit@1    {100 * snap.hit1 / q:.1f}%  MRR {snap.rr_sum / q:.3f}  "
            f"total score >= 7 {100 * snap.pass7 / q:.1f}%"
        )


def _budget_client(settings: Any) -> Any:
    from judgeq.redis_connect import connect

    return connect(settings.redis_url)


def _needs(name: str) -> str:
    """What a machine needs to call judges of provider ``name``."""
    return (named(name).serve_needs if name in REGISTRY else "") or f"the {name} judge set up"


def budget_lines(settings: Any, judges: list[tuple[str, str]]) -> list[str]:
    """Why a run's jobs wait for their judge: one line per budget of its judges (every key the
    workers use, as ``judgeq budget`` lists them) that is paused now, because the server said
    how long to wait (its ``retry-after``) when refusals came in numbers."""
    from judgeq.judges import budget_owner
    from judgeq.ratelimit.redis import budget_names, read_state

    called = [(p, m) for p, m in judges if not is_offline(p)]  # (an offline judge has no budget)
    if not called:
        return []
    client = _budget_client(settings)
    names = budget_names(client)
    lines = []
    for provider, model in called:
        prefix = ":".join(budget_owner(settings, provider, model)) + ":"
        for name in names:
            if not name.startswith(prefix):
                continue
            paused = read_state(client, name).paused_for
            if paused >= 1.0:
                lines.append(
                    f"budget   {provider}:{model}: every call waits {fmt_duration(paused)} more "
                    "(the judge's server refused calls in numbers and said how long to wait)"
                )
    return lines


WORKERS_QUIET_AFTER = 120.0
"""Seconds without a stored result, with workers alive and jobs waiting, after which status
says that no worker is taking jobs."""


def worker_lines(store: Any, queue: str, snap: Any, judges: list[tuple[str, str]] | None = None) -> list[str]:
    """What status says of the workers of ``queue``: how many consume it, or a warning when
    none does, when none can call the run's ``judges`` (provider, model), or when jobs wait
    and none has been taken for a while."""
    workers = store.workers(queue)
    if not workers:
        return [
            f"WARNING: no worker is consuming queue {queue!r}: nothing is being graded "
            f"(start one: judgeq worker --queues {queue}; or check its judge set-up in its log)"
        ]
    lines = [f"workers  {len(workers)} consuming queue {queue!r}"]
    pending = snap.total - snap.done
    if judges and pending > 0 and hasattr(store, "worker_judges"):
        serving = store.worker_judges(queue)
        needs = sorted({p for p, _ in judges})
        able = [w for w, provs in serving.items() if provs is None or all(p in provs for p in needs)]
        if serving and not able:
            named = ", ".join(judge_name(p, m) for p, m in judges)
            offered = sorted({p for provs in serving.values() for p in provs or () if not is_offline(p)})
            what = (
                f"serve {', '.join(offered)} and the offline lexical judge"
                if offered
                else ("serve the offline lexical judge only")
            )
            missing = [p for p in needs if not any(p in (provs or ()) for provs in serving.values())]
            fix = " and ".join(dict.fromkeys(_needs(p) for p in missing))
            lines.append(
                f"WARNING: the run needs judge {named} and no worker serves it ({len(serving)} "
                f"{what}): start a worker with {fix or 'every judge of the run set up'}"
            )
            return lines
    if snap.last_done_s is not None and snap.last_done_s > WORKERS_QUIET_AFTER and not snap.lane:
        lines.append(
            f"WARNING: no job has been finished for {fmt_duration(snap.last_done_s)} while "
            f"{snap.total - snap.done} wait: the workers may be stuck or paced by the judge's rate limit "
            "(see their logs)"
        )
    return lines


@click.command()
@click.argument("run_id")
@redis_option
@out_option
def report(run_id: str, **flags: Any) -> None:
    """Write the report files of a finished run (from Redis)."""
    settings, store = _store(**flags)
    data = store.report(run_id)
    if data is None and store.state(run_id).get("state") == "archived":
        from ..runsource import open_run

        source = open_run(run_id, settings)
        click.echo(f"judgeq: run {run_id} is archived in {source.where}", err=True)
        if source.report is not None:
            click.echo(summary_text(source.report, None))
        return
    if data is None:
        snap = snapshot(store, run_id)
        if snap is None:
            raise ConfigError(f"run {run_id!r} is unknown or expired")
        click.echo(
            f"judgeq: error: run {run_id} has no report yet ({snap.done}/{snap.total} done, "
            f"state {snap.state}); wait for it, or close it with 'judgeq finalize {run_id}'",
            err=True,
        )
        sys.exit(1)
    paths = write_files(store, run_id, data, settings.results_dir)
    click.echo(summary_text(data, paths))


@click.command()
@click.argument("run_id")
@redis_option
@out_option
@click.option("--force", is_flag=True, help="Finalize even though the run may still be progressing.")
def finalize(run_id: str, force: bool, **flags: Any) -> None:
    """Close a run whose last messages were lost: jobs without a result become null 'lost'.

    Refused while the run may still progress (enqueuing, or a result stored within the time a
    redelivery can take), unless --force: finalizing a live run records graded-to-be jobs as
    lost and pays for judge calls whose results are discarded.
    """
    from judgeq.pipeline.stages import finalize_run
    from judgeq.pipeline.timing import stall_after

    settings, store = _store(**flags)
    if store.spec(run_id) is None:
        raise ConfigError(f"run {run_id!r} is unknown or expired")
    state = store.state(run_id)
    # on Redis's clock, as the last result's time and started_epoch were written (not this machine's)
    quiet_for = store.now() - (store.last_progress(run_id) or float(state.get("started_epoch") or 0))
    if not force and store.report(run_id) is None:
        if state.get("enqueue", "done") != "done":
            snap = snapshot(store, run_id)
            if snap is not None and snap.producer_gone:
                raise ConfigError(
                    f"run {run_id} stopped while enqueuing ({snap.enqueued}/{snap.total} sent; the "
                    f"producer is gone): re-run the same submit with --run-id {run_id} to send the "
                    "rest, or pass --force to record the unsent jobs as lost"
                )
            raise ConfigError(f"run {run_id} is still being enqueued; wait, or pass --force")
        in_lane = store.lane_counts(run_id)[1]
        if in_lane:
            raise ConfigError(
                f"run {run_id} has {in_lane} job(s) in the Message Batches lane (see 'judgeq status "
                f"{run_id}'): workers store their results when the batches end (within 24 h). Wait, or "
                "pass --force to record them as lost"
            )
        if quiet_for < stall_after(settings):
            raise ConfigError(
                f"run {run_id} stored a result {quiet_for:.0f} s ago; workers may still be grading "
                f"or redelivering (and re-enqueue lost jobs after {stall_after(settings):.0f} s without "
                "progress). Wait, or pass --force"
            )
    lost, data = finalize_run(store, run_id)
    click.echo(f"judgeq: run {run_id}: {lost} job(s) had no result and were recorded as lost", err=True)
    paths = write_files(store, run_id, data, settings.results_dir)
    click.echo(summary_text(data, paths))


@click.command()
@click.argument("run_id")
@redis_option
@out_option
def archive(run_id: str, **flags: Any) -> None:
    """Move a finished run out of Redis into the results folder (report files and
    verdicts.jsonl.gz); status, report, compare, export and runs read it there."""
    from judgeq.store.archive import archive_run

    settings, store = _store(**flags)
    if store.spec(run_id) is None:
        raise ConfigError(f"run {run_id!r} is unknown, expired or archived already")
    if store.report(run_id) is None:
        raise ConfigError(
            f"run {run_id} has not ended (no report yet): wait for it, cancel or finalize it first"
        )
    folder = archive_run(store, run_id, settings.results_dir)
    click.echo(f"judgeq: run {run_id} archived to {folder}", err=True)
    click.echo(str(folder))

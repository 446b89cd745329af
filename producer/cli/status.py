"""``judgeq status``, ``judgeq report`` and ``judgeq finalize``: runs, from any machine."""

from __future__ import annotations

import sys
from typing import Any

import click

from judgeq._errors import ConfigError

from ..progress import fmt_duration, pause_line, snapshot, state_text, summary_text, write_files
from .options import out_option, redis_option, settings_from


def _store(**flags: Any) -> Any:
    from judgeq.redis_store import RedisStore, connect

    settings = settings_from(**flags)
    return settings, RedisStore(connect(settings.redis_url), retention_s=int(settings.retention_days * 86400))


@click.command()
@click.argument("run_id", required=False)
@redis_option
def status(run_id: str | None, **flags: Any) -> None:
    """Show a run's state (or list recent runs)."""
    _, store = _store(**flags)
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
        raise ConfigError(f"run {run_id!r} is unknown or expired")
    pct = 100 * snap.done / snap.total if snap.total else 0
    click.echo(f"run {run_id}: {state_text(snap)}")
    if snap.state == "paused":
        click.echo(f"  {pause_line(snap)}")
    click.echo(f"  done     {snap.done}/{snap.total} ({pct:.1f}%)")
    if snap.enqueued < snap.total:
        if snap.producer_gone:
            why = f"the producer is gone: re-run the same submit with --run-id {run_id}"
        elif snap.state.startswith("enqueuing") or snap.state == "paused":
            why = "enqueuing still under way"
        else:
            why = "never fully enqueued"
        click.echo(f"  enqueued {snap.enqueued}/{snap.total} ({why})")
    nulls = ", ".join(f"{k} {v}" for k, v in snap.nulls.items()) or "none"
    click.echo(f"  nulls    {snap.null_count} ({nulls})")
    rate = f"{snap.rate:.1f} jobs/s" if snap.rate else "–"
    click.echo(f"  rate     {rate}, ETA {fmt_duration(snap.eta_s) if snap.done < snap.total else '0s'}")
    if snap.questions:
        q = snap.questions
        click.echo(
            f"  hit@1    {100 * snap.hit1 / q:.1f}%  MRR {snap.rr_sum / q:.3f}  "
            f"pass@7 {100 * snap.pass7 / q:.1f}%"
        )


@click.command()
@click.argument("run_id")
@redis_option
@out_option
def report(run_id: str, **flags: Any) -> None:
    """Write the report files of a finished run (from Redis)."""
    settings, store = _store(**flags)
    data = store.report(run_id)
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
    import time

    from judgeq._pipeline import finalize_run
    from judgeq._timing import stall_after

    settings, store = _store(**flags)
    if store.spec(run_id) is None:
        raise ConfigError(f"run {run_id!r} is unknown or expired")
    state = store.state(run_id)
    quiet_for = time.time() - (store.last_progress(run_id) or float(state.get("started_epoch") or 0))
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

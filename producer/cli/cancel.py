"""``judgeq cancel RUN``: stop a run; what finished is reported."""

from __future__ import annotations

from typing import Any

import click

from judgeq.errors import ConfigError

from .options import out_option, redis_option, settings_from

__all__ = ["cancel"]


@click.command()
@click.argument("run_id")
@redis_option
@out_option
def cancel(run_id: str, **flags: Any) -> None:
    """Stop a run: its jobs without a result become null 'canceled' (workers drop their queued
    messages without a judge call), Message Batches in flight are canceled, and the report of
    what finished is written."""
    from judgeq.pipeline.stages import cancel_run

    from ..distributed import open_store
    from ..progress import summary_text, write_files

    settings = settings_from(**flags)
    store = open_store(settings)
    if store.spec(run_id) is None:
        raise ConfigError(f"run {run_id!r} is unknown or expired")
    state = store.state(run_id).get("state")
    if store.report(run_id) is not None and state in ("finished", "incomplete", "canceled"):
        raise ConfigError(f"run {run_id} has already ended ({state}): nothing to cancel")
    canceled, report = cancel_run(store, run_id)
    click.echo(
        f"judgeq: run {run_id} canceled: {canceled} job(s) had no result and are null 'canceled'", err=True
    )
    paths = write_files(store, run_id, report, settings.results_dir)
    click.echo(summary_text(report, paths))

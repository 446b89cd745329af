"""Waiting for a run and writing its files (``submit --wait``, ``run``, ``report``)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import click

from judgeq._errors import ConfigError
from judgeq._settings import Settings
from judgeq._store import Store

from ..progress import summary_text, wait_for_report, write_files
from .options import out_option, redis_option, settings_from


def wait_and_write(
    store: Store, run_id: str, settings: Settings, nudge: Callable[[], None] | None = None
) -> None:
    try:
        report = wait_for_report(store, run_id, nudge=nudge)
    except KeyboardInterrupt:
        click.echo(
            f"\njudgeq: stopped waiting; run {run_id} goes on. Check it with "
            f"'judgeq status {run_id}', fetch it with 'judgeq report {run_id}'.",
            err=True,
        )
        sys.exit(130)
    paths = write_files(store, run_id, report, settings.results_dir)
    click.echo(summary_text(report, paths))


@click.command("wait")
@click.argument("run_id")
@redis_option
@out_option
def wait_cmd(run_id: str, **flags: Any) -> None:
    """Re-attach to a run: show its progress until it finishes, then write its report files."""
    from ..distributed import open_store

    settings = settings_from(**flags)
    store = open_store(settings)
    if store.spec(run_id) is None:
        raise ConfigError(f"run {run_id!r} is unknown or expired")
    from judgeq.workers.celery_app import REDUCE_TASK, create_app

    app = create_app(settings)
    wait_and_write(
        store, run_id, settings, nudge=lambda: app.send_task(REDUCE_TASK, args=[run_id], queue=settings.queue)
    )

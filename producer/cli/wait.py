"""Waiting for a run and writing its files (``submit --wait``, ``run``, ``report``)."""

from __future__ import annotations

import sys
from collections.abc import Callable

import click

from judgeq._settings import Settings
from judgeq._store import Store

from ..progress import summary_text, wait_for_report, write_files


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

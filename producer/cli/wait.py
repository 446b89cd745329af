"""Waiting for a run and writing its files (``submit --wait``, ``run``, ``report``)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import click

from judgeq.settings import Settings
from judgeq.store.base import Store

from ..progress import summary_text
from .options import out_option, redis_option, settings_from

__all__ = ["wait_and_write", "wait_cmd"]


def wait_and_write(
    store: Store | None, run_id: str, settings: Settings, nudge: Callable[[], None] | None = None
) -> None:
    """:func:`judgeq.producer.distributed.wait_run` (what :func:`judgeq.wait` runs) with the
    command's messages: Ctrl-C stops the waiting, never the run."""
    from ..distributed import wait_run

    try:
        report, paths = wait_run(run_id, settings, stream=sys.stderr, store=store, nudge=nudge)
    except KeyboardInterrupt:
        click.echo(
            f"\njudgeq: stopped waiting; run {run_id} goes on. Check it with "
            f"'judgeq status {run_id}', fetch it with 'judgeq report {run_id}'.",
            err=True,
        )
        sys.exit(130)
    click.echo(summary_text(report, paths))


@click.command("wait")
@click.argument("run_id")
@redis_option
@out_option
def wait_cmd(run_id: str, **flags: Any) -> None:
    """Re-attach to a run: show its progress until it finishes, then write its report files."""
    wait_and_write(None, run_id, settings_from(**flags))

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

__all__ = ["KEEP_WAITING", "wait_and_write", "wait_cmd"]


KEEP_WAITING = click.option(
    "--keep-waiting",
    is_flag=True,
    help="When the run pauses (its cost cap, a refused key), keep waiting for 'judgeq resume' "
    "instead of returning with exit code 3.",
)


def wait_and_write(
    store: Store | None,
    run_id: str,
    settings: Settings,
    nudge: Callable[[], None] | None = None,
    keep_waiting: bool = False,
) -> None:
    """:func:`judgeq.producer.distributed.wait_run` (what :func:`judgeq.wait` runs) with the
    command's messages: Ctrl-C stops the waiting, never the run; a pause returns with one line
    and exit code 3 (:class:`~judgeq.errors.RunPaused`) unless ``keep_waiting``."""
    from ..distributed import wait_run

    try:
        report, paths = wait_run(
            run_id, settings, stream=sys.stderr, store=store, nudge=nudge, stop_on_pause=not keep_waiting
        )
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
@KEEP_WAITING
def wait_cmd(run_id: str, keep_waiting: bool, **flags: Any) -> None:
    """Re-attach to a run: show its progress until it finishes, then write its report files."""
    wait_and_write(None, run_id, settings_from(**flags), keep_waiting=keep_waiting)

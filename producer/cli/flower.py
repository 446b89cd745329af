"""``judgeq flower``: Flower on the judgeq app, with authentication (never without, unless asked).

The check itself runs where Flower starts (:mod:`judgeq.workers.flower_auth`), the same for
``celery -A judgeq.workers flower``; this command hands it the settings.
"""

from __future__ import annotations

from typing import Any

import click

from .options import redis_option, settings_from

__all__ = ["flower"]


@click.command(context_settings={"ignore_unknown_options": True})
@click.option("--port", type=int, default=5555, show_default=True)
@click.option("--address", default=None, help="Listen address [JUDGEQ_LISTEN_ADDRESS; default 127.0.0.1].")
@click.option("--no-auth", is_flag=True, help="Run without authentication (only on a trusted network).")
@redis_option
@click.argument("flower_args", nargs=-1, type=click.UNPROCESSED)
def flower(port: int, address: str | None, no_auth: bool, flower_args: tuple[str, ...], **flags: Any) -> None:
    """Start Flower to watch the workers and tasks (auth from JUDGEQ_FLOWER_USER/PASSWORD)."""
    from judgeq.workers.celery_app import create_app

    settings = settings_from(**flags)
    if no_auth:
        settings = settings.model_copy(update={"flower_no_auth": True})
    app = create_app(settings)
    # no --address: JUDGEQ_LISTEN_ADDRESS (flower_auth.bind_flower)
    where = [f"--address={address}"] if address else []
    app.start(argv=["flower", f"--port={port}", *where, *flower_args])

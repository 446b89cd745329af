"""``judgeq flower``: Flower on the judgeq app, with basic auth (never without, unless asked)."""

from __future__ import annotations

import os
from typing import Any

import click

from judgeq._errors import ConfigError

from .options import redis_option, settings_from


@click.command(context_settings={"ignore_unknown_options": True})
@click.option("--port", type=int, default=5555, show_default=True)
@click.option("--address", default="0.0.0.0", show_default=True)
@click.option("--no-auth", is_flag=True, help="Run without authentication (only on a trusted network).")
@redis_option
@click.argument("flower_args", nargs=-1, type=click.UNPROCESSED)
def flower(port: int, address: str, no_auth: bool, flower_args: tuple[str, ...], **flags: Any) -> None:
    """Start Flower to watch the workers and tasks (auth from JUDGEQ_FLOWER_USER/PASSWORD)."""
    settings = settings_from(**flags)
    if flags["redis_url"]:
        os.environ["JUDGEQ_REDIS_URL"] = flags["redis_url"]
    if not no_auth:
        if settings.flower_user and settings.flower_password:
            # through the environment, not argv: a password on the command line shows in `ps`
            os.environ["FLOWER_BASIC_AUTH"] = (
                f"{settings.flower_user}:{settings.flower_password.get_secret_value()}"
            )
        elif not os.environ.get("FLOWER_BASIC_AUTH") and not os.environ.get("FLOWER_AUTH"):
            raise ConfigError(
                "Flower needs credentials: set JUDGEQ_FLOWER_USER and JUDGEQ_FLOWER_PASSWORD "
                "(or FLOWER_BASIC_AUTH=user:password), or pass --no-auth explicitly"
            )
    else:
        os.environ["JUDGEQ_FLOWER_NO_AUTH"] = "1"
    from judgeq.workers import app

    app.start(argv=["flower", f"--port={port}", f"--address={address}", *flower_args])

"""Flower never serves without authentication unless asked to.

Flower also listens on loopback unless told otherwise (:func:`bind_flower`).

Checked where Flower starts, on the options Flower has parsed (not on argv): ``judgeq flower``
and ``celery -A judgeq.workers flower`` both build :class:`flower.app.Flower`, which imports
the app's task modules and so sends Celery's ``import_modules`` signal; the judgeq app's
receiver runs :func:`check_flower_auth` there when the running command is ``flower``.

Accepted: ``JUDGEQ_FLOWER_USER`` + ``JUDGEQ_FLOWER_PASSWORD`` (handed to Flower as its
``basic_auth`` option, never through argv or the environment), Flower's own ``--basic-auth``
/ ``FLOWER_BASIC_AUTH``, or OAuth (``--auth`` with an OAuth2 key and secret).  An option that
merely looks like auth (``--auth_provider=x`` alone) is not auth.  ``JUDGEQ_FLOWER_NO_AUTH=true``
(``judgeq flower --no-auth``) runs Flower open, with a warning.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from typing import Any

from judgeq.errors import ConfigError
from judgeq.settings import Settings

__all__ = ["REFUSAL", "bind_flower", "check_flower_auth"]

log = logging.getLogger("judgeq.flower")

REFUSAL = (
    "Flower would run without authentication. Set JUDGEQ_FLOWER_USER and JUDGEQ_FLOWER_PASSWORD "
    "(or FLOWER_BASIC_AUTH=user:password, or OAuth with --auth and an OAuth2 key and secret), "
    "or JUDGEQ_FLOWER_NO_AUTH=true (judgeq flower --no-auth) on a trusted network"
)


def bind_flower(options: Any, settings: Settings) -> str:
    """Flower listens on ``JUDGEQ_LISTEN_ADDRESS`` (loopback by default) unless its own
    ``--address`` (or a unix socket) says otherwise: Flower's default is every interface.
    Returns the address."""
    if not options.address and not options.unix_socket:
        options.address = settings.listen_address
    return str(options.address or options.unix_socket)


def check_flower_auth(options: Any, settings: Settings, environ: Mapping[str, str] | None = None) -> str:
    """Make Flower's parsed ``options`` authenticated or raise :class:`ConfigError`.

    Returns how Flower is protected (``basic``, ``oauth`` or ``none``)."""
    environ = os.environ if environ is None else environ
    if settings.flower_user and settings.flower_password and not options.basic_auth:
        options.basic_auth = [f"{settings.flower_user}:{settings.flower_password.get_secret_value()}"]
    if options.basic_auth:
        return "basic"
    key = options.oauth2_key or environ.get("FLOWER_OAUTH2_KEY")
    secret = options.oauth2_secret or environ.get("FLOWER_OAUTH2_SECRET")
    if options.auth and key and secret:
        return "oauth"
    if settings.flower_no_auth:
        log.warning("Flower runs WITHOUT authentication (JUDGEQ_FLOWER_NO_AUTH): use a trusted network only")
        return "none"
    raise ConfigError(REFUSAL)

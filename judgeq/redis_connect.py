"""Connecting to Redis: URL checks with clear errors, Sentinel (``sentinel://``), clients that
ride out a restart or a failover, and :func:`store_errors`, which turns a Redis failure into one
:class:`~judgeq.errors.StoreError`. Passwords are masked in every message."""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ParamSpec, TypeVar

import redis
from redis.backoff import ExponentialBackoff, NoBackoff
from redis.retry import Retry

from judgeq.errors import ConfigError, StoreError

__all__ = [
    "RECONNECT_RETRIES",
    "SentinelURL",
    "check_broker_url",
    "check_redis_url",
    "connect",
    "mask_url",
    "parse_sentinel_url",
    "store_errors",
]


def mask_url(url: str) -> str:
    """``redis://user:secret@host:6379/0`` -> ``redis://user:***@host:6379/0``.

    Works on the text, without parsing, so a malformed URL whose password holds ``/``, ``?``,
    ``#`` or ``@`` is masked too: everything between ``scheme://`` and the last ``@``. One
    exception keeps the host and port of a URL with an ``@`` in its query
    (``redis://:pw@host:6379/0?client_name=a@eu``): when what follows the first ``@`` is a
    host, an optional port and database, then a query of ``name=value`` pairs, the password
    ends at that first ``@``. A password that itself holds ``@``, then such a host and ``?x=``,
    cannot be told from that URL; nothing else of a password is ever shown."""
    scheme, sep, rest = url.partition("://")
    if not sep:  # malformed (``rediss//:pw@host``): nothing before the last '@' is shown
        return "***@" + url.rpartition("@")[2] if "@" in url else url
    first, last = rest.find("@"), rest.rfind("@")
    if last < 0:
        return url
    at = first if first != last and _HOST_THEN_QUERY.match(rest, first + 1) else last
    userinfo, host = rest[:at], rest[at + 1 :]
    user = userinfo.split(":", 1)[0] if ":" in userinfo else ""
    return f"{scheme}://{user}:***@{host}"


_HOST_THEN_QUERY = re.compile(
    r"(?:[A-Za-z0-9._-]+|\[[0-9A-Fa-f:.]+\])(?::[0-9]+)?(?:/[0-9]*)?\?[A-Za-z0-9_.-]+="
)
"""A host, an optional port and database, then the first ``name=`` of a query."""


RECONNECT_RETRIES = 40
"""Retries of a command after a connection error, with exponential backoff capped at 2 s:
about a minute, so clients ride out a Redis restart."""


@dataclass(frozen=True, slots=True)
class SentinelURL:
    """``sentinel://[:PASSWORD@]HOST:PORT[;sentinel://HOST:PORT...][/DB]?master_name=NAME``:
    the Redis behind Sentinels (kombu's form, with the master's name in the query)."""

    sentinels: tuple[tuple[str, int], ...]
    master_name: str
    db: int = 0
    password: str | None = None

    @property
    def kombu_url(self) -> str:
        """The broker URL for kombu (the master's name goes in its transport options)."""
        auth = f":{self.password}@" if self.password else ""
        return ";".join(f"sentinel://{auth}{h}:{p}/{self.db}" for h, p in self.sentinels)


def parse_sentinel_url(url: str) -> SentinelURL:
    """Parse a ``sentinel://`` URL (see :class:`SentinelURL`); ConfigError naming the problem."""
    from urllib.parse import parse_qs, urlsplit

    parts = [p for p in url.split(";") if p.strip()]
    sentinels: list[tuple[str, int]] = []
    master, db, password = "", 0, None
    for part in parts:
        u = urlsplit(part.strip())
        if u.scheme != "sentinel" or not u.hostname:
            raise ConfigError(
                f"Redis URL {mask_url(url)}: every part of a Sentinel URL is sentinel://HOST:PORT"
            )
        try:
            sentinels.append((u.hostname, u.port or 26379))
        except ValueError:
            raise ConfigError(f"Redis URL {mask_url(url)}: a Sentinel port is not a number") from None
        password = u.password or password
        if u.path.strip("/"):
            try:
                db = int(u.path.strip("/"))
            except ValueError:
                raise ConfigError(
                    f"Redis URL {mask_url(url)}: the database {u.path!r} is not a number"
                ) from None
        master = parse_qs(u.query).get("master_name", [master])[-1]
    if not master:
        raise ConfigError(
            f"Redis URL {mask_url(url)}: a Sentinel URL needs ?master_name=NAME (the monitored master)"
        )
    return SentinelURL(tuple(sentinels), master, db, password)


def _following_connection() -> type:
    """A Sentinel-managed connection that asks the Sentinels for the master whenever it
    reconnects. (redis-py's own reconnects through ``connect_check_health`` to the address it
    had, so after a failover it kept retrying the lost master until its retries ran out.)"""
    from redis.sentinel import SentinelManagedConnection

    class FollowingConnection(SentinelManagedConnection):
        def connect_check_health(self, check_health: bool = True, retry_socket_connect: bool = True) -> None:
            if self._sock:
                return
            if retry_socket_connect:  # a plain reconnect: resolve the master again first
                self.retry.call_with_retry(self._connect_retry, lambda error: None)
                return
            super().connect_check_health(check_health=check_health, retry_socket_connect=False)

    return FollowingConnection


def connect(url: str) -> redis.Redis:
    """A client checked with one PING (a clear error at once if Redis is down), which then
    retries commands across connection errors for about a minute (a Redis restart). A
    ``sentinel://`` URL connects to the master its Sentinels name (and follows a failover)."""
    try:
        options: dict[str, Any] = {
            "decode_responses": True,
            "socket_connect_timeout": 5,
            "socket_timeout": 30,
            "health_check_interval": 30,
            "retry": Retry(NoBackoff(), 0),
        }
        if url.startswith("sentinel://"):
            from redis.sentinel import Sentinel

            target = parse_sentinel_url(url)
            sentinel = Sentinel(list(target.sentinels), socket_timeout=5, socket_connect_timeout=5)
            sentinel.discover_master(target.master_name)  # a clear error at once when none is known
            # every connection retries through a failover (the pool asks the Sentinels again)
            options["retry"] = Retry(ExponentialBackoff(cap=2.0, base=0.1), RECONNECT_RETRIES)
            client: redis.Redis = sentinel.master_for(
                target.master_name,
                db=target.db,
                password=target.password,
                connection_class=_following_connection(),
                **options,
            )
        else:
            check_redis_url(url)
            client = redis.Redis.from_url(url, **options)
        client.ping()
        client.set_retry(Retry(ExponentialBackoff(cap=2.0, base=0.1), RECONNECT_RETRIES))
    except ConfigError:
        raise
    except redis.AuthenticationError:  # a ConnectionError subclass: test it first
        raise StoreError(f"Redis at {mask_url(url)} refused the password") from None
    except redis.ResponseError as exc:  # e.g. "DB index is out of range"
        raise ConfigError(f"Redis URL {mask_url(url)}: {_scrub(str(exc), url)}") from None
    except (redis.ConnectionError, redis.TimeoutError, OSError) as exc:
        raise StoreError(f"cannot reach Redis at {mask_url(url)}: {_scrub(str(exc), url)}") from None
    except ValueError:
        raise ConfigError(f"invalid Redis URL {mask_url(url)} (e.g. redis://:PASSWORD@host:6379/0)") from None
    return client


def check_redis_url(url: str) -> None:
    """ConfigError for what redis-py would read wrongly rather than refuse: a database that is
    not one number (``/abc`` would be database 0, ``/1/2`` database 12), and a password with a
    character that ends the address part (``/``, ``?``, ``#``: the rest would be read as the
    host and shown in errors), which must be percent-encoded."""
    from urllib.parse import parse_qs, urlsplit

    if url.partition("://")[0] not in ("redis", "rediss"):
        return  # unix:// and others: redis-py's own checks
    parts = urlsplit(url)
    try:
        _ = parts.port  # ValueError when it is not a number: the authority was cut short
        authority_ok = bool(parts.hostname)
    except ValueError:
        authority_ok = False
    # an '@' past the authority: a '/', '?' or '#' of the password ended it early (an '@' in the
    # query of a URL whose authority is a good host[:port] is the query's own: client_name=a@b)
    if "@" in parts.path or ("@" in parts.query + parts.fragment and not authority_ok):
        raise ConfigError(
            f"invalid Redis URL {mask_url(url)}: a password containing '/', '?' or '#' must be "
            "percent-encoded (%2F, %3F, %23)"
        )
    path = parts.path.strip("/")
    dbs = parse_qs(parts.query).get("db", [])
    for db in ([path] if path else []) + dbs:
        if not db.isdigit():
            raise ConfigError(f"Redis URL {mask_url(url)}: the database {db!r} is not a number (e.g. /0)")


BROKER_SCHEMES = ("redis", "rediss", "redis+socket", "sentinel", "amqp", "amqps", "pyamqp", "memory")
"""The broker URLs judgeq runs on (kombu's transports it is tested with; memory: tests)."""


def check_broker_url(url: str, name: str = "broker URL") -> None:
    """ConfigError (the URL masked) for a broker URL kombu would misread rather than refuse:
    one without ``scheme://`` or with a scheme judgeq does not run on (kombu takes
    ``rediss//:pw@host`` for the name of an AMQP host, and Flower prints it, password and all),
    or a Redis URL :func:`check_redis_url` refuses."""
    scheme, sep, _ = url.partition("://")
    if not sep or scheme.lower() not in BROKER_SCHEMES:
        example = "redis://:PASSWORD@host:6379/0"
        if "broker" in name:
            example += f" or amqp://user:PASSWORD@host:5672//; schemes: {', '.join(BROKER_SCHEMES[:-1])}"
        raise ConfigError(f"invalid {name} {mask_url(url)} (e.g. {example})")
    check_redis_url(url)


def _scrub(text: str, url: str) -> str:
    """``text`` without the URL's password (error messages never show it)."""
    userinfo = url.partition("://")[2].rpartition("@")[0]
    password = userinfo.split(":", 1)[1] if ":" in userinfo else ""
    return text.replace(password, "***") if password else text


P = ParamSpec("P")
R = TypeVar("R")


def store_errors(method: Callable[P, R]) -> Callable[P, R]:
    """Redis failing under a call made while grading (the reply cache, the judge budget) is the
    store failing, never the job: raise :class:`~judgeq.StoreError`, which puts the job's message
    back, instead of letting the job end as an ``internal_error`` null."""

    @functools.wraps(method)
    def wrapped(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return method(*args, **kwargs)
        except redis.RedisError as exc:
            raise StoreError(f"Redis failed during grading: {type(exc).__name__}: {exc}") from exc

    return wrapped

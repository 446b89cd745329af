"""Settings: one object, read from ``JUDGEQ_*`` environment variables, overridden by flags.

Built once at the edge (CLI entry, Celery app) and passed down; the core never reads the
environment.  ``ANTHROPIC_API_KEY`` and ``ANTHROPIC_BASE_URL`` are read under the names the
SDK uses; the key is a :class:`~pydantic.SecretStr` and never leaves the process that reads
it (it is not put in Redis, task messages, logs or reports).
"""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import AliasChoices, Field, SecretStr, ValidationError, field_validator
from pydantic_core import PydanticCustomError
from pydantic_settings import BaseSettings, SettingsConfigDict

from judgeq.errors import ConfigError
from judgeq.ratelimit.policy import Limits
from judgeq.telemetry.jsonlog import redact

__all__ = [
    "BUDGET_GROUPS_EXAMPLE",
    "GROUP_NAME",
    "PREFIX",
    "RETENTION_S",
    "WEIGHT_PREFIX",
    "Settings",
    "default",
    "default_thresholds",
    "known_variables",
    "load_settings",
    "parse_budget_groups",
    "unknown_variables",
]

PREFIX = "JUDGEQ_"
WEIGHT_PREFIX = "JUDGEQ_WEIGHT_"


class Settings(BaseSettings):
    """Every ``JUDGEQ_…`` variable, with its default (see docs/configuration.md)."""

    model_config = SettingsConfigDict(env_prefix="JUDGEQ_", extra="ignore", frozen=True)

    redis_url: str = "redis://localhost:6379/0"
    broker_url: str | None = None
    judge: str | None = None
    judge_modules: str = ""
    """Comma-separated modules ``python:`` judges may be loaded from (``JUDGEQ_JUDGE_MODULES``)."""
    judge_urls: str = ""
    """Comma-separated servers ``openai-compatible:`` judges may call (``JUDGEQ_JUDGE_URLS``)."""
    judge_timeout: float = Field(30.0, gt=0)
    judge_deadline: float = Field(120.0, gt=0)
    max_rate_limited: int = Field(10, ge=1, le=1000)
    """A job the server refuses (429) this many times in all ends ``rate_limited``."""
    judge_max_tokens: int = Field(1024, ge=16, le=64000)
    judge_rpm: int | None = Field(None, ge=1)
    judge_itpm: int | None = Field(None, ge=1)
    judge_otpm: int | None = Field(None, ge=1)
    judge_share: float | None = Field(None, gt=0, le=1)
    """A run takes at most this share of its judges' limits (``--share``)."""
    budget_groups: str = ""
    """Judges that share one rate limit the table of shared limits cannot know (the names of one
    model behind a gateway): ``GROUP=JUDGE,JUDGE;GROUP=JUDGE,...`` (``JUDGEQ_BUDGET_GROUPS``), each
    JUDGE as ``--judge`` takes it. The judges of a group share one budget, named after the group
    (:func:`judgeq.judges.budget_name`); see :meth:`budget_group_map`."""
    max_cost: float | None = Field(None, gt=0)
    """USD: a run stops sending judge calls once its spend reaches this (it pauses)."""
    prices: Path | None = None
    """A prices file of the user's own (the format of ``judgeq/data/prices.json``): its entries
    add models or replace the shipped ones (:func:`judgeq.judges.prices.load_prices`). Read by the
    producer only: a run records its judges' prices in its spec."""
    cache: bool = True
    archive: bool = False
    """Workers move finished runs out of Redis into ``results_dir`` (verdicts.jsonl.gz + report)."""
    archive_after: float = Field(60.0, ge=0)
    """Seconds after its report before a finished run is archived (a waiting producer reads it first)."""
    batch_api: bool = False
    """Send judge calls through the Message Batches API (``--batch-api``): 50% off, slower."""
    batch_flush_interval: float = Field(60.0, gt=0)
    batch_poll_interval: float = Field(30.0, gt=0)
    batch_max_requests: int = Field(100_000, ge=1, le=100_000)
    batch_max_bytes: int = Field(250_000_000, ge=1_000_000, le=256_000_000)
    cache_ttl: float = Field(7 * 86400.0, gt=0)
    cache_dir: Path | None = None
    """Where ``judgeq run`` keeps its reply cache; None: ``$XDG_CACHE_HOME/judgeq`` or
    ``~/.cache/judgeq`` (see :meth:`reply_cache_path`)."""
    safety_gate: bool | None = None
    safety_score_cap: float = 0.0
    thresholds: str = "8,7,6.5"
    retention_days: float = Field(7.0, gt=0)
    max_queue_depth: int = Field(20000, ge=1)
    enqueue_chunk: int = Field(500, ge=1)
    max_line_bytes: int = Field(8 * 1024 * 1024, ge=1024)
    max_field_chars: int = Field(1_000_000, ge=100)
    results_dir: Path = Path("results")
    queue: str = "judgeq"
    concurrency: int = Field(16, ge=1)
    jobs_per_message: int = Field(8, ge=1, le=256)
    pool: str = "threads"
    visibility_timeout: float | None = Field(None, gt=0)
    flower_user: str | None = None
    flower_password: SecretStr | None = None
    flower_no_auth: bool = False
    log_level: str = "INFO"
    log_format: Literal["text", "json"] = "text"
    """``json``: one JSON object per log line, with an event line per judge call, stored job
    and run state change (:mod:`judgeq.telemetry.jsonlog`)."""
    metrics_port: int | None = Field(None, ge=0, le=65535)
    """A worker serves Prometheus metrics on this port (``/metrics``); unset: none."""
    exporter_port: int = Field(9808, ge=0, le=65535)
    """``judgeq exporter``'s port: the Redis-side figures, once for the cluster."""
    listen_address: str = Field("127.0.0.1", min_length=1)
    """The address a worker's metrics, ``judgeq exporter`` and ``judgeq flower`` listen on:
    loopback unless told otherwise (``0.0.0.0``: every interface, behind a firewall; in a
    container, the container's network, published on the host's loopback by compose)."""
    health_file: Path | None = None
    task_events: bool = True
    repair_stalled: bool = True
    systemic_failures: int = Field(20, ge=1)
    judge_wait_max: float = Field(3600.0, gt=0)
    """How long a run waits for a judge that answers no job (an outage, a 429 storm) before it
    pauses for a person (its jobs held either way, never nulled)."""
    task_retries: int = Field(3, ge=0, le=100)
    task_retry_delay: float = Field(5.0, ge=0)
    judge_check_interval: float = Field(60.0, gt=0)
    debug: bool = False
    weights: dict[str, float] = Field(default_factory=dict)
    """Dimension weight overrides, from ``JUDGEQ_WEIGHT_<DIMENSION>`` variables."""

    anthropic_api_key: SecretStr | None = Field(
        None, validation_alias=AliasChoices("ANTHROPIC_API_KEY", "anthropic_api_key")
    )
    anthropic_base_url: str | None = Field(
        None, validation_alias=AliasChoices("ANTHROPIC_BASE_URL", "anthropic_base_url")
    )

    @field_validator("anthropic_api_key", "anthropic_base_url", mode="before")
    @classmethod
    def _empty_is_unset(cls, value: Any) -> Any:
        """``ANTHROPIC_API_KEY=`` (empty) means no key, as for the SDK."""
        raw = value.get_secret_value() if isinstance(value, SecretStr) else value
        return None if isinstance(raw, str) and not raw.strip() else value

    @field_validator("budget_groups")
    @classmethod
    def _budget_groups_are_well_formed(cls, value: str) -> str:
        try:
            parse_budget_groups(value)
        except ValueError as exc:
            raise PydanticCustomError("budget_groups", "{why}", {"why": redact(str(exc))}) from None
        return value

    def budget_group_map(self) -> dict[str, tuple[str, ...]]:
        """:attr:`budget_groups` as ``{group: (judge, ...)}`` (the judges as written)."""
        return parse_budget_groups(self.budget_groups)

    def judge_module_list(self) -> list[str]:
        """:attr:`judge_modules` as a list."""
        return [m.strip() for m in self.judge_modules.split(",") if m.strip()]

    def judge_url_list(self) -> list[str]:
        """:attr:`judge_urls` as a list."""
        return [u.strip() for u in self.judge_urls.split(",") if u.strip()]

    def judge_limits(self) -> Limits:
        """The judge limits given (``JUDGEQ_JUDGE_RPM/ITPM/OTPM`` or the flags)."""
        return Limits(self.judge_rpm, self.judge_itpm, self.judge_otpm)

    def reply_cache_path(self) -> Path:
        base = self.cache_dir or Path(os.environ.get("XDG_CACHE_HOME") or "~/.cache").expanduser() / "judgeq"
        return base / "replies.sqlite3"

    @property
    def effective_broker_url(self) -> str:
        return self.broker_url or self.redis_url


GROUP_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
"""A budget group's name: it names a budget (``group:NAME:…``), so no ``:``, space or brace."""

BUDGET_GROUPS_EXAMPLE = (
    "gw=openai-compatible:claude@http://gw:4000/v1,openai-compatible:sonnet@http://gw:4000/v1"
)


def parse_budget_groups(text: str) -> dict[str, tuple[str, ...]]:
    """``GROUP=JUDGE,JUDGE;GROUP=JUDGE,...`` as ``{group: (judge, ...)}``: groups apart by ``;``,
    the judges of one by ``,`` (white space around either ignored; empty text: no group).
    ValueError saying which part is wrong: no ``=``, a name not of :data:`GROUP_NAME`, a group
    given twice or naming no judge, a judge in two groups. The judges' form is checked where they
    are read (:func:`judgeq.judges.budget_groups`)."""
    groups: dict[str, tuple[str, ...]] = {}
    group_of: dict[str, str] = {}
    for part in (p.strip() for p in text.split(";")):
        if not part:
            continue
        name, sep, listed = (s.strip() for s in part.partition("="))
        if not sep:
            raise ValueError(
                f"{part!r} has no '=': write GROUP=JUDGE,JUDGE;... (e.g. {BUDGET_GROUPS_EXAMPLE})"
            )
        if not GROUP_NAME.fullmatch(name):
            raise ValueError(
                f"group name {name!r} in {part!r}: 1 to 64 letters, digits, '.', '_' or '-' "
                "(not starting with '.', '_' or '-')"
            )
        if name in groups:
            raise ValueError(f"group {name!r} is given twice")
        judges = tuple(dict.fromkeys(j.strip() for j in listed.split(",") if j.strip()))
        if not judges:
            raise ValueError(f"group {name!r} names no judge (e.g. {BUDGET_GROUPS_EXAMPLE})")
        for judge in judges:
            if any(c.isspace() for c in judge):
                raise ValueError(f"group {name!r}: judge {judge!r} contains white space")
            if judge in group_of:
                raise ValueError(f"judge {judge!r} is in two groups, {group_of[judge]!r} and {name!r}")
            group_of[judge] = name
        groups[name] = judges
    return groups


def default(name: str) -> Any:
    """The default of setting ``name``: the one place a default lives, which the core's own
    dataclasses (:class:`~judgeq.runspec.RunSpec`, :class:`~judgeq.judges.base.RetryPolicy`, the stores,
    the aggregator) take theirs from."""
    return Settings.model_fields[name].get_default(call_default_factory=True)


def default_thresholds() -> tuple[float, ...]:
    """The default ``pass_rates`` thresholds (``JUDGEQ_THRESHOLDS``'s default), as numbers."""
    return tuple(float(x) for x in default("thresholds").split(","))


RETENTION_S = int(default("retention_days") * 86400)
"""The default retention of runs in Redis, in seconds."""


def known_variables() -> list[str]:
    """Every ``JUDGEQ_…`` variable name the settings read (weights aside)."""
    fields = (
        name for name in Settings.model_fields if not name.startswith("anthropic") and name != "weights"
    )
    return sorted(PREFIX + name.upper() for name in fields)


def unknown_variables(environ: Mapping[str, str] | None = None) -> list[str]:
    """One line per ``JUDGEQ_…`` variable that no setting reads, with the closest valid name."""
    environ = os.environ if environ is None else environ
    known = known_variables()
    lines = []
    for key in sorted(environ):
        if not key.startswith(PREFIX) or key in known:
            continue
        if key.startswith(WEIGHT_PREFIX) and len(key) > len(WEIGHT_PREFIX):
            continue
        head = key[: len(WEIGHT_PREFIX)]
        if difflib.SequenceMatcher(None, head, WEIGHT_PREFIX).ratio() >= 0.85:
            close = [WEIGHT_PREFIX + "<DIMENSION>"]
        else:
            close = difflib.get_close_matches(key, known, n=1, cutoff=0.6)
        hint = f" (did you mean {close[0]}?)" if close else " (see docs/configuration.md)"
        lines.append(f"unknown setting {key} is ignored{hint}")
    return lines


def load_settings(*, given_as: Mapping[str, str] | None = None, **overrides: Any) -> Settings:
    """Settings from the environment, with non-None ``overrides`` (CLI flags) on top; an error
    in an override names it by ``given_as`` (its flag: ``--concurrency``), else by its variable."""
    clean = {k: v for k, v in overrides.items() if v is not None}
    try:
        if "weights" not in clean:
            from judgeq.rubric.model import weights_from_env  # _rubric imports nothing of this module

            clean["weights"] = weights_from_env(os.environ)
        return Settings(**clean)
    except ValidationError as exc:
        err = exc.errors()[0]
        field = str(err["loc"][0]) if err["loc"] else ""
        if given_as and field in given_as and field in clean:
            name = given_as[field]
        else:
            name = PREFIX + "_".join(str(p) for p in err["loc"]).upper()
        raise ConfigError(f"{name}: {err['msg']}") from None

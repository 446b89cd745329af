"""Settings: one object, read from ``JUDGEQ_*`` environment variables, overridden by flags.

Built once at the edge (CLI entry, Celery app) and passed down; the core never reads the
environment.  ``ANTHROPIC_API_KEY`` and ``ANTHROPIC_BASE_URL`` are read under the names the
SDK uses; the key is a :class:`~pydantic.SecretStr` and never leaves the process that reads
it (it is not put in Redis, task messages, logs or reports).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import AliasChoices, Field, SecretStr, ValidationError
from pydantic_settings import BaseSettings, SettingsConfigDict

from ._errors import ConfigError


class Settings(BaseSettings):
    """Every ``JUDGEQ_…`` variable, with its default (see the README's configuration table)."""

    model_config = SettingsConfigDict(env_prefix="JUDGEQ_", extra="ignore", frozen=True)

    redis_url: str = "redis://localhost:6379/0"
    broker_url: str | None = None
    judge: str | None = None
    judge_timeout: float = Field(30.0, gt=0)
    judge_deadline: float = Field(120.0, gt=0)
    judge_max_tokens: int = Field(1024, ge=16, le=64000)
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
    health_file: Path | None = None
    task_events: bool = True
    repair_stalled: bool = True

    anthropic_api_key: SecretStr | None = Field(
        None, validation_alias=AliasChoices("ANTHROPIC_API_KEY", "anthropic_api_key")
    )
    anthropic_base_url: str | None = Field(
        None, validation_alias=AliasChoices("ANTHROPIC_BASE_URL", "anthropic_base_url")
    )

    @property
    def effective_broker_url(self) -> str:
        return self.broker_url or self.redis_url


def load_settings(**overrides: Any) -> Settings:
    """Settings from the environment, with non-None ``overrides`` (CLI flags) on top."""
    clean = {k: v for k, v in overrides.items() if v is not None}
    try:
        return Settings(**clean)
    except ValidationError as exc:
        err = exc.errors()[0]
        name = "JUDGEQ_" + "_".join(str(p) for p in err["loc"]).upper()
        raise ConfigError(f"{name}: {err['msg']}") from None


def mask_url(url: str) -> str:
    """``redis://user:secret@host:6379/0`` -> ``redis://user:***@host:6379/0``.

    Works on the text, without parsing, so a password containing ``/``, ``?``, ``#`` or ``@``
    is masked too (everything between ``scheme://`` and the last ``@``)."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        return url
    userinfo, at, host = rest.rpartition("@")
    if not at:
        return url
    user = userinfo.split(":", 1)[0] if ":" in userinfo else ""
    return f"{scheme}://{user}:***@{host}"

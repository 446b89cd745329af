"""A judge's answer as received (:class:`JudgeReply`): what every provider's adapter returns
and a batch's items carry; its own module so that the batch protocol
(:mod:`judgeq.judges.batches`) and the judge's base (:mod:`judgeq.judges.base`) both use it
without importing each other."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["JudgeReply"]


@dataclass(slots=True)
class JudgeReply:
    """A judge's answer, as received."""

    text: str = ""
    tool_input: dict[str, Any] | None = None
    stop_reason: str | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_input_tokens: int = 0
    cache_creation_input_tokens: int = 0
    model: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    """The answer's rate-limit headers (``anthropic-ratelimit-*``)."""
    paid_by: str | None = None
    """For a reply from the reply cache: the ``run:job index`` whose judge call paid for it."""
    response_format: str | None = None
    """How the verdict was asked for (``json_schema``, ``json_object``, ``text``): provenance,
    not kept in the reply cache."""
    limit_input_tokens: int | None = None
    """The input tokens the provider counts against its rate limit, when that is not the
    default; None: ``input_tokens + cache_creation_input_tokens`` (Anthropic: cache reads do not
    count towards its input tokens a minute, "Cache-aware ITPM" in
    https://docs.anthropic.com/en/api/rate-limits). OpenAI counts cached tokens too: its adapter
    sets the whole prompt here."""

"""A provider's batch API as a judge offers it: the protocol a batch-capable judge implements
(:class:`BatchJudge`: the Anthropic adapter over Message Batches, the OpenAI adapter over the
Batch API, test doubles) and the values it returns. The batch lane
(:mod:`judgeq.pipeline.batch_lane`) drives them; an adapter needs only this module."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from judgeq.errors import JudgeAPIError, JudgeCanceled, JudgeError, JudgeTimeout
from judgeq.grading.request import JudgeRequest
from judgeq.judges.reply import JudgeReply

__all__ = ["BatchInfo", "BatchItem", "BatchJudge", "batch_item_error", "batch_label"]


@dataclass(frozen=True, slots=True)
class BatchInfo:
    """A batch as the API describes it, in the lane's words."""

    id: str
    status: str
    """``in_progress``, ``canceling`` or ``ended`` (an adapter maps its API's states onto these)."""
    counts: dict[str, int] = field(default_factory=dict)
    """The API's request counts (Anthropic: ``processing``, ``succeeded``, ``errored``,
    ``canceled``, ``expired``; OpenAI: ``total``, ``completed``, ``failed``)."""
    error: str | None = None
    """Why the whole batch failed, when it did (OpenAI: its input file was refused): the reason
    given to each of its jobs."""
    retryable: bool = False
    """The failure is the moment's, not the batch's (OpenAI's ``token_limit_exceeded``: too many
    tokens enqueued for the model): its jobs go back to be sent again later, not nulls."""


@dataclass(frozen=True, slots=True)
class BatchItem:
    """One line of a batch's results: a reply, or the error that stands for it."""

    custom_id: str
    reply: JudgeReply | None = None
    error: JudgeError | None = None


@runtime_checkable
class BatchJudge(Protocol):
    """A judge that can also take batches (the Anthropic and OpenAI adapters, test doubles);
    its ``batch_label``, ``batch_max_requests`` and ``batch_max_bytes`` are
    :class:`~judgeq.judges.base.JudgeBase`'s (what its batches are called; its API's limits on
    one batch, None for none: the lane's settings are capped by them)."""

    provider: str
    model: str
    batch_label: str
    batch_max_requests: int | None
    batch_max_bytes: int | None

    def batch_params(self, request: JudgeRequest) -> dict[str, Any]:
        """The body of one request of a batch (its size bounds the request's cost)."""
        ...

    def batch_create(self, requests: list[tuple[str, dict[str, Any]]]) -> BatchInfo:
        """Send ``(custom_id, params)`` requests as one batch; raises JudgeError."""
        ...

    def batch_retrieve(self, batch_id: str) -> BatchInfo: ...
    def batch_results(self, batch_id: str) -> Iterator[BatchItem]: ...
    def batch_cancel(self, batch_id: str) -> BatchInfo: ...


def batch_item_error(kind: str, message: str = "", label: str = "Message Batch") -> JudgeError:
    """The error a non-succeeded batch result stands for: ``errored`` -> api_error,
    ``expired`` -> timeout, ``canceled`` -> canceled."""
    if kind == "expired":
        return JudgeTimeout(f"the {label} expired (24 h) before this request was processed")
    if kind == "canceled":
        return JudgeCanceled(f"the {label} was canceled before this request was processed")
    return JudgeAPIError(f"errored in the {label}: {message}"[:500] if message else f"errored in the {label}")


def batch_label(judge: BatchJudge) -> str:
    """What a judge's batches are called (:attr:`~judgeq.judges.base.JudgeBase.batch_label`)."""
    return judge.batch_label

"""The provider's Message Batches as a judge offers them: the protocol a batch-capable judge
implements (:class:`BatchJudge`, the Anthropic adapter and test doubles) and the values it
returns. The batch lane (:mod:`judgeq.pipeline.batch_lane`) drives them; an adapter needs only
this module."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from judgeq.errors import JudgeAPIError, JudgeCanceled, JudgeError, JudgeTimeout
from judgeq.judges.base import JudgeReply

__all__ = ["BatchInfo", "BatchItem", "BatchJudge", "batch_item_error"]


@dataclass(frozen=True, slots=True)
class BatchInfo:
    """A Message Batch as the API describes it."""

    id: str
    status: str
    """``in_progress``, ``canceling`` or ``ended``."""
    counts: dict[str, int] = field(default_factory=dict)
    """``processing``, ``succeeded``, ``errored``, ``canceled``, ``expired``."""


@dataclass(frozen=True, slots=True)
class BatchItem:
    """One line of a batch's results: a reply, or the error that stands for it."""

    custom_id: str
    reply: JudgeReply | None = None
    error: JudgeError | None = None


@runtime_checkable
class BatchJudge(Protocol):
    """A judge that can also take Message Batches (the Anthropic adapter, test doubles)."""

    provider: str
    model: str

    def batch_create(self, requests: list[tuple[str, dict[str, Any]]]) -> BatchInfo:
        """Send ``(custom_id, params)`` requests as one batch; raises JudgeError."""
        ...

    def batch_retrieve(self, batch_id: str) -> BatchInfo: ...
    def batch_results(self, batch_id: str) -> Iterator[BatchItem]: ...
    def batch_cancel(self, batch_id: str) -> BatchInfo: ...


def batch_item_error(kind: str, message: str = "") -> JudgeError:
    """The error a non-succeeded batch result stands for: ``errored`` -> api_error,
    ``expired`` -> timeout, ``canceled`` -> canceled."""
    if kind == "expired":
        return JudgeTimeout("the Message Batch expired (24 h) before this request was processed")
    if kind == "canceled":
        return JudgeCanceled("the Message Batch was canceled before this request was processed")
    return JudgeAPIError(
        f"errored in the Message Batch: {message}"[:500] if message else "errored in the Message Batch"
    )

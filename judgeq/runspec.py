"""A run's specification: everything a worker needs to grade its jobs, stored once per run.

It holds the rubric's full text (workers on other machines need no rubric files), the
judge's provider and model, and the grading settings; never a secret.
"""

from __future__ import annotations

import secrets
import time
from datetime import UTC, datetime
from functools import cached_property
from typing import Any, Literal

from pydantic import AliasChoices, BaseModel, ConfigDict, Field

from judgeq.grading.cascade import CascadeSpec
from judgeq.jobs.grade import Jury
from judgeq.judges import JudgeSpec, stored_judge
from judgeq.judges.base import RetryPolicy
from judgeq.judges.prices import Price, Prices, shipped_prices
from judgeq.judges.providers import is_offline
from judgeq.ratelimit import Share
from judgeq.rubric.model import RetrievalConfig, Rubric, parse_rubric
from judgeq.settings import default, default_thresholds

__all__ = ["RunSpec", "iso_time", "new_run_id", "utcnow"]


def new_run_id() -> str:
    """``20261122-101500-3f9a1c``: sortable, short, unique enough."""
    return time.strftime("%Y%m%d-%H%M%S", time.gmtime()) + "-" + secrets.token_hex(3)


def utcnow() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def iso_time(epoch: float) -> str:
    """``epoch`` seconds as :func:`utcnow` writes a time (``2025-01-31T12:00:00.000Z``)."""
    return datetime.fromtimestamp(epoch, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class RunSpec(BaseModel):
    """The registered description of a run (JSON in the store)."""

    model_config = ConfigDict(extra="forbid", frozen=True, serialize_by_alias=True)

    run_id: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
    rubric_text: str
    rubric_source: str
    weights: dict[str, float] = Field(default_factory=dict)
    judge_provider: str
    judge_model: str
    thresholds: list[float] = Field(default_factory=lambda: list(default_thresholds()))
    total: int = 0
    jobs_file: str = Field(
        "", validation_alias=AliasChoices("jobs_file", "batch"), serialization_alias="batch"
    )
    """The jobs file graded (its path as given, ``<stdin>`` or ``<python>``). Stored as ``batch``,
    the name every version reads (a rolling upgrade mixes them)."""
    jobs_fingerprint: str = Field(
        "",
        validation_alias=AliasChoices("jobs_fingerprint", "batch_fingerprint"),
        serialization_alias="batch_fingerprint",
    )
    """A fingerprint of the jobs file's valid lines (a re-submitted run id must grade the same)."""
    created_at: str = Field(default_factory=utcnow)
    judge_timeout: float = default("judge_timeout")
    judge_deadline: float = default("judge_deadline")
    max_rate_limited: int = default("max_rate_limited")
    max_tokens: int = default("judge_max_tokens")
    safety_gate: bool | None = None
    safety_cap: float = 0.0
    retrieval: RetrievalConfig | None = None
    cache: bool = True
    lane: Literal["live", "batch"] = "live"
    """``batch``: judge calls go through the Message Batches API (``--batch-api``)."""
    council: list[str] = Field(default_factory=list)
    """The other judges of a council (``--judge A --judge B``), as ``provider:model``."""
    council_mode: Literal["mean", "z"] = "mean"
    jury: Literal["median", "mean"] | None = None
    """The council is a jury (``--jury``): its members' scores combine by this; its categories
    by the panel's strict majority (:class:`judgeq.jobs.grade.Jury`)."""
    no_majority: Literal["tie", "null"] = "null"
    """A jury's pair with no majority: a tie, or a null (``--no-majority``)."""
    cascade: CascadeSpec | None = None
    """The run's judges (the first and the council) are a cascade, in order of cost, with
    these thresholds (``--cascade``; :mod:`judgeq.grading.cascade`)."""
    swap: bool = True
    """Pair jobs are judged in both orders (``--no-swap``: once, A first)."""
    disagreement: float | None = None
    """Judges disagree on a job when their scores spread more (default: 30% of the scale)."""
    rpm: int | None = None
    itpm: int | None = None
    otpm: int | None = None
    """The judge limits set when the run was submitted (they belong to the judge, not the run:
    :meth:`judgeq.ratelimit.Budget.configure`); kept for the record."""
    share: float | None = Field(None, gt=0, le=1)
    """The share of its judges' limits the run takes at most (``--share``)."""
    rejected_count: int = 0
    rejected: list[dict[str, Any]] = Field(default_factory=list)

    pass_threshold: float | None = None
    """Overrides the rubric's pass threshold (``judgeq rescore --pass-threshold``)."""

    prices: dict[str, Price] | None = None
    """The price of each LLM judge model of the run that has one, resolved by the producer
    (the shipped prices with the user's ``JUDGEQ_PRICES`` file on top): workers and the reducer
    price the run's calls with these alone. None: a run registered before prices were recorded
    (the shipped prices apply)."""
    prices_taken: str = ""
    """Where and when :attr:`prices` were taken."""

    def price_book(self) -> Prices:
        """The prices of this run's judge calls (see :attr:`prices`)."""
        if self.prices is None:
            return shipped_prices()
        return Prices(self.prices, {}, self.prices_taken or shipped_prices().taken)

    def unpriced_models(self) -> list[str]:
        """The run's LLM judge models without a price: their cost is unknown (never $0)."""
        book = self.price_book()
        return [
            judge.model
            for judge in dict.fromkeys(self.judges)
            if not is_offline(judge.provider) and book.lookup(judge.model) is None
        ]

    @cached_property
    def rubric(self) -> Rubric:
        rubric = parse_rubric(self.rubric_text, self.rubric_source)
        rubric = rubric.with_weights(self.weights) if self.weights else rubric
        return rubric if self.pass_threshold is None else rubric.with_pass_threshold(self.pass_threshold)

    def policy(self) -> RetryPolicy:
        return RetryPolicy(
            timeout=self.judge_timeout, deadline=self.judge_deadline, max_rate_limited=self.max_rate_limited
        )

    def budget_share(self) -> Share | None:
        """The run's :class:`~judgeq.ratelimit.Share` of its judges' limits, if it asked for one."""
        return Share(self.run_id, self.share) if self.share else None

    def jury_rules(self) -> Jury | None:
        """The jury's rules, when the run's council is one."""
        return Jury(self.jury, self.no_majority) if self.jury is not None and self.council else None

    @property
    def council_rule(self) -> str:
        """How the council combines, as the report names it: ``mean``, ``z``, ``jury-median``,
        ``jury-mean``; ``cascade`` for a cascade's judges."""
        if self.cascade is not None:
            return "cascade"
        return f"jury-{self.jury}" if self.jury_rules() is not None else self.council_mode

    @property
    def judge(self) -> JudgeSpec:
        """The run's (first) judge."""
        return JudgeSpec(self.judge_provider, self.judge_model)

    @property
    def judges(self) -> list[JudgeSpec]:
        """Every judge of the run (each a ``(provider, model)`` pair), the first ``--judge`` first."""
        return [self.judge, *(stored_judge(c) for c in self.council)]

"""The judge's budget: requests, input tokens and output tokens per minute, shared by every
caller of one judge (provider + model + API key).

A :class:`Budget` is a set of token buckets, one per limit, full at the limit and refilled
continuously at limit/60 per second, like the provider's own.  Before each judge attempt the
caller reserves one request, its estimated input tokens and ``max_tokens`` output tokens
(:meth:`Budget.acquire`); after it, the reservation is reconciled with the usage the API
reports (:meth:`Budget.settle`: unused output and over-estimated input are refunded).

Which limits apply: for each of the three, the lower of

1. the limit given for the run (``--rpm/--itpm/--otpm``, ``JUDGEQ_JUDGE_RPM/ITPM/OTPM``), and
2. the server's word: the ``anthropic-ratelimit-*-limit`` response headers
   (:meth:`Budget.observe`), learned by every worker from any answer;

and when neither is known, adaptively (requests only): no limit until the first 429, then
half the rate granted in the last minute, halved again on later 429s (once per congestion
event: :data:`ADAPTIVE_EPOCH`) and raised slowly (5 % a minute) by successful calls.

On a 429 every caller of the judge waits until the server's ``retry-after`` has passed
(:meth:`Budget.throttled`).  Waiting for budget never turns a job into a null, and it is not
counted against the job's judge deadline (:func:`judgeq.call_with_retries`).

:class:`MemoryBudget` serves one process (``judgeq run``); the Redis implementation
(:mod:`judgeq.redis_budget`) is shared by every worker process and machine, and runs the
same algorithm atomically in one Lua script.  Both pass one contract test.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Protocol

DIMENSIONS = ("requests", "input-tokens", "output-tokens")
"""The three limits, named as in the provider's headers."""

ADAPTIVE_GROWTH = 0.05
"""Adaptive mode: the request rate grows by this fraction of itself per minute of successes."""

ADAPTIVE_EPOCH = 5.0
"""Adaptive mode: 429s within this many seconds of a halving are one congestion event (the
calls in flight when the server said no), so they halve the rate once."""


@dataclass(frozen=True, slots=True)
class Limits:
    """Per-minute limits given for a run; None: not given (the server's or adaptive)."""

    rpm: int | None = None
    itpm: int | None = None
    otpm: int | None = None

    def as_tuple(self) -> tuple[int, int, int]:
        return (self.rpm or 0, self.itpm or 0, self.otpm or 0)


NO_LIMITS = Limits()


@dataclass(frozen=True, slots=True)
class Usage:
    """What one judge attempt used (as the API reports it): requests 1, and its tokens."""

    input_tokens: int = 0
    output_tokens: int = 0


class Budget(Protocol):
    """The judge budget shared by every caller of one judge (see the module docstring)."""

    def acquire(self, input_tokens: int, output_tokens: int, limits: Limits) -> float:
        """Reserve one request and these tokens: 0.0 when granted, else the seconds to wait
        before asking again (nothing reserved)."""
        ...

    def settle(self, reserved: Usage, used: Usage) -> None:
        """Reconcile a granted reservation with what the attempt used (refund or charge)."""
        ...

    def observe(self, headers: Mapping[str, str]) -> None:
        """Learn the server's limits from an answer's ``anthropic-ratelimit-*`` headers; when
        they are new, also take the server's ``remaining`` as the level (calls made before
        the limits were known have spent part of the server's bucket)."""
        ...

    def throttled(self, retry_after: float | None, limits: Limits) -> None:
        """The server answered 429: every caller waits ``retry_after`` seconds (adaptive mode,
        when no request limit is known, also halves its rate)."""
        ...


def budget_key(provider: str, model: str, api_key: str | None) -> str:
    """The budget's name: provider, model and a hash of the key (never the key itself)."""
    digest = hashlib.sha256((api_key or "").encode()).hexdigest()[:16]
    return f"{provider}:{model}:{digest}"


def estimate_input_tokens(text_chars: int) -> int:
    """Input tokens estimated before a call: about 4 characters a token, rounded up (an
    over-estimate for JSON and English; reconciled with the real count afterwards)."""
    return -(-text_chars // 4)


def server_limits(headers: Mapping[str, str], what: str = "limit") -> dict[str, int]:
    """``{"requests": N, "input-tokens": N, "output-tokens": N}`` from the headers present:
    the ``limit`` (default) or ``remaining`` values."""
    out: dict[str, int] = {}
    lowered = {k.lower(): v for k, v in headers.items()}
    for dim in DIMENSIONS:
        value = lowered.get(f"anthropic-ratelimit-{dim}-{what}")
        if value is not None:
            try:
                out[dim] = int(float(value))
            except ValueError:
                continue
    return out


def wait_for_budget(
    budget: Budget | None,
    reserve: Usage,
    limits: Limits,
    *,
    sleep: Callable[[float], None],
    max_step: float = 1.0,
) -> float:
    """Block until ``budget`` grants ``reserve``; the seconds waited (0.0 without a budget).

    Sleeps at most ``max_step`` at a time, so a caller notices a budget freed early (another
    worker's refund)."""
    if budget is None:
        return 0.0
    waited = 0.0
    while True:
        wait = budget.acquire(reserve.input_tokens, reserve.output_tokens, limits)
        if wait <= 0.0:
            return waited
        step = min(wait, max_step)
        sleep(step)
        waited += step


@dataclass(slots=True)
class _Bucket:
    level: float = -1.0  # -1: not started (full on first use)


class MemoryBudget:
    """A :class:`Budget` for one process (``judgeq run``, tests); ``clock`` is injectable."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._levels = {dim: _Bucket() for dim in DIMENSIONS}
        self._server: dict[str, int] = {}
        self._adaptive = 0.0  # adaptive request limit; 0: none yet
        self._at = clock()
        self._pause_until = 0.0
        self._halved_at = float("-inf")
        self._recent: list[float] = []  # grant times within the last minute (adaptive start)

    def _limits(self, limits: Limits) -> dict[str, float]:
        given = dict(zip(DIMENSIONS, limits.as_tuple(), strict=True))
        out: dict[str, float] = {}
        for dim in DIMENSIONS:
            known = [x for x in (given[dim], self._server.get(dim, 0)) if x]
            limit: float = min(known) if known else 0.0
            if not limit and dim == "requests":
                limit = self._adaptive
            if limit:
                out[dim] = float(limit)
        return out

    def _refill(self, now: float, limits: dict[str, float]) -> None:
        elapsed = max(0.0, now - self._at)
        self._at = now
        for dim, limit in limits.items():
            b = self._levels[dim]
            b.level = limit if b.level < 0 else min(limit, b.level + elapsed * limit / 60.0)

    def acquire(self, input_tokens: int, output_tokens: int, limits: Limits) -> float:
        with self._lock:
            now = self._clock()
            if now < self._pause_until:
                return self._pause_until - now
            effective = self._limits(limits)
            self._refill(now, effective)
            need = {
                "requests": 1.0,
                "input-tokens": float(input_tokens),
                "output-tokens": float(output_tokens),
            }
            wait = 0.0
            for dim, limit in effective.items():
                want = min(need[dim], limit)  # a request larger than the bucket waits for a full one
                level = self._levels[dim].level
                if level < want - 1e-6:  # a rounding remnant is no wait (it would never pass)
                    wait = max(wait, (want - level) * 60.0 / limit)
            if wait > 0.0:
                return wait
            for dim in effective:
                self._levels[dim].level -= need[dim]
            self._recent = [t for t in self._recent if t > now - 60.0]
            self._recent.append(now)
            return 0.0

    def settle(self, reserved: Usage, used: Usage) -> None:
        with self._lock:
            for dim, back in (
                ("input-tokens", reserved.input_tokens - used.input_tokens),
                ("output-tokens", reserved.output_tokens - used.output_tokens),
            ):
                if self._levels[dim].level >= 0:
                    self._levels[dim].level += back
            if self._adaptive and not self._server.get("requests"):
                self._adaptive += ADAPTIVE_GROWTH

    def observe(self, headers: Mapping[str, str]) -> None:
        learned = server_limits(headers)
        if not learned:
            return
        with self._lock:
            if all(self._server.get(k) == v for k, v in learned.items()):
                return
            self._server.update(learned)
            for dim, remaining in server_limits(headers, "remaining").items():
                b = self._levels[dim]
                b.level = float(remaining) if b.level < 0 else min(b.level, float(remaining))

    def throttled(self, retry_after: float | None, limits: Limits) -> None:
        with self._lock:
            now = self._clock()
            self._pause_until = max(
                self._pause_until, now + (retry_after if retry_after is not None else 1.0)
            )
            if (
                not self._server.get("requests")
                and not limits.rpm
                and now - self._halved_at >= ADAPTIVE_EPOCH
            ):
                self._halved_at = now
                seen = len([t for t in self._recent if t > now - 60.0])
                self._adaptive = max(1.0, (self._adaptive or float(seen)) / 2)
                level = self._levels["requests"]
                level.level = min(level.level, self._adaptive) if level.level >= 0 else 0.0

"""How servers enforce a per-minute limit: the models the stand-in servers
(:mod:`judgeq.testing.fake_anthropic`) and the budget simulator (:mod:`judgeq.testing.budget_sim`)
both enforce, written once. Every model is driven by the caller's clock (``now``, seconds), so
the simulator runs them on a virtual clock and the stand-ins on the real one.

* ``token_bucket`` -- one bucket per limit, full at the limit and refilled continuously (the
  Anthropic API's own, as its rate-limit page describes it);
* ``sliding_window`` -- at most N in ANY 60-second interval (a gateway counting the last 60 s);
* ``fixed_window`` -- at most N per calendar minute, counted from 0 at each minute's start
  (LiteLLM's proxy counts per minute this way: a burst at the end of one minute and another at
  the start of the next both pass);
* ``per_second`` -- at most ``max(1, N // 60)`` in any sliding second (a per-minute limit
  enforced over shorter intervals, as Anthropic and OpenAI document they may).

A request larger than a model's capacity is admitted when the model is otherwise full (empty
window, full bucket) and overdraws it: a server never refuses a request for ever. An amount
reserved before the server knows it (output tokens: ``max_tokens`` at the start of a request,
as Anthropic documents its OTPM limit: "estimated based on max_tokens at the beginning of each
request, and adjusted at the end of the request to reflect the actual number of output tokens
used"; OpenAI likewise counts ``max_tokens`` in its token limit) is settled to what was used
with ``settle``.
"""

from __future__ import annotations

import math
from collections import deque

__all__ = [
    "LIMIT_MODELS",
    "Bucket",
    "FixedWindow",
    "Limiter",
    "Window",
    "make_limit",
]

LIMIT_MODELS = ("token_bucket", "sliding_window", "per_second", "fixed_window")


class Bucket:
    """``token_bucket``: ``per_minute`` per minute, refilled continuously, full at the limit.
    An amount larger than the limit is admitted by a full bucket, which it overdraws."""

    def __init__(self, per_minute: int, now: float) -> None:
        self.per_minute = per_minute
        self.limit = float(per_minute)
        self.level = self.limit
        self.at = now

    def _refill(self, now: float) -> None:
        if now > self.at:
            self.level = min(self.limit, self.level + (now - self.at) * self.limit / 60.0)
            self.at = now

    def wait_for(self, amount: float, now: float) -> float:
        """Seconds until ``amount`` can be taken (0: now)."""
        self._refill(now)
        return max(0.0, (min(amount, self.limit) - self.level) * 60.0 / self.limit)

    def take(self, amount: float, now: float) -> None:
        self._refill(now)
        self.level -= amount

    def settle(self, at: float, reserved: float, used: float, now: float) -> None:
        """An amount ``reserved`` at ``at`` turned out to be ``used``: the difference comes back
        (or is taken)."""
        self._refill(now)
        self.level = min(self.limit, self.level + reserved - used)

    def remaining(self, now: float) -> int:
        self._refill(now)
        return max(0, int(self.level))

    def replenished_in(self, now: float) -> float:
        """Seconds until the bucket is full again."""
        self._refill(now)
        return max(0.0, self.limit - self.level) * 60.0 / self.limit

    def rescale(self, per_minute: int, now: float) -> None:
        """The limit changes: what was taken stays taken (the level, at most the new limit)."""
        self._refill(now)
        self.per_minute, self.limit = per_minute, float(per_minute)
        self.level = min(self.level, self.limit)


class Window:
    """``sliding_window`` (span 60 s, capacity the per-minute limit) and ``per_second`` (span
    1 s, capacity ``max(1, per_minute // 60)``): at most ``capacity`` in any ``span``-second
    interval. An amount taken at ``t`` counts until ``t + span`` (half-open intervals). An
    amount larger than the capacity is admitted when the window is otherwise empty."""

    def __init__(self, per_minute: int, capacity: int, span: float) -> None:
        self.per_minute = per_minute
        self.capacity = capacity
        self.span = span
        self.entries: deque[tuple[float, float]] = deque()
        self.used = 0.0

    def _expire(self, now: float) -> None:
        while self.entries and self.entries[0][0] + self.span <= now:
            self.used -= self.entries.popleft()[1]
        if not self.entries:
            self.used = 0.0

    def wait_for(self, amount: float, now: float) -> float:
        """Seconds until the oldest amounts have slid out far enough to admit ``amount``."""
        self._expire(now)
        allowed = self.capacity - min(amount, self.capacity)
        used = self.used
        if used <= allowed:
            return 0.0
        for at, taken in self.entries:
            used -= taken
            if used <= allowed:
                return at + self.span - now
        return 0.0  # unreachable: an empty window admits anything

    def take(self, amount: float, now: float) -> None:
        self._expire(now)
        if amount > 0:
            self.entries.append((now, amount))
            self.used += amount

    def settle(self, at: float, reserved: float, used: float, now: float) -> None:
        """An amount ``reserved`` at ``at`` turned out to be ``used``: it counts as that for the
        rest of its span (nothing, once it has slid out)."""
        self._expire(now)
        for i, (t, amount) in enumerate(self.entries):
            if t == at and amount == reserved:
                self.entries[i] = (t, used)
                self.used += used - reserved
                return

    def remaining(self, now: float) -> int:
        self._expire(now)
        return max(0, int(self.capacity - self.used))

    def replenished_in(self, now: float) -> float:
        """Seconds until the window is empty again (the newest amount has slid out)."""
        self._expire(now)
        return self.entries[-1][0] + self.span - now if self.entries else 0.0

    def rescale(self, per_minute: int, now: float) -> None:
        """The limit changes: what the window holds stays in it."""
        self.capacity = per_minute if self.span >= 60.0 else max(1, per_minute // 60)
        self.per_minute = per_minute


class FixedWindow:
    """``fixed_window``: at most ``per_minute`` in each calendar minute ``[60k, 60(k+1))``; the
    count starts from 0 at each minute's start. An amount larger than the limit is admitted
    into an empty minute."""

    def __init__(self, per_minute: int) -> None:
        self.per_minute = per_minute
        self.minute = -1
        self.used = 0.0

    def _roll(self, now: float) -> None:
        minute = math.floor(now / 60.0)
        if minute != self.minute:
            self.minute, self.used = minute, 0.0

    def wait_for(self, amount: float, now: float) -> float:
        self._roll(now)
        if self.used == 0.0 or self.used + amount <= self.per_minute:
            return 0.0
        return (self.minute + 1) * 60.0 - now

    def take(self, amount: float, now: float) -> None:
        self._roll(now)
        self.used += amount

    def settle(self, at: float, reserved: float, used: float, now: float) -> None:
        """An amount ``reserved`` at ``at`` turned out to be ``used``: it counts as that in its
        minute (nothing, once that minute is over)."""
        self._roll(now)
        if math.floor(at / 60.0) == self.minute:
            self.used += used - reserved

    def remaining(self, now: float) -> int:
        self._roll(now)
        return max(0, int(self.per_minute - self.used))

    def replenished_in(self, now: float) -> float:
        self._roll(now)
        return (self.minute + 1) * 60.0 - now if self.used else 0.0

    def rescale(self, per_minute: int, now: float) -> None:
        """The limit changes: what this minute counted stays counted."""
        self.per_minute = per_minute


Limiter = Bucket | Window | FixedWindow


def make_limit(model: str, per_minute: int, now: float) -> Limiter:
    """The limiter of ``model`` (one of :data:`LIMIT_MODELS`) for ``per_minute``."""
    if model == "sliding_window":
        return Window(per_minute, per_minute, 60.0)
    if model == "per_second":
        return Window(per_minute, max(1, per_minute // 60), 1.0)
    if model == "fixed_window":
        return FixedWindow(per_minute)
    if model == "token_bucket":
        return Bucket(per_minute, now)
    raise ValueError(f"limit model must be one of {', '.join(LIMIT_MODELS)}; got {model!r}")

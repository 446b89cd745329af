"""A clock a test moves by hand: injected where judgeq takes a ``clock`` (and a ``sleep``), so a
test drives time instead of waiting for it."""

from __future__ import annotations

__all__ = ["ManualClock"]


class ManualClock:
    """``clock()`` answers :attr:`now`; :meth:`sleep` moves it on (nothing waits)."""

    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds

"""The retry loop: backoff honouring retry-after, the per-job deadline, non-retryable errors."""

from __future__ import annotations

import random

from judgeq import (
    JudgeAuthError,
    JudgeOverloaded,
    JudgeRateLimited,
    JudgeReply,
    JudgeTimeout,
    RetryPolicy,
    call_with_retries,
)
from judgeq._render import JudgeRequest

REQ = JudgeRequest(system=("s",), user="u", output_schema={})


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, s: float) -> None:
        self.sleeps.append(s)
        self.now += s


class Scripted:
    provider, model = "test", "scripted"

    def __init__(self, clock: FakeClock, script: list, cost: float = 0.1) -> None:
        self.clock, self.script, self.cost = clock, list(script), cost
        self.timeouts: list[float] = []

    def complete(self, request: JudgeRequest, *, timeout: float) -> JudgeReply:
        self.timeouts.append(timeout)
        step = self.script.pop(0) if self.script else JudgeReply(text="ok")
        self.clock.now += min(self.cost, timeout)
        if isinstance(step, Exception):
            raise step
        return step


def run(script: list, policy: RetryPolicy, cost: float = 0.1):
    clock = FakeClock()
    judge = Scripted(clock, script, cost)
    out = call_with_retries(judge, REQ, policy, clock=clock, sleep=clock.sleep, rng=random.Random(1))
    return out, clock, judge


def test_retry_after_is_honoured() -> None:
    out, clock, _ = run(
        [JudgeRateLimited("429", retry_after=2.5), JudgeOverloaded("529", retry_after=1.0)], RetryPolicy()
    )
    assert out.reply is not None and out.attempts == 3
    assert clock.sleeps == [2.5, 1.0]
    assert out.errors == ["rate_limited", "overloaded"]


def test_backoff_grows_without_retry_after() -> None:
    out, clock, _ = run([JudgeTimeout("t")] * 3, RetryPolicy(base_delay=1.0))
    assert out.reply is not None
    assert 0.5 <= clock.sleeps[0] <= 1.0 and 1.0 <= clock.sleeps[1] <= 2.0 and 2.0 <= clock.sleeps[2] <= 4.0


def test_non_retryable_stops_at_once() -> None:
    out, clock, _ = run([JudgeAuthError("401")], RetryPolicy())
    assert out.reply is None and out.error is not None and out.error.reason == "auth_error"
    assert out.attempts == 1 and clock.sleeps == []


def test_deadline_bounds_all_attempts() -> None:
    policy = RetryPolicy(timeout=3.0, deadline=10.0, base_delay=0.5)
    out, clock, judge = run([JudgeTimeout("t")] * 100, policy, cost=3.0)
    assert out.reply is None and out.error.reason == "timeout"
    assert clock.now <= 10.0 + 1e-9
    assert all(t <= 3.0 for t in judge.timeouts)
    # the last attempt's timeout was cut to what was left of the deadline
    assert judge.timeouts[-1] < 3.0 or clock.now <= 10.0


def test_retry_after_beyond_deadline_gives_up_with_that_reason() -> None:
    out, clock, _ = run([JudgeRateLimited("429", retry_after=500)], RetryPolicy(deadline=60))
    assert out.reply is None and out.error.reason == "rate_limited" and clock.sleeps == []

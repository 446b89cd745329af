"""The retry loop: backoff honouring retry-after, the per-job deadline, non-retryable errors."""

from __future__ import annotations

import random

import pytest

from judgeq import (
    JudgeAPIError,
    JudgeAuthError,
    JudgeOverloaded,
    JudgeRateLimited,
    JudgeReply,
    JudgeTimeout,
)
from judgeq.grading.request import JudgeRequest
from judgeq.judges.base import RetryPolicy, call_with_retries
from judgeq.ratelimit import Limits, MemoryBudget, policy

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
    # the last attempt's timeout was cut to what was left of the deadline: it timed out at it
    assert judge.timeouts[-1] < 3.0
    assert clock.now == pytest.approx(10.0)


def test_retry_after_beyond_deadline_gives_up_with_that_reason() -> None:
    out, clock, _ = run([JudgeRateLimited("429", retry_after=500)], RetryPolicy(deadline=60))
    assert out.reply is None and out.error.reason == "rate_limited" and clock.sleeps == []


def test_a_deadline_cut_timeout_keeps_the_judges_reason() -> None:
    # 500 every time; the last attempt only has 0.5 s left of the deadline and times out
    policy = RetryPolicy(timeout=2.0, deadline=4.0, base_delay=0.1, max_delay=0.1)
    script = [JudgeAPIError("500"), JudgeAPIError("500"), JudgeAPIError("500"), JudgeTimeout("cut")]
    out, _, judge = run(script, policy, cost=1.0)
    assert out.reply is None and out.error.reason == "api_error"
    assert out.errors[-1] == "timeout" and judge.timeouts[-1] < 2.0


def test_a_full_length_timeout_is_the_reason() -> None:
    policy = RetryPolicy(timeout=1.0, deadline=2.1, base_delay=0.05, max_delay=0.05)
    out, _, judge = run([JudgeAPIError("500"), JudgeTimeout("t")], policy, cost=1.0)
    assert judge.timeouts == [1.0, 1.0]  # the second attempt had its full time
    assert out.reply is None and out.error.reason == "timeout"


class RecordingGate:
    """A gate that records when it is held, and makes the first acquire wait ``delay``."""

    def __init__(self, clock: FakeClock, delay: float = 0.0) -> None:
        self.clock, self.delay = clock, delay
        self.held = False
        self.log: list[str] = []

    def acquire(self, blocking: bool = True, timeout: float | None = None) -> bool:
        assert not self.held, "acquired twice without a release"
        self.clock.now += self.delay  # waiting for a place
        self.delay = 0.0
        self.held = True
        self.log.append("acquire")
        return True

    def release(self) -> None:
        assert self.held, "released without an acquire"
        self.held = False
        self.log.append("release")


class GateChecking(Scripted):
    def __init__(self, clock: FakeClock, script: list, gate: RecordingGate, cost: float = 0.1) -> None:
        super().__init__(clock, script, cost)
        self.gate = gate

    def complete(self, request: JudgeRequest, *, timeout: float) -> JudgeReply:
        assert self.gate.held, "a judge call outside the gate"
        return super().complete(request, timeout=timeout)


def gated_run(script: list, policy: RetryPolicy, delay: float = 0.0, cost: float = 0.1):
    clock = FakeClock()
    gate = RecordingGate(clock, delay)
    judge = GateChecking(clock, script, gate, cost)
    sleeps_while_held: list[bool] = []

    def sleep(s: float) -> None:
        sleeps_while_held.append(gate.held)
        clock.sleep(s)

    out = call_with_retries(judge, REQ, policy, clock=clock, sleep=sleep, rng=random.Random(1), gate=gate)
    return out, gate, sleeps_while_held


def test_the_gate_is_held_for_each_attempt_only() -> None:
    script = [JudgeOverloaded("529", retry_after=1.0), JudgeAPIError("500"), JudgeReply(text="ok")]
    out, gate, sleeps_while_held = gated_run(script, RetryPolicy(base_delay=0.2))
    assert out.reply is not None and out.attempts == 3
    assert gate.log == ["acquire", "release"] * 3 and not gate.held
    assert sleeps_while_held == [False, False], "backing off must not hold a place"


def test_the_gate_is_released_when_the_judge_fails_for_good_or_raises() -> None:
    out, gate, _ = gated_run([JudgeAuthError("401")], RetryPolicy())
    assert out.error is not None and out.error.reason == "auth_error" and not gate.held

    class Broken(GateChecking):
        def complete(self, request: JudgeRequest, *, timeout: float) -> JudgeReply:
            raise RuntimeError("a bug in the judge adapter")

    clock = FakeClock()
    gate = RecordingGate(clock)
    with pytest.raises(RuntimeError):
        call_with_retries(
            Broken(clock, [], gate), REQ, RetryPolicy(), clock=clock, sleep=clock.sleep, gate=gate
        )
    assert gate.log == ["acquire", "release"]


def test_waiting_for_the_gate_does_not_count_against_the_deadline() -> None:
    policy = RetryPolicy(timeout=3.0, deadline=5.0)
    out, _, _ = gated_run([JudgeReply(text="ok")], policy, delay=60.0)
    assert out.reply is not None and out.attempts == 1  # a minute in line, then a full attempt


# -- with the shared budget: waiting for it is not judge time ---------------------------------------


def test_waiting_for_budget_does_not_eat_the_deadline() -> None:
    clock = FakeClock()
    budget = MemoryBudget(clock=clock)
    budget.configure(Limits(rpm=1))  # one call a minute: the second job waits ~60 s for its request
    policy = RetryPolicy(timeout=2.0, deadline=5.0)
    judge = Scripted(clock, [], cost=0.1)
    first = call_with_retries(judge, REQ, policy, clock=clock, sleep=clock.sleep, budget=budget)
    start = clock.now
    second = call_with_retries(judge, REQ, policy, clock=clock, sleep=clock.sleep, budget=budget)
    assert first.reply is not None and second.reply is not None  # not a timeout null
    assert clock.now - start >= 55.0  # it did wait for the budget, far past its 5 s deadline
    assert judge.timeouts == [2.0, 2.0]  # and its attempt still had its whole timeout


def test_429s_wait_retry_after_outside_the_deadline_then_the_job_is_rate_limited() -> None:
    clock = FakeClock()
    budget = MemoryBudget(clock=clock)
    policy = RetryPolicy(timeout=2.0, deadline=5.0, max_rate_limited=3)
    # two 429s: the job waits the server's retry-after each time (no attempt is counted, the
    # deadline is not eaten), then answers: graded
    judge = Scripted(clock, [JudgeRateLimited("429", retry_after=10.0)] * 2)
    out = call_with_retries(judge, REQ, policy, clock=clock, sleep=clock.sleep, budget=budget)
    assert out.reply is not None and out.errors == ["rate_limited"] * 2
    assert clock.now >= 20.0
    # refused max_rate_limited times in all: the job ends rate_limited after exactly that many calls
    judge = Scripted(clock, [JudgeRateLimited("429", retry_after=1.0)] * 20)
    out = call_with_retries(judge, REQ, policy, clock=clock, sleep=clock.sleep, budget=budget)
    assert out.reply is None and out.error is not None and out.error.reason == "rate_limited"
    assert len(judge.timeouts) == 3 and out.errors == ["rate_limited"] * 3


def test_the_default_policy_ends_a_job_after_ten_refused_calls_in_all() -> None:
    clock = FakeClock()
    budget = MemoryBudget(clock=clock)
    judge = Scripted(clock, [JudgeRateLimited("429", retry_after=0.0)] * 50)
    out = call_with_retries(judge, REQ, RetryPolicy(), clock=clock, sleep=clock.sleep, budget=budget)
    assert out.error is not None and out.error.reason == "rate_limited"
    assert len(judge.timeouts) == 10


def test_a_429_without_retry_after_backs_off_exponentially() -> None:
    clock = FakeClock()
    budget = MemoryBudget(clock=clock)
    judge = Scripted(clock, [JudgeRateLimited("429", retry_after=None)] * 3)
    out = call_with_retries(
        judge, REQ, RetryPolicy(), clock=clock, sleep=clock.sleep, budget=budget, rng=random.Random(1)
    )
    assert out.reply is not None
    assert len(clock.sleeps) == 3 and clock.sleeps[0] < clock.sleeps[1] < clock.sleeps[2]


def test_a_job_refused_for_itself_does_not_slow_the_others() -> None:
    # ten calls of one job refused with retry-after 0 while others are served: no pause, no
    # limit made up for everyone
    clock = FakeClock()
    budget = MemoryBudget(clock=clock)
    ok = Scripted(clock, [], cost=0.02)
    for _ in range(30):
        assert call_with_retries(ok, REQ, RetryPolicy(), clock=clock, sleep=clock.sleep, budget=budget).reply
    bad = Scripted(clock, [JudgeRateLimited("429", retry_after=0.0)] * 50, cost=0.02)
    for _ in range(3):
        out = call_with_retries(bad, REQ, RetryPolicy(), clock=clock, sleep=clock.sleep, budget=budget)
        assert out.error is not None and out.error.reason == "rate_limited"
        for _ in range(10):
            call_with_retries(ok, REQ, RetryPolicy(), clock=clock, sleep=clock.sleep, budget=budget)
    state = budget.snapshot()
    assert state.adaptive_rpm is None and state.paused_for == 0.0


def test_under_a_known_limit_a_job_refused_for_itself_waits_in_no_line() -> None:
    # 6 a minute: a request every 10.5 s at the pace. A job the server refuses whatever the load,
    # right after jobs it served: from its second call on it goes without waiting for the
    # budget (Budget.acquire's own_epoch and first_epoch; test_budget.py: what it gives back)
    clock = FakeClock()
    budget = MemoryBudget(clock=clock)
    budget.configure(Limits(rpm=6))
    ok = Scripted(clock, [], cost=0.5)
    for _ in range(2):
        assert call_with_retries(ok, REQ, RetryPolicy(), clock=clock, sleep=clock.sleep, budget=budget).reply
    bad = Scripted(clock, [JudgeRateLimited("429", retry_after=0.2)] * 50, cost=0.05)
    start = clock.now
    out = call_with_retries(bad, REQ, RetryPolicy(), clock=clock, sleep=clock.sleep, budget=budget)
    assert out.error is not None and out.error.reason == "rate_limited"
    assert len(bad.timeouts) == 10
    # its ten calls and their retry-afters, and one wait for the pace (before its first call):
    # it was 10.5 s before each call
    assert clock.now - start <= 10 * 0.05 + 9 * 0.2 + 60 / 6 / policy.PACE + 0.01

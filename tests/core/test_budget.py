"""The judge budget: one contract for the in-process and the Redis implementation (fakeredis
runs the same Lua as Redis), plus the wait helper."""

from __future__ import annotations

from collections.abc import Iterator

import fakeredis
import pytest

from judgeq._budget import Budget, Limits, MemoryBudget, Usage, budget_key, server_limits, wait_for_budget
from judgeq.redis_budget import RedisBudget

NONE = Limits()


@pytest.fixture(params=["memory", "redis"])
def budget(request: pytest.FixtureRequest) -> Iterator[Budget]:
    if request.param == "memory":
        yield MemoryBudget()
    else:
        yield RedisBudget(fakeredis.FakeRedis(decode_responses=True), "anthropic:m:abc")


def grants(budget: Budget, n: int, limits: Limits, tokens: tuple[int, int] = (10, 10)) -> list[bool]:
    return [budget.acquire(*tokens, limits) == 0.0 for _ in range(n)]


def test_a_full_bucket_grants_the_limit_then_says_how_long_to_wait(budget: Budget) -> None:
    assert grants(budget, 3, Limits(rpm=3)) == [True, True, True]
    wait = budget.acquire(10, 10, Limits(rpm=3))
    # one request refills in 60/3 s (the lower bounds leave room for a stalled machine)
    assert 10.0 < wait <= 20.0
    assert 10.0 < budget.acquire(10, 10, Limits(rpm=3)) <= 20.0  # a refused ask reserved nothing


def test_without_any_limit_everything_is_granted(budget: Budget) -> None:
    assert all(grants(budget, 200, NONE))


def test_unused_output_is_refunded(budget: Budget) -> None:
    limits = Limits(otpm=1000)
    assert budget.acquire(0, 600, limits) == 0.0
    assert budget.acquire(0, 600, limits) > 0.0
    budget.settle(Usage(0, 600), Usage(0, 100))  # the verdict took 100 of its 600
    assert budget.acquire(0, 600, limits) == 0.0


def test_input_is_reconciled_with_the_real_count(budget: Budget) -> None:
    limits = Limits(itpm=1000)
    assert budget.acquire(500, 0, limits) == 0.0
    budget.settle(Usage(500, 0), Usage(900, 0))  # the estimate was 400 short
    assert budget.acquire(500, 0, limits) > 0.0  # 1000 - 900 < 500


def test_the_server_limit_is_learned_and_the_lower_limit_wins(budget: Budget) -> None:
    budget.observe({"anthropic-ratelimit-requests-limit": "2"})
    assert grants(budget, 3, Limits(rpm=10)) == [True, True, False]


def test_the_server_limit_is_learned_again_after_the_shared_budget_expired() -> None:
    # a long-running worker learned the limit once; the budget in Redis then expired (an idle
    # hour, or Redis lost it). The next answer's headers must teach it again (old: the worker
    # thought it knew them, wrote nothing, and every call was granted: 50 of 50 against 5)
    r = fakeredis.FakeRedis(decode_responses=True)
    budget = RedisBudget(r, "anthropic:m:abc")
    headers = {"anthropic-ratelimit-requests-limit": "5", "anthropic-ratelimit-requests-remaining": "5"}
    budget.acquire(1, 1, NONE)
    budget.observe(headers)
    assert r.ttl(budget.keys[0]) > 0
    r.delete(*budget.keys)  # expired
    budget.acquire(1, 1, NONE)
    budget.observe(headers)
    assert sum(grants(budget, 50, NONE, (1, 1))) == 5


def test_new_limits_take_the_servers_remaining_as_the_level(budget: Budget) -> None:
    assert all(grants(budget, 5, NONE))  # calls made before any limit was known
    budget.observe(
        {"anthropic-ratelimit-requests-limit": "10", "anthropic-ratelimit-requests-remaining": "2"}
    )
    assert grants(budget, 3, NONE) == [True, True, False]
    budget.observe(
        {"anthropic-ratelimit-requests-limit": "10", "anthropic-ratelimit-requests-remaining": "9"}
    )
    assert grants(budget, 1, NONE) == [False]  # known limits: later answers do not reset the level


def test_a_429_pauses_every_caller_for_retry_after(budget: Budget) -> None:
    budget.throttled(5.0, Limits(rpm=100))
    wait = budget.acquire(1, 1, Limits(rpm=100))
    assert 2.0 < wait <= 5.0


def test_adaptive_mode_halves_the_rate_it_saw_on_a_429(budget: Budget) -> None:
    assert all(grants(budget, 20, NONE))  # no limit known: 20 granted in this minute
    budget.throttled(0.0, NONE)  # the server says no: the rate becomes 10 a minute
    budget.throttled(0.0, NONE)  # another call of the same burst: the same congestion event
    assert 0.0 < budget.acquire(1, 1, NONE) <= 6.01  # one request every 6 s, bucket emptied
    budget.settle(Usage(1, 1), Usage(1, 1))  # a success raises the rate slowly, no new grant
    assert budget.acquire(1, 1, NONE) > 0


def test_budget_key_names_the_judge_never_the_key() -> None:
    key = budget_key("anthropic", "claude-x", "sk-ant-SECRET")
    assert key.startswith("anthropic:claude-x:") and "SECRET" not in key
    assert key != budget_key("anthropic", "claude-x", "sk-ant-OTHER")


def test_server_limits_parses_the_headers() -> None:
    headers = {
        "Anthropic-RateLimit-Requests-Limit": "50",
        "anthropic-ratelimit-input-tokens-limit": "30000",
        "anthropic-ratelimit-output-tokens-limit": "bogus",
    }
    assert server_limits(headers) == {"requests": 50, "input-tokens": 30000}


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, s: float) -> None:
        self.now += s


def test_wait_for_budget_waits_in_steps_and_returns_the_time_waited() -> None:
    clock = FakeClock()
    budget = MemoryBudget(clock=clock)
    limits = Limits(rpm=60)  # one a second
    assert [wait_for_budget(budget, Usage(1, 1), limits, sleep=clock.sleep) for _ in range(60)] == [0.0] * 60
    waited = wait_for_budget(budget, Usage(1, 1), limits, sleep=clock.sleep, max_step=0.25)
    assert waited == pytest.approx(1.0)
    assert wait_for_budget(None, Usage(1, 1), limits, sleep=clock.sleep) == 0.0

"""Issue 28.7, ``judgeq budget`` (fakeredis, no worker): every budget a worker uses is listed,
also after a reset and after it expired; ``set`` names the budget the workers use or refuses in
one line; ``reset`` of a judge without a budget says so and exits 0."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import fakeredis
import pytest
from click.testing import CliRunner, Result

import judgeq.producer.cli.budget as budget_cli
from judgeq.producer.cli import main
from judgeq.ratelimit import Limits, Usage, budget_key
from judgeq.ratelimit.redis import RELIST, RedisBudget, budget_names, read_state
from judgeq.ratelimit.scripts import TTL
from judgeq.testing.clock import ManualClock as FakeClock

COMPATIBLE = "openai-compatible:llama-3@http://gpu-box:8000/v1"
PYTHON = "python:my_judges:make"
U = Usage(1, 1)


class CountingRedis(fakeredis.FakeRedis):
    """fakeredis that counts the SADDs to the set of budget names."""

    sadds = 0

    def sadd(self, name: Any, *values: Any) -> Any:
        self.sadds += 1
        return super().sadd(name, *values)


@pytest.fixture(autouse=True)
def _no_provider_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    for variable in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_COMPATIBLE_API_KEY"):
        monkeypatch.delenv(variable, raising=False)


@pytest.fixture
def r(monkeypatch: pytest.MonkeyPatch) -> Iterator[CountingRedis]:
    client = CountingRedis(decode_responses=True)
    monkeypatch.setattr(budget_cli, "_client", lambda settings: client)
    yield client


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


def judgeq_budget(*args: str) -> Result:
    return CliRunner().invoke(main, ["budget", *args])


def one_error_line(result: Result) -> str:
    """The CLI's way with a bad input: exit 2, one ``judgeq: error:`` line, no traceback."""
    assert result.exit_code == 2, result.output
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("judgeq: error: "), result.stderr
    assert "Traceback" not in result.stderr
    return lines[0].removeprefix("judgeq: error: ")


def listed() -> str:
    shown = judgeq_budget()
    assert shown.exit_code == 0, shown.output
    return shown.output


def worker_budget(r: fakeredis.FakeRedis, clock: FakeClock, judge: str, key: str) -> RedisBudget:
    """The budget a worker holding ``key`` uses for ``judge``, after its first call."""
    provider, _, model = judge.partition(":")
    budget = RedisBudget(r, budget_key(provider, model, key), clock=clock)
    call(budget)
    return budget


def call(budget: RedisBudget) -> int:
    grant = budget.acquire(1, 1)
    budget.settle(U, U, ok=True, epoch=grant.epoch)
    return grant.epoch


def congest(budget: RedisBudget, clock: FakeClock) -> None:
    """Jobs refused until the budget acts on the congestion (its epoch goes past 0)."""
    while True:
        grant = budget.acquire(1, 1)
        if grant.wait > 0:
            clock.sleep(grant.wait)
            continue
        if grant.epoch > 0:
            return
        budget.refused(U, 0.0, epoch=grant.epoch, nth=1)


# ---------------------------------------------------------------- listing


def test_a_budget_reset_while_a_worker_uses_it_is_listed_again(r: CountingRedis, clock: FakeClock) -> None:
    budget = worker_budget(r, clock, "anthropic:claude-x", "sk-ant-SECRET")
    assert budget.name in listed()
    reset = judgeq_budget("reset", budget.name)
    assert reset.exit_code == 0 and f"{budget.name}: reset" in reset.output
    assert "no judge budgets yet" in listed()
    # the worker goes on calling: its budget is listed again within RELIST seconds
    for _ in range(5):
        clock.sleep(RELIST / 5)
        call(budget)
    assert budget_names(r) == [budget.name]
    assert f"budget {budget.name})" in listed()


def test_a_worker_that_sees_its_budget_made_afresh_lists_it_at_once(
    r: CountingRedis, clock: FakeClock
) -> None:
    budget = worker_budget(r, clock, "anthropic:claude-x", "sk-ant-SECRET")
    congest(budget, clock)  # this process saw epoch 1
    assert judgeq_budget("reset", budget.name).exit_code == 0
    assert call(budget) == 0  # the state made afresh: epoch 0 again
    assert budget_names(r) == [budget.name]


def test_an_expired_budget_is_listed_again_when_a_worker_calls_its_judge(
    r: CountingRedis, clock: FakeClock
) -> None:
    budget = worker_budget(r, clock, "anthropic:claude-x", "sk-ant-SECRET")
    # an hour unused: its keys expire (fakeredis expires on wall time: made short here)
    for key in r.keys("judgeq:budget:*"):
        r.pexpire(key, 1)
    time.sleep(0.01)
    clock.sleep(TTL)
    assert "no judge budgets yet" in listed()  # the expired name is dropped from the set
    call(budget)
    assert budget.name in listed()


def test_listing_costs_one_round_trip_per_interval_not_per_call(r: CountingRedis, clock: FakeClock) -> None:
    budget = RedisBudget(r, budget_key("anthropic", "claude-x", "k"), clock=clock)
    for _ in range(50):
        call(budget)
        clock.sleep(RELIST / 100)
    assert r.sadds == 1
    clock.sleep(RELIST)
    call(budget)
    assert r.sadds == 2


# ---------------------------------------------------------------- set


def test_set_without_the_workers_key_refuses_in_one_line(r: CountingRedis, clock: FakeClock) -> None:
    line = one_error_line(judgeq_budget("set", COMPATIBLE, "--rpm", "60"))
    assert line.startswith("OPENAI_COMPATIBLE_API_KEY is not set here, and no budget of")
    assert "set OPENAI_COMPATIBLE_API_KEY to the key the workers use" in line
    line = one_error_line(judgeq_budget("set", "anthropic:claude-x", "--rpm", "60"))
    assert "ANTHROPIC_API_KEY is not set here" in line
    assert "OPENAI_API_KEY is not set here" in one_error_line(
        judgeq_budget("set", "openai:gpt-x", "--rpm", "60")
    )
    assert budget_names(r) == []  # no budget that no worker uses was written


def test_set_of_a_custom_judge_never_names_a_budget_by_this_machines_key(
    r: CountingRedis, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-SECRET")  # not what a python: judge's workers hold
    line = one_error_line(judgeq_budget("set", PYTHON, "--rpm", "60"))
    assert "workers of a python: judge name its budget with their own key" in line
    assert "JUDGEQ_JUDGE_RPM" in line and "SECRET" not in line
    assert budget_names(r) == []


def test_set_without_the_key_takes_the_one_budget_of_that_judge_listed(
    r: CountingRedis, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    workers = worker_budget(r, clock, COMPATIBLE, "sk-workers-SECRET")
    other = worker_budget(r, clock, "openai-compatible:other@http://gpu-box:8000/v1", "sk-workers-SECRET")
    result = judgeq_budget("set", COMPATIBLE, "--rpm", "60")
    assert result.exit_code == 0, result.output
    assert (
        f"{COMPATIBLE}: OPENAI_COMPATIBLE_API_KEY is not set here; taking the one budget of it "
        f"listed: {workers.name}"
    ) in result.output
    assert f"{workers.name}: limits set: 60 rpm" in result.output
    assert "SECRET" not in result.output
    assert read_state(r, workers.name).configured == Limits(rpm=60)
    assert read_state(r, other.name).configured == Limits()
    # a custom judge too
    custom = worker_budget(r, clock, PYTHON, "")
    result = judgeq_budget("set", PYTHON, "--otpm", "9000")
    assert result.exit_code == 0, result.output
    assert f"taking the one budget of it listed: {custom.name}" in result.output
    assert read_state(r, custom.name).configured == Limits(otpm=9000)


def test_set_without_the_key_refuses_between_several_listed_budgets(
    r: CountingRedis, clock: FakeClock
) -> None:
    one = worker_budget(r, clock, COMPATIBLE, "sk-team-a")
    two = worker_budget(r, clock, COMPATIBLE, "sk-team-b")
    line = one_error_line(judgeq_budget("set", COMPATIBLE, "--rpm", "60"))
    assert line.startswith("OPENAI_COMPATIBLE_API_KEY is not set here, so which of the 2 budgets")
    assert ", ".join(sorted([one.name, two.name])) in line
    # either is set by its name as listed
    assert judgeq_budget("set", one.name, "--rpm", "60").exit_code == 0
    assert read_state(r, one.name).configured == Limits(rpm=60)


def test_set_with_the_key_names_the_budget_of_the_workers_with_that_key(
    r: CountingRedis, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    workers = worker_budget(r, clock, COMPATIBLE, "sk-team-a")
    monkeypatch.setenv("OPENAI_COMPATIBLE_API_KEY", "sk-team-b")
    result = judgeq_budget("set", COMPATIBLE, "--rpm", "60")
    assert result.exit_code == 0, result.output
    mine = budget_key("openai-compatible", COMPATIBLE.partition(":")[2], "sk-team-b")
    assert f"{mine}: limits set: 60 rpm (a new budget" in result.output
    assert f"listed for {COMPATIBLE} with another key: {workers.name}" in result.output
    assert "sk-team" not in result.output


# ---------------------------------------------------------------- reset, show


@pytest.mark.parametrize("key", ["", "sk-ant-SECRET"], ids=["no-key", "key"])
def test_reset_of_a_judge_without_a_budget_says_so_and_exits_0(
    r: CountingRedis, monkeypatch: pytest.MonkeyPatch, key: str
) -> None:
    if key:
        monkeypatch.setenv("ANTHROPIC_API_KEY", key)
    for judge in ("anthropic:claude-x", COMPATIBLE, PYTHON):
        result = judgeq_budget("reset", judge)
        assert result.exit_code == 0, result.output
        assert result.output == f"no budget for {judge}: nothing to reset\n"
    shown = judgeq_budget("anthropic:claude-x")
    assert shown.exit_code == 0 and "no budget yet" in shown.output


def test_reset_without_the_key_resets_the_one_budget_of_that_judge_listed(
    r: CountingRedis, clock: FakeClock
) -> None:
    workers = worker_budget(r, clock, COMPATIBLE, "sk-workers-SECRET")
    result = judgeq_budget("reset", COMPATIBLE)
    assert result.exit_code == 0, result.output
    assert f"taking the one budget of it listed: {workers.name}" in result.output
    assert f"{workers.name}: reset" in result.output
    assert budget_names(r) == []


def test_reset_with_a_key_the_workers_do_not_hold_names_their_budget(
    r: CountingRedis, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    workers = worker_budget(r, clock, "anthropic:claude-x", "sk-ant-WORKERS")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-MINE")
    result = judgeq_budget("reset", "anthropic:claude-x")
    assert result.exit_code == 0, result.output
    assert result.output == (
        "no budget for anthropic:claude-x: nothing to reset "
        f"(listed for anthropic:claude-x with another key: {workers.name})\n"
    )
    assert budget_names(r) == [workers.name]  # left as it was


def test_budget_says_why_an_adaptive_rate_paces(r: CountingRedis, clock: FakeClock) -> None:
    # learned with no limit known, or cut below a limit given: each says which
    from judgeq.ratelimit import BudgetState

    plain = worker_budget(r, clock, "anthropic:claude-x", "sk-ant-SECRET")
    congest(plain, clock)
    lines = budget_cli.describe(plain.snapshot())
    assert any("/min adaptive (no limit known; found from 429s)" in line for line in lines), lines
    given = worker_budget(r, clock, "anthropic:claude-y", "sk-ant-SECRET")
    given.configure(Limits(rpm=6000))
    congest(given, clock)
    state: BudgetState = given.snapshot()
    assert state.adaptive_rpm is not None and state.effective()["requests"] == state.adaptive_rpm < 6000
    lines = budget_cli.describe(state)
    assert any(
        "6,000/min set" in line and "adaptive (429s under it: cut below it)" in line for line in lines
    ), lines

"""The judge budget: one contract for the in-process and the Redis implementation (fakeredis
runs the same Lua as Redis), both on an injected clock, plus the wait helper."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import fakeredis
import pytest

from judgeq.ratelimit import (
    Budget,
    Grant,
    Limits,
    MemoryBudget,
    Refusal,
    Share,
    Usage,
    budget_key,
    policy,
    server_limits,
    wait_for_budget,
)
from judgeq.ratelimit import redis as redis_budget
from judgeq.ratelimit.redis import RedisBudget, budget_names, read_state, reset_budget
from judgeq.ratelimit.scripts import budget_keys
from judgeq.testing.clock import ManualClock as FakeClock

NONE = Limits()
U = Usage(10, 10)


Make = Callable[[FakeClock], Budget]


@pytest.fixture(params=["memory", "redis"])
def make(request: pytest.FixtureRequest) -> Iterator[Make]:
    if request.param == "memory":
        yield lambda clock: MemoryBudget("anthropic:m:abc", clock=clock)
    else:
        r = fakeredis.FakeRedis(decode_responses=True)
        yield lambda clock: RedisBudget(r, "anthropic:m:abc", clock=clock)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


def grants(
    budget: Budget, n: int, tokens: tuple[int, int] = (10, 10), share: Share | None = None
) -> list[bool]:
    return [budget.acquire(*tokens, share).wait == 0.0 for _ in range(n)]


def granted_in(budget: Budget, clock: FakeClock, seconds: float, step: float = 0.05) -> int:
    """Requests granted to a caller that asks every ``step`` seconds for ``seconds``."""
    n, end = 0, clock.now + seconds
    while clock.now < end:
        while budget.acquire(1, 1).wait == 0.0:
            n += 1
        clock.sleep(step)
    return n


def serve(budget: Budget, n: int) -> None:
    """``n`` fresh jobs' calls granted and answered."""
    for _ in range(n):
        grant = budget.acquire(10, 10)
        assert grant.wait == 0.0
        budget.settle(U, U, ok=True, epoch=grant.epoch, first=True)


# ---------------------------------------------------------------- known limits: paced, no burst


def test_a_configured_limit_is_paced_from_the_first_second(make: Make, clock: FakeClock) -> None:
    budget = make(clock)
    budget.configure(Limits(rpm=300))
    # a new bucket holds one request, then 300 a minute paced at PACE: never a minute's worth
    assert grants(budget, 3) == [True, False, False]
    first_second = 1 + granted_in(budget, clock, 1.0)
    assert first_second <= 300 / 60 + 1
    # after the first second it sends at the paced rate, never above the limit
    assert granted_in(budget, clock, 60.0) == pytest.approx(300 * policy.PACE, abs=2)


def test_a_full_bucket_holds_one_second_of_the_limit(make: Make, clock: FakeClock) -> None:
    budget = make(clock)
    budget.configure(Limits(rpm=600))
    assert grants(budget, 1) == [True]
    clock.sleep(3000.0)  # idle for most of an hour: the bucket refills to a second's worth, not a minute's
    assert sum(grants(budget, 100)) == int(600 * policy.PACE / 60)


def test_a_refused_ask_reserves_nothing_and_says_how_long_to_wait(make: Make, clock: FakeClock) -> None:
    budget = make(clock)
    budget.configure(Limits(rpm=60))
    assert grants(budget, 1) == [True]
    wait = budget.acquire(10, 10).wait
    assert wait == pytest.approx(60 / (60 * policy.PACE), rel=0.01)
    assert budget.acquire(10, 10).wait == pytest.approx(wait)  # nothing was reserved


def test_without_any_limit_everything_is_granted_after_the_first_answer(make: Make, clock: FakeClock) -> None:
    budget = make(clock)
    first = budget.acquire(10, 10)
    assert first.wait == 0.0
    # one call goes alone until it is answered: its headers may state the server's limits
    assert budget.acquire(10, 10).wait == pytest.approx(policy.PROBE_STEP)
    budget.settle(U, U, ok=True, epoch=first.epoch)
    assert all(grants(budget, 200))


def test_a_probe_never_answered_stops_holding_the_others_back(make: Make, clock: FakeClock) -> None:
    budget = make(clock)
    assert budget.acquire(10, 10).wait == 0.0
    clock.sleep(policy.PROBE)
    assert all(grants(budget, 50))


def test_unused_output_is_refunded(make: Make, clock: FakeClock) -> None:
    budget = make(clock)
    budget.configure(Limits(otpm=60_000))  # a bucket of 1,000 output tokens, 950 a second paced
    g = budget.acquire(0, 600)
    assert g.wait == 0.0
    assert budget.acquire(0, 600).wait > 0.0
    budget.settle(Usage(0, 600), Usage(0, 100), ok=True, epoch=g.epoch)  # the verdict took 100 of 600
    assert budget.acquire(0, 600).wait == 0.0


def test_input_is_reconciled_with_the_real_count(make: Make, clock: FakeClock) -> None:
    budget = make(clock)
    budget.configure(Limits(itpm=60_000))  # 1,000 input tokens at once
    g = budget.acquire(500, 0)
    budget.settle(Usage(500, 0), Usage(900, 0), ok=True, epoch=g.epoch)  # the estimate was 400 short
    assert budget.acquire(500, 0).wait > 0.0  # 1000 - 900 < 500


def test_a_request_larger_than_the_bucket_waits_for_a_full_one_and_leaves_a_debt(
    make: Make, clock: FakeClock
) -> None:
    budget = make(clock)
    budget.configure(Limits(itpm=6_000))  # 100 tokens a second, a bucket of 100
    assert budget.acquire(1_000, 0).wait == 0.0  # a full bucket lets it pass
    wait = budget.acquire(10, 0).wait  # the debt of 900 is paid back at the paced rate
    assert wait == pytest.approx(910 / (100 * policy.PACE), rel=0.01)


def test_the_server_limit_is_learned_and_the_lower_limit_wins(make: Make, clock: FakeClock) -> None:
    budget = make(clock)
    budget.configure(Limits(rpm=6000))
    budget.observe({"anthropic-ratelimit-requests-limit": "60"})
    assert grants(budget, 2) == [True, False]
    clock.sleep(60.0)
    assert granted_in(budget, clock, 60.0) == pytest.approx(60 * policy.PACE, abs=2)


def test_new_limits_take_the_servers_remaining_as_the_level(make: Make, clock: FakeClock) -> None:
    budget = make(clock)
    budget.configure(Limits(itpm=600_000))  # 10,000 a second
    budget.observe(
        {
            "anthropic-ratelimit-input-tokens-limit": "6000000",
            "anthropic-ratelimit-input-tokens-remaining": "30",
        }
    )
    assert grants(budget, 4, (10, 0)) == [True, True, True, False]


def test_the_server_limit_is_learned_again_after_the_shared_budget_expired(
    clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a long-running worker learned the limit once; the budget in Redis then expired (an idle
    # hour, or Redis lost it). The next answer's headers must teach it again
    r = fakeredis.FakeRedis(decode_responses=True)
    budget = RedisBudget(r, "anthropic:m:abc", clock=clock)
    headers = {"anthropic-ratelimit-requests-limit": "60", "anthropic-ratelimit-requests-remaining": "60"}
    budget.observe(headers)
    assert grants(budget, 2) == [True, False]
    r.delete(*budget.keys[:5])  # expired
    budget.observe(headers)
    assert budget.snapshot().server == NONE  # the worker wrote them a moment ago: not again yet
    monkeypatch.setattr(redis_budget, "RELEARN", 0.0)  # ... but after a while it does
    budget.observe(headers)
    assert budget.snapshot().server == Limits(rpm=60)
    assert grants(budget, 2) == [True, False]


# ---------------------------------------------------------------- limits belong to the judge


def test_configured_limits_are_the_judges_for_every_caller() -> None:
    clock = FakeClock()
    r = fakeredis.FakeRedis(decode_responses=True)
    RedisBudget(r, "anthropic:m:abc", clock=clock).configure(Limits(rpm=60))
    other_worker = RedisBudget(r, "anthropic:m:abc", clock=clock)  # a run that gave no flag
    assert grants(other_worker, 2) == [True, False]
    assert read_state(r, "anthropic:m:abc").configured == Limits(rpm=60)


def test_configure_sets_the_given_limits_and_keeps_the_others(make: Make, clock: FakeClock) -> None:
    budget = make(clock)
    budget.configure(Limits(rpm=60))
    budget.configure(Limits(itpm=1000))
    assert budget.snapshot().configured == Limits(rpm=60, itpm=1000)
    budget.configure(None)
    assert budget.snapshot().configured == NONE


def test_a_share_holds_one_run_to_part_of_the_limit_and_counts_against_the_judge(
    make: Make, clock: FakeClock
) -> None:
    budget = make(clock)
    budget.configure(Limits(rpm=1200))  # 19 a second paced
    half = Share("run-a", 0.5)
    assert grants(budget, 1, share=half) == [True]  # both buckets start with one request
    clock.sleep(10.0)
    assert sum(grants(budget, 100, share=half)) == 9  # its own bucket holds half a second's worth
    assert sum(grants(budget, 100)) == 10  # what is left of the judge's bucket: the share counted


def test_shares_of_two_runs_add_up_within_the_judges_limit(make: Make, clock: FakeClock) -> None:
    budget = make(clock)
    budget.configure(Limits(rpm=600))
    a, b = Share("run-a", 0.5), Share("run-b", 0.5)
    n = {"run-a": 0, "run-b": 0}
    end = clock.now + 30.0
    while clock.now < end:
        for share in (a, b, a):  # run-a asks twice as often: it still gets no more than half
            if budget.acquire(1, 1, share).wait == 0.0:
                n[share.run] += 1
        clock.sleep(0.04)
    limit = 600 * policy.PACE / 2  # in the 30 s
    assert n["run-a"] <= limit / 2 + 6 and n["run-b"] <= limit / 2 + 6
    assert n["run-a"] + n["run-b"] == pytest.approx(limit, abs=8)


# ---------------------------------------------------------------- congestion


def test_a_job_refused_for_itself_is_not_congestion(make: Make, clock: FakeClock) -> None:
    budget = make(clock)
    serve(budget, 30)
    for _ in range(5):  # five jobs, each refused again and again while the others are served
        first = budget.acquire(10, 10).epoch
        lent = 0  # as call_with_retries counts: requests charged to its refusals so far
        for nth in range(1, 11):
            refusal = budget.refused(
                U, 0.0, epoch=first, nth=nth, previous_epoch=first if nth > 1 else -1, since=1.0, lent=lent
            )
            assert refusal.pause == 0.0
            # judged refused for itself on its third refusal (the adaptive rate's evidence)
            assert refusal.own is (nth >= 3)
            lent = 0 if refusal.own else lent + 1
        serve(budget, 6)
    assert budget.snapshot().adaptive_rpm is None  # no limit was made up
    assert all(grants(budget, 100))


def test_congestion_pauses_every_caller_for_retry_after_once_per_episode(
    make: Make, clock: FakeClock
) -> None:
    budget = make(clock)
    budget.configure(Limits(rpm=6000))
    clock.sleep(1.0)
    epochs = [budget.acquire(10, 10).epoch for _ in range(10)]
    for e in epochs[:7]:
        budget.settle(U, U, ok=True, epoch=e)
    pauses = [budget.refused(U, 5.0, epoch=e, nth=1).pause for e in epochs[7:]]
    assert pauses == [0.0, 0.0, 5.0]  # the third refused job of ten answered: congestion
    assert budget.acquire(10, 10).wait == pytest.approx(5.0)
    # the calls still in flight from before are refused too: no news, no second pause
    assert budget.refused(U, 30.0, epoch=epochs[0], nth=1).pause == 0.0
    clock.sleep(5.0)
    assert budget.acquire(10, 10).wait == 0.0
    assert budget.snapshot().configured.rpm == 6000  # a known limit is not cut


def test_adaptive_rate_is_cut_from_what_the_server_served_never_below_the_floor(
    make: Make, clock: FakeClock
) -> None:
    budget = make(clock)
    serve(budget, 1)
    # 300 served in 2 s, then a server counting a sliding minute refuses: full for another 58 s
    epochs = []
    for _ in range(200):
        clock.sleep(0.01)
        g = budget.acquire(10, 10)
        budget.settle(U, U, ok=True, epoch=g.epoch)
        epochs.append(g.epoch)
    epochs = [budget.acquire(10, 10).epoch for _ in range(10)]
    pauses = [budget.refused(U, 58.0, epoch=e, nth=1).pause for e in epochs[:3]]
    assert pauses[-1] == 58.0
    # ~200 served spread over the 58 s the server stays full: 3.4 a second, cut to 3/4 of it
    rpm = budget.snapshot().adaptive_rpm
    assert rpm is not None and rpm == pytest.approx(0.75 * 60 * 200 / 58, rel=0.1)
    clock.sleep(58.0)
    assert granted_in(budget, clock, 60.0) == pytest.approx(rpm, abs=3)


def test_adaptive_rate_never_collapses_below_the_floor(make: Make, clock: FakeClock) -> None:
    budget = make(clock)
    for _ in range(20):  # congestion after congestion: a trickle served, most refused
        clock.sleep(10.0)
        serve(budget, 1)
        grants_ = [budget.acquire(1, 1) for _ in range(12)]
        for g in grants_:
            if g.wait == 0.0:
                budget.refused(U, 0.0, epoch=g.epoch, nth=1)
        epoch = budget.acquire(1, 1).epoch
        for _ in range(10):
            budget.refused(U, 0.0, epoch=epoch, nth=1)
    rpm = budget.snapshot().adaptive_rpm
    assert rpm is not None and rpm >= policy.FLOOR


def test_a_few_jobs_refused_at_once_with_nothing_else_answered_are_no_evidence(
    make: Make, clock: FakeClock
) -> None:
    # a warm reply cache: the only judge calls are three jobs the server refuses for themselves
    budget = make(clock)
    grants_ = [budget.acquire(1, 1) for _ in range(3)]
    clock.sleep(policy.PROBE)
    grants_ += [budget.acquire(1, 1) for _ in range(2)]
    for g in grants_:
        assert budget.refused(U, 0.0, epoch=g.epoch, nth=1).pause == 0.0
    assert budget.snapshot().adaptive_rpm is None
    assert all(grants(budget, 50))


def test_a_cut_with_nothing_served_starts_from_the_rate_sent_not_the_floor(
    make: Make, clock: FakeClock
) -> None:
    budget = make(clock)
    serve(budget, 1)
    clock.sleep(10.0)
    epochs = []
    for _ in range(80):  # 8 a second granted for 10 s, every one refused
        clock.sleep(0.125)
        epochs.append(budget.acquire(1, 1).epoch)
    pauses = [budget.refused(U, 0.0, epoch=e, nth=1).pause for e in epochs]
    assert pauses.count(0.0) == len(pauses)  # a retry-after of 0: no pause, but a cut ...
    rpm = budget.snapshot().adaptive_rpm
    assert rpm is not None and rpm == pytest.approx(0.75 * 8 * 60, rel=0.1)  # ... from 8 a second


def test_a_closed_server_pauses_until_its_minute_frees_and_paces_at_what_the_minute_served(
    make: Make, clock: FakeClock
) -> None:
    # a gateway counting a sliding minute, no headers, retry-after 1: 40 served in 10 s, then
    # it is full and refuses every call (of several jobs) for the rest of its minute
    budget = make(clock)
    start = clock.now
    for _ in range(40):
        serve(budget, 1)
        clock.sleep(0.25)
    clock.sleep(1.0)
    pauses: list[float] = []
    for _ in range(200):  # 8 a second, none served
        grant = budget.acquire(1, 1)
        if grant.wait > 0:
            clock.sleep(grant.wait)
            continue
        clock.sleep(0.125)
        p = budget.refused(U, 1.0, epoch=grant.epoch, nth=1).pause
        if p > 0:
            pauses.append(p)
            if p > 1.0:
                break
    # the first congestion's calls were sent with the served ones: the retry-after's second;
    # then none of an epoch's calls served: the pause lasts until the first answer of that
    # minute is a minute old ...
    assert pauses[0] == 1.0 and len(pauses) == 2
    pause = pauses[1]
    assert clock.now + pause == pytest.approx(start + 60.0, abs=1.5)
    # ... and the pace is cut from what the minute served (40), not from the 8 a second sent
    rpm = budget.snapshot().adaptive_rpm
    assert rpm is not None and rpm == pytest.approx(0.75 * 40, rel=0.1)
    # closed again, nothing served since: no news of the rate (not cut again); the pause doubles
    # (at most a minute)
    clock.sleep(pause)
    pauses = []
    for _ in range(60):
        clock.sleep(0.5)
        grant = budget.acquire(1, 1)
        if grant.wait > 0:
            continue
        r = budget.refused(U, 1.0, epoch=grant.epoch, nth=1).pause
        if r > 0:
            pauses.append(r)
            break
    assert pauses and pauses[0] == pytest.approx(min(policy.HORIZON, 2 * pause), rel=0.1)
    assert budget.snapshot().adaptive_rpm == pytest.approx(rpm)


def test_a_server_that_served_some_of_the_epochs_calls_is_not_closed_though_refusals_followed(
    make: Make, clock: FakeClock
) -> None:
    # 100 calls sent at once, 5 served, then 45 refused: the served answers' marks are pushed out
    # of the recent answers, but the server is no closed window (a second reviewer's case: taken
    # for closed, every caller paused 54 s and the pace was cut to 19/min)
    budget = make(clock)
    serve(budget, 20)
    clock.sleep(1.0)
    sent = [budget.acquire(1, 1) for _ in range(100)]
    assert all(g.wait == 0.0 for g in sent)
    clock.sleep(0.2)
    for g in sent[:5]:
        budget.settle(U, U, ok=True, epoch=g.epoch, first=True)
    pauses = [budget.refused(U, 1.0, epoch=g.epoch, nth=1).pause for g in sent[5:50]]
    assert max(pauses) == 1.0  # the retry-after: a congestion, no closed window
    rpm = budget.snapshot().adaptive_rpm
    assert rpm is not None and rpm > 60


@pytest.mark.parametrize("jobs", [1, 2])
def test_jobs_refused_for_themselves_with_nothing_else_running_cut_nothing(
    make: Make, clock: FakeClock, jobs: int
) -> None:
    # the tail of a run: one or two jobs the server refuses whatever the load, retried after
    # their backoff with nothing else running: no storm, no pace learned for the judge's next
    # runs (two of them cut it to 60/min before a second reviewer's mend)
    budget = make(clock)
    serve(budget, 30)
    clock.sleep(10.0)
    state = {job: [1, -1, clock.now] for job in range(jobs)}  # nth, previous epoch, refused at
    for nth in range(1, 10):
        for job in range(jobs):
            _, previous, at = state[job]
            grant = budget.acquire(1, 1)
            clock.sleep(grant.wait)
            pause = budget.refused(
                U, 1.0, epoch=grant.epoch, nth=nth, previous_epoch=previous, since=clock.now - at,
                free=grant.free,
            ).pause  # fmt: skip
            assert pause == 0.0
            state[job] = [nth + 1, grant.epoch, clock.now]
        clock.sleep(min(30.0, 0.5 * 2 ** (nth - 1)))
    assert budget.snapshot().adaptive_rpm is None


def test_jobs_refused_again_with_nothing_served_are_a_storm_though_no_fresh_job_comes(
    make: Make, clock: FakeClock
) -> None:
    # every caller holds a job refused once before; the server serves none of them: their
    # refusals are news (before, only a fresh job's first refusal was, and none came)
    budget = make(clock)
    serve(budget, 30)
    clock.sleep(30.0)
    pauses = []
    for i in range(40):
        clock.sleep(0.1)
        grant = budget.acquire(1, 1)
        if grant.wait > 0:
            clock.sleep(grant.wait)
            continue
        pauses.append(budget.refused(U, 1.0, epoch=grant.epoch, nth=2 + i // 16, since=1.6).pause)
    assert any(p > 0 for p in pauses)


def test_adaptive_rate_grows_back_only_on_successes_after_clean_intervals(
    make: Make, clock: FakeClock
) -> None:
    budget = make(clock)
    serve(budget, 20)
    epoch = budget.acquire(1, 1).epoch
    for _ in range(3):
        budget.refused(U, 1.0, epoch=epoch, nth=1)
    cut = budget.snapshot().adaptive_rpm
    assert cut is not None
    clock.sleep(60.0)
    # failed calls (5xx, timeouts) never grow it
    for _ in range(50):
        g = budget.acquire(1, 1)
        if g.wait == 0.0:
            budget.settle(U, U, ok=False, epoch=g.epoch)
        clock.sleep(1.0)
    assert budget.snapshot().adaptive_rpm == pytest.approx(cut)
    # successes while the rate holds callers back (asked 500 a second) grow it: minutes, not
    # hours, back to demand
    for _ in range(6000):
        g = budget.acquire(1, 1)
        if g.wait == 0.0:
            budget.settle(U, U, ok=True, epoch=g.epoch)
        clock.sleep(0.002)
    grown = budget.snapshot().adaptive_rpm
    assert grown is not None and grown > cut * 1.2


def test_the_adaptive_rate_gives_way_to_the_servers_word(make: Make, clock: FakeClock) -> None:
    budget = make(clock)
    serve(budget, 20)
    epoch = budget.acquire(1, 1).epoch
    for _ in range(3):
        budget.refused(U, 0.0, epoch=epoch, nth=1)
    assert budget.snapshot().adaptive_rpm is not None
    budget.observe({"anthropic-ratelimit-requests-limit": "6000"})
    state = budget.snapshot()
    assert state.adaptive_rpm is None and state.server.rpm == 6000


@pytest.mark.parametrize("how", ["given", "stated"])
def test_a_known_limit_is_a_ceiling_a_429_storm_under_it_cuts_the_pace(clock: FakeClock, how: str) -> None:
    # --rpm 600 (or a gateway stating it) against a server that serves 120 a minute: refusals
    # under the known limit cut the pace below it; grown back to it, the known limit paces again
    # (in process: test_budget_backends.py holds Redis to the same answers)
    budget = MemoryBudget(clock=clock)
    if how == "given":
        budget.configure(Limits(rpm=600))
    else:
        budget.observe({"anthropic-ratelimit-requests-limit": "600"})
    served, start = 0, clock.now
    for _ in range(400):  # 20 s asking 20 a second: the server serves 2 a second of them
        g = budget.acquire(1, 1)
        if g.wait == 0.0:
            if served < (clock.now - start) * 2:
                budget.settle(U, U, ok=True, epoch=g.epoch, first=True)
                served += 1
            else:
                budget.refused(U, 1.0, epoch=g.epoch, nth=1)
        clock.sleep(0.05)
    state = budget.snapshot()
    assert state.adaptive_rpm is not None and state.adaptive_rpm < 150  # cut below 600 x PACE
    assert state.effective()["requests"] == state.adaptive_rpm
    # the server allows the known limit again: the rate grows back, and once there the known
    # limit paces (no adaptive rate left to drag)
    for second in range(1200):  # asking 12 a second, above the cut rate
        for _ in range(12):
            g = budget.acquire(1, 1)
            if g.wait == 0.0:
                budget.settle(U, U, ok=True, epoch=g.epoch, first=True)
            clock.sleep(1 / 12)
        if second % 30 == 0 and budget.snapshot().adaptive_rpm is None:
            break
    state = budget.snapshot()
    assert state.adaptive_rpm is None and state.effective()["requests"] == 600


def test_snapshot_counts_the_last_minute(make: Make, clock: FakeClock) -> None:
    budget = make(clock)
    serve(budget, 12)
    g = budget.acquire(1, 1)
    budget.refused(U, 0.0, epoch=g.epoch, nth=1)
    state = budget.snapshot()
    assert (state.requests_last_minute, state.served_last_minute, state.refused_last_minute) == (13, 12, 1)
    clock.sleep(61.0)
    state = budget.snapshot()
    assert (state.requests_last_minute, state.served_last_minute, state.refused_last_minute) == (0, 0, 0)


def test_waiting_callers_are_counted(make: Make, clock: FakeClock) -> None:
    budget = make(clock)
    budget.configure(Limits(rpm=60))
    assert budget.acquire(1, 1).wait == 0.0
    assert budget.acquire(1, 1).wait > 0.0
    assert budget.snapshot().waiting == 1


# ---------------------------------------------------------------- names, helpers


def test_budget_names_and_reset() -> None:
    r = fakeredis.FakeRedis(decode_responses=True)
    budget = RedisBudget(r, "anthropic:m:abc")
    budget.configure(Limits(rpm=60))
    budget.acquire(1, 1)
    assert budget_names(r) == ["anthropic:m:abc"]
    reset_budget(r, "anthropic:m:abc")
    assert budget_names(r) == [] and read_state(r, "anthropic:m:abc").configured == NONE


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


def test_wait_for_budget_waits_in_steps_and_returns_the_time_waited() -> None:
    clock = FakeClock()
    budget = MemoryBudget(clock=clock)
    budget.configure(Limits(rpm=60))
    assert wait_for_budget(budget, Usage(1, 1), sleep=clock.sleep) == (0.0, Grant(0.0, 0))
    waited, _ = wait_for_budget(budget, Usage(1, 1), sleep=clock.sleep, max_step=0.25)
    assert waited == pytest.approx(1 / policy.PACE, abs=0.25)


def test_overload_that_a_cut_did_not_end_is_cut_again(make: Make, clock: FakeClock) -> None:
    # overload that the first cut did not end: 20 more jobs refused, round after round
    budget = make(clock)
    serve(budget, 1)
    cuts = []
    for _ in range(3):
        clock.sleep(10.0)
        grants_ = []
        while len(grants_) < 20:
            g = budget.acquire(1, 1)
            if g.wait == 0.0:
                grants_.append(g)
            else:
                clock.sleep(g.wait)
        for g in grants_:
            budget.refused(U, 1.0, epoch=g.epoch, nth=1)  # each job's first refusal in this epoch
        cuts.append(budget.snapshot().adaptive_rpm)
    assert None not in cuts and cuts[0] > cuts[1] > cuts[2]  # a cut every round


def test_congestion_before_any_grant_does_not_fail(make: Make, clock: FakeClock) -> None:
    budget = make(clock)
    for _ in range(12):
        budget.refused(U, 1.0, epoch=0, nth=1)
    assert budget.acquire(1, 1).wait == pytest.approx(1.0)  # the pause holds; no limit made up


def test_a_budget_written_after_a_reset_still_expires(clock: FakeClock) -> None:
    r = fakeredis.FakeRedis(decode_responses=True)
    budget = RedisBudget(r, "anthropic:m:abc", clock=clock)
    g = budget.acquire(1, 1)
    reset_budget(r, "anthropic:m:abc")
    budget.settle(U, U, ok=True, epoch=g.epoch)  # a call in flight during the reset
    budget.refused(U, 0.0, epoch=g.epoch, nth=1)
    assert all(r.ttl(k) > 0 for k in r.keys("judgeq:budget:*"))


def level(budget: Budget) -> float:
    return budget.snapshot().levels["requests"]


def test_under_a_known_limit_a_job_refused_for_itself_costs_no_request_and_goes_free(
    make: Make, clock: FakeClock
) -> None:
    budget = make(clock)
    budget.configure(Limits(rpm=600))  # 10 a second
    for _ in range(20):  # fresh jobs served, one every 0.2 s: the server serves
        serve(budget, 1)
        clock.sleep(0.2)
    before = level(budget)
    g = budget.acquire(10, 10)  # the job's first call takes a request ...
    assert g.wait == 0.0 and not g.free
    first = budget.refused(U, 1.0, epoch=g.epoch, nth=1)
    assert first == Refusal(0.0, own=False)  # ... one refusal tells nothing yet
    assert level(budget) == pytest.approx(before - 1)
    while budget.acquire(10, 10).wait == 0.0:  # the others empty the bucket meanwhile
        pass
    empty = level(budget)
    # its second call goes at once, though the bucket is empty, and takes nothing
    g2 = budget.acquire(10, 10, first_epoch=g.epoch)
    assert g2.wait == 0.0 and g2.free and level(budget) == pytest.approx(empty)
    second = budget.refused(
        Usage(0, 0), 1.0, epoch=g2.epoch, nth=2, previous_epoch=g.epoch, since=1.0, free=True, lent=1
    )
    assert second == Refusal(0.0, own=True)  # refused for itself: its first request comes back
    assert level(budget) == pytest.approx(empty + 1)
    # judged so, its next calls go free too; one the server serves after all is charged then
    g3 = budget.acquire(10, 10, own_epoch=g2.epoch)
    assert g3.free
    budget.settle(Usage(0, 0), U, ok=True, epoch=g3.epoch, free=True)
    assert level(budget) == pytest.approx(empty)
    # a free call refused for the limits is charged its request too
    g4 = budget.acquire(10, 10, own_epoch=g2.epoch)
    assert g4.free
    budget.refused(Usage(0, 0), 1.0, epoch=g4.epoch, nth=1, free=True)
    assert level(budget) == pytest.approx(empty - 1)


def test_a_job_is_not_judged_refused_for_itself_while_the_server_refuses_fresh_jobs(
    make: Make, clock: FakeClock
) -> None:
    # a storm: fresh jobs refused, none served: a job refused again and again is the storm's,
    # not its own (its requests stay spent, its calls wait in line)
    budget = make(clock)
    for _ in range(5):
        serve(budget, 1)
        clock.sleep(0.1)
    clock.sleep(10.0)  # (out of the window)
    previous, lent = -1, 0
    for nth in range(1, 6):
        for _ in range(3):  # fresh jobs refused around it
            f = budget.acquire(10, 10)
            budget.refused(U, 0.0, epoch=f.epoch, nth=1)
        g = budget.acquire(10, 10)
        refusal = budget.refused(
            U, 0.0, epoch=g.epoch, nth=nth, previous_epoch=previous, since=1.0, lent=lent
        )
        assert refusal.own is False
        previous, lent = g.epoch, lent + 1
        clock.sleep(1.0)
    # and the same job, refused while fresh jobs are served (the cut rate's pace), is
    clock.sleep(10.0)
    for _ in range(5):
        while (g := budget.acquire(10, 10)).wait > 0.0:
            clock.sleep(g.wait)
        budget.settle(U, U, ok=True, epoch=g.epoch, first=True)
    while (g := budget.acquire(10, 10)).wait > 0.0:
        clock.sleep(g.wait)
    refusal = budget.refused(U, 0.0, epoch=g.epoch, nth=6, previous_epoch=g.epoch, since=1.0, lent=lent)
    assert refusal.own is True


def test_jobs_refused_for_themselves_raise_the_share_of_refusals_that_is_congestion(
    make: Make, clock: FakeClock
) -> None:
    # one job in five is judged refused for itself (no limit known): learned, fresh refusals at
    # that share (each such job's first) are no congestion; half of fresh jobs refused still is
    budget = make(clock)

    def granted() -> Grant:
        while (g := budget.acquire(10, 10)).wait > 0.0:
            clock.sleep(g.wait)
        return g

    def refused_for_itself() -> None:
        first = granted().epoch
        budget.refused(U, 0.0, epoch=first, nth=1)
        lent = 1
        for nth in (2, 3):
            g = granted()
            refusal = budget.refused(
                U, 0.0, epoch=g.epoch, nth=nth, previous_epoch=first, since=1.0, lent=lent
            )
            lent, first = (0 if refusal.own else lent + 1), g.epoch
        assert refusal.own

    for i in range(1, 201):
        clock.sleep(0.1)
        if i % 5:
            budget.settle(U, U, ok=True, epoch=granted().epoch, first=True)
        else:
            refused_for_itself()
    # the same jobs, each judged 25 answers after its first refusal (its retries waited): five
    # or so of the last 30 answers stand refused, congestion by the fixed share alone
    before = budget.snapshot()
    pending: list[tuple[int, int]] = []
    for i in range(1, 301):
        clock.sleep(0.1)
        g = granted()
        if i % 5:
            budget.settle(U, U, ok=True, epoch=g.epoch, first=True)
        else:
            assert budget.refused(U, 2.0, epoch=g.epoch, nth=1).pause == 0.0
            pending.append((i + 25, g.epoch))
        while pending and pending[0][0] <= i:
            _, first = pending.pop(0)
            g = granted()
            refusal = budget.refused(U, 2.0, epoch=g.epoch, nth=2, previous_epoch=first, since=2.5, lent=1)
            g = granted()
            refusal = budget.refused(U, 2.0, epoch=g.epoch, nth=3, previous_epoch=g.epoch, since=1.0, lent=2)
            assert refusal.own and refusal.pause == 0.0
    assert budget.snapshot().adaptive_rpm == before.adaptive_rpm
    pauses = []
    for _ in range(12):  # half of the fresh jobs refused
        pauses.append(budget.refused(U, 2.0, epoch=granted().epoch, nth=1).pause)
        if pauses[-1]:
            break
        budget.settle(U, U, ok=True, epoch=granted().epoch, first=True)
    assert pauses[-1] == 2.0


def test_a_job_refused_again_in_a_later_epoch_is_no_news_and_takes_no_other_mark(
    make: Make, clock: FakeClock
) -> None:
    budget = make(clock)

    def granted() -> Grant:
        while (g := budget.acquire(1, 1)).wait > 0.0:
            clock.sleep(g.wait)
        return g

    def refuse(nth: int = 1, previous_epoch: int | None = None) -> float:
        g = granted()
        return budget.refused(
            U,
            0.0,
            epoch=g.epoch,
            nth=nth,
            previous_epoch=g.epoch if previous_epoch is None else previous_epoch,
        ).pause

    for _ in range(20):
        budget.settle(U, U, ok=True, epoch=granted().epoch)
    old = granted().epoch
    budget.refused(U, 0.0, epoch=old, nth=1, previous_epoch=old)
    refuse()
    refuse()  # 3 of 23 refused: congestion
    assert granted().epoch == old + 1
    for _ in range(8):
        budget.settle(U, U, ok=True, epoch=granted().epoch)
    refuse()
    refuse()
    # the first job, refused again in this epoch: no news (its mark was the old epoch's), and the
    # two fresh marks stay: a third fresh refusal makes a congestion again
    refuse(nth=2, previous_epoch=old)
    refuse()
    assert granted().epoch == old + 2


# ------------------------------------------------- a full window's cut counts its minute


def _refuse_jobs(budget: Budget, clock: FakeClock, n: int, retry_after: float | None) -> float:
    """``n`` fresh jobs granted and refused (each for the first time); the last pause."""
    pause = 0.0
    for _ in range(n):
        while (g := budget.acquire(1, 1)).wait > 0.0:
            clock.sleep(g.wait)
        pause = budget.refused(U, retry_after, epoch=g.epoch, nth=1).pause
    return pause


def test_a_window_full_for_the_rest_of_its_minute_is_cut_to_what_it_served_in_the_minute(
    make: Make, clock: FakeClock
) -> None:
    # a sliding minute of 120: 120 served in the first 20 s, then full for 40 s more; the cut
    # spreads what it served over the time it served and the retry-after: 120 a minute, x 0.75
    budget = make(clock)
    for _ in range(120):
        serve(budget, 1)
        clock.sleep(20.0 / 120)
    assert _refuse_jobs(budget, clock, 3, 40.0) == 40.0
    rpm = budget.snapshot().adaptive_rpm
    assert rpm is not None and rpm == pytest.approx(policy.CUT * 120, rel=0.1)


def test_a_congestion_in_the_budgets_first_second_reads_no_empty_window(make: Make, clock: FakeClock) -> None:
    # Redis refuses an HMGET of no field (the in-process keyspace refuses it as well): a cut in
    # the very second the budget was born must not ask for one
    budget = make(clock)
    budget.configure(Limits(rpm=6000))
    first = budget.acquire(1, 1)
    clock.sleep(0.5)
    pauses = [budget.refused(U, 40.0, epoch=first.epoch, nth=1).pause for _ in range(10)]
    assert 40.0 in pauses


# ------------------------------------------------- review of issue 28's second session


def fresh_refusals(budget: Budget, n: int) -> list[float]:
    """``n`` fresh jobs granted and refused (``retry-after: 2``): the pauses the budget answers."""
    return [budget.refused(U, 2.0, epoch=budget.acquire(10, 10).epoch, nth=1).pause for _ in range(n)]


def test_congestion_is_read_after_a_long_quiet_epoch(make: Make, clock: FakeClock) -> None:
    # 25 minutes of light traffic with no congestion, then a storm: the epoch's calls are counted
    # over the last minute only (a window over the whole epoch asked Redis for 9,000 fields)
    budget = make(clock)
    for _ in range(300):
        serve(budget, 1)
        clock.sleep(5.0)
    assert max(fresh_refusals(budget, 12)) == 2.0


def test_calls_that_failed_are_answered_not_still_out(make: Make, clock: FakeClock) -> None:
    # 5xx and timeouts mixed with 429s: the failed calls count as answered, so the refusals are
    # read as congestion (they counted as still out, and no congestion was read)
    budget = make(clock)
    serve(budget, 10)
    for _ in range(40):
        g = budget.acquire(10, 10)
        budget.settle(U, Usage(10, 0), ok=False, epoch=g.epoch)
    assert max(fresh_refusals(budget, 10)) == 2.0


def test_a_job_takes_its_own_mark_out_of_the_congestion_count_once(make: Make, clock: FakeClock) -> None:
    # one job refused three times while fresh jobs are served: its mark is taken out at its
    # second refusal, and its third (judged refused for itself) takes no other job's out
    budget = make(clock)
    serve(budget, 10)
    other = budget.acquire(10, 10)
    budget.refused(U, 0.0, epoch=other.epoch, nth=1)  # another job's refusal: a mark that stays
    g = budget.acquire(10, 10)
    budget.refused(U, 0.0, epoch=g.epoch, nth=1)
    clock.sleep(1.0)
    serve(budget, 2)
    r2 = budget.refused(
        U, 0.0, epoch=budget.acquire(10, 10).epoch, nth=2, previous_epoch=g.epoch, since=1.0, lent=1
    )
    clock.sleep(1.0)
    serve(budget, 2)
    r3 = budget.refused(
        U, 0.0, epoch=budget.acquire(10, 10).epoch, nth=3, previous_epoch=g.epoch, since=1.0, lent=2
    )
    assert not r2.own and r3.own
    assert marks(budget) == 1  # the other job's stands (it was taken out too)


def marks(budget: Budget) -> int:
    """The refusal marks among the budget's recent answers (its congestion count)."""
    key = budget_keys(budget.name)[3]
    if isinstance(budget, RedisBudget):
        return sum(int(m) for m in budget.r.lrange(key, 0, -1))
    assert isinstance(budget, MemoryBudget)
    read = budget._lua.eval(
        "function(k) local n = 0; for _, m in ipairs(redis.call('LRANGE', k, 0, -1)) do"
        " n = n + tonumber(m) end; return n end"
    )
    return int(read(key))


def test_a_worker_setting_the_same_limit_again_keeps_the_rate_learned_under_it(
    make: Make, clock: FakeClock
) -> None:
    budget = make(clock)
    budget.configure(Limits(rpm=6000))
    for _ in range(20):
        serve(budget, 1)
        clock.sleep(0.02)
    epoch = budget.acquire(1, 1).epoch
    for _ in range(3):
        budget.refused(U, 1.0, epoch=epoch, nth=1)
    cut = budget.snapshot().adaptive_rpm
    assert cut is not None and cut < 6000
    budget.configure(Limits(rpm=6000))  # another worker starts with the same --rpm
    assert budget.snapshot().adaptive_rpm == cut
    budget.configure(Limits(rpm=3000))  # a new limit starts afresh
    assert budget.snapshot().adaptive_rpm is None

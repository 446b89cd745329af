"""The budget simulator (issue 28): the matrix of servers, limits and faults, every cell held to
its thresholds; and the simulator's own parts (virtual time, the servers' limit models, the
measures), so a cell's verdict can be trusted.

A cell the budget does not hold yet is a strict xfail naming what it misses (the table of
``python benchmarks/budget_sim.py`` shows the figures): when the budget comes to hold it, the
test fails until the mark is taken away, so the list below is always the truth."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from judgeq.ratelimit.headers import parse_duration, retry_after
from judgeq.testing import budget_sim
from judgeq.testing.budget_sim import EPOCH, Cell, Scenario, Server, VirtualTime, matrix, run
from judgeq.testing.limits import FixedWindow, make_limit

NOT_YET = {
    # a known limit is a ceiling: 429s under it cut the pace; stated 10**6 too high or given 3x too
    # high it is then the adaptive rate that must hold, and it does not yet on these servers
    "token_bucket/inflated/given=None": "as learned from 429s alone on a token bucket: 2.8% 429s",
    "sliding_window/inflated/given=None": "2.0% 429s, just over",
    "per_second/none/given=3.0": "as learned from 429s alone per second: 79% used",
    "per_second/inflated/given=3.0": "as learned from 429s alone per second: 79% used",
    "per_second/inflated/given=None": "as learned from 429s alone per second: 72% used, 4.0% 429s",
    # the limit given right, then dropping 3x and rising: the cut rate grows back 2 % at a time
    "sliding_window/none/drop3x": "38% of the limit a minute after it rose again",
    # learned from 429s alone
    "token_bucket/none/given=None": "8.0% 429s while the first minute's burst is learned",
    "per_second/none/given=None": "71% used, 3.4% 429s",
    "concurrency/none/given=None": "a limit on calls in flight: 50% used, 3.4% 429s",
    # retry-after too short (0, 1, 2, none) on a full window: the storm is found closed and waited
    # out (44%, 71%, 27% and 29% used before); the 429s of learning it remain. 30 s: a pause per
    # congestion
    "sliding_window/none/retry-after=none": "93% used, 4.4% 429s (23% and 44% used before)",
    "sliding_window/none/retry-after=0.0": "95% used, 16% 429s, 4 clean jobs rate_limited (36 before)",
    "sliding_window/none/retry-after=1.0": "98% used, 4.0% 429s (38% and 27% used before)",
    "sliding_window/none/retry-after=2.0": "99% used, 4.8% 429s (38% and 29% used before)",
    "sliding_window/none/retry-after=30.0": "a 30-s pause per congestion: 70% used",
    # jobs refused for themselves (with a retry-after above 0) behind a server that states no
    # limit: no longer a collapse (13% and 3% used before, jobs unfinished after 30 minutes), but
    # the adaptive rate's start and its growth past the limit still cost 429s
    "token_bucket/none/refused=5%": "3.4% 429s",
    "sliding_window/none/refused=5%": "82% used, 3.0% 429s",
    "token_bucket/none/refused=10%": "7.1% 429s",
    "sliding_window/none/refused=10%": "79% used, the others 1.12x slower",
    "sliding_window/none/refused=20%": "101% used, 4.9% 429s",
    "token_bucket/per_day": "no per-minute request limit stated: learned from 429s, 2.8% 429s (22% before)",
    "sliding_window/none/workers=1": "429s just over 2%",
    "sliding_window/none/workers=20": "72% used, 5.3% 429s",
    "token_bucket/none/outage-429": "71% of the limit a minute after",
    # a token bucket refilled to its minute during the outage lets the rate grow past the limit
    # unseen; the overshoot shows when it is drained: 2.7% 429s after the minute that follows
    "token_bucket/none/outage-down": "2.7% 429s once the bucket filled in the outage is drained",
}


def _cells() -> list[object]:
    out: list[object] = []
    for s in matrix():
        marks = []
        if s.name in NOT_YET:
            marks.append(pytest.mark.xfail(strict=True, reason=f"issue 28, not yet: {NOT_YET[s.name]}"))
        out.append(pytest.param(s, id=s.name, marks=[pytest.mark.slow, *marks]))
    return out


@pytest.mark.parametrize("scenario", _cells())
def test_every_cell_holds(scenario: Scenario) -> None:
    cell = run(scenario)
    assert cell.failures() == [], "\n".join(budget_sim.table([cell]))


def test_the_matrix_names_every_cell_once_and_the_known_misses_are_cells() -> None:
    names = [s.name for s in matrix()]
    assert len(names) == len(set(names))
    assert set(NOT_YET) <= set(names)
    # the matrix crosses what the issue names: servers x headers x limits given, and the faults
    assert {n.split("/")[0] for n in names} >= {
        "token_bucket",
        "sliding_window",
        "fixed_window",
        "per_second",
    }
    faults = "retry-after=date retry-after=30.0 refused=20% drop3x alias two-runs two-judges workers=20"
    for fault in (*faults.split(), "outage-429", "outage-down", "per_day", "estimate=1.4", "concurrency"):
        assert any(fault in n for n in names), fault


# ----------------------------------------------------------------------------- virtual time


def test_virtual_time_wakes_sleepers_in_time_order_and_ties_in_the_order_they_slept() -> None:
    sim = VirtualTime()
    log: list[tuple[float, str]] = []

    def sleeper(name: str, steps: list[float]) -> None:
        for step in steps:
            sim.sleep(step)
            log.append((sim.now, name))

    sim.spawn(lambda: sleeper("a", [1.0, 1.0]))
    sim.spawn(lambda: sleeper("b", [2.0, 0.5]))
    sim.spawn(lambda: sleeper("c", [0.5]))
    sim.run()
    # at 2.0 both wake: b first, for it slept first (at 0.0; a at 1.0)
    assert log == [(0.5, "c"), (1.0, "a"), (2.0, "b"), (2.0, "a"), (2.5, "b")]


def test_virtual_time_stops_at_until_and_takes_no_real_time() -> None:
    sim = VirtualTime()
    woke: list[float] = []

    def forever() -> None:
        while True:
            sim.sleep(3600.0)
            woke.append(sim.now)

    sim.spawn(forever)
    sim.run(until=10 * 3600.0)
    assert woke == [3600.0 * k for k in range(1, 11)]


def test_a_cell_is_the_same_every_time_it_runs() -> None:
    s = Scenario("small", Server(rpm=60, model="sliding_window", headers="none"), jobs=120, workers=2)
    a, b = run(s), run(s)
    assert (a.used, a.refused_share, a.wall, a.nulls, a.worst_window) == (
        b.used,
        b.refused_share,
        b.wall,
        b.nulls,
        b.worst_window,
    )


# ----------------------------------------------------------------------------- the servers


def test_a_fixed_window_counts_from_zero_at_each_minute() -> None:
    w = FixedWindow(3)
    for _ in range(3):
        assert w.wait_for(1, 10.0) == 0.0
        w.take(1, 10.0)
    assert w.wait_for(1, 30.0) == pytest.approx(30.0)  # until the next minute starts
    assert w.remaining(59.9) == 0
    assert w.wait_for(1, 60.0) == 0.0 and w.remaining(60.0) == 3
    big = FixedWindow(3)
    assert big.wait_for(10, 5.0) == 0.0  # larger than the limit: admitted into an empty minute


@pytest.mark.parametrize("model", ["token_bucket", "sliding_window", "per_second", "fixed_window"])
def test_a_reservation_settled_counts_as_what_was_used_and_an_expired_one_not_at_all(model: str) -> None:
    # output tokens: max_tokens reserved on admission, settled to the tokens used at the end
    lim = make_limit(model, 6000, 0.0)
    full = 100 if model == "per_second" else 6000  # per_second: 100 in any second
    lim.take(full, 0.5)
    assert lim.wait_for(50, 0.6) > 0  # the reservation fills it
    lim.settle(0.5, full, full - 60, 0.6)
    assert lim.wait_for(50, 0.6) == 0.0 and 60 <= lim.remaining(0.6) <= 70  # (a bucket refills 10)
    if model == "per_second":  # slid out before it was settled: nothing comes back twice
        lim.take(100, 5.0)
        lim.settle(0.5, 100, 0, 5.0)
        assert lim.remaining(5.0) == 0


def test_make_limit_knows_every_model_and_refuses_others() -> None:
    for model in ("token_bucket", "sliding_window", "per_second", "fixed_window"):
        assert make_limit(model, 60, 0.0).per_minute == 60
    with pytest.raises(ValueError, match="limit model"):
        make_limit("leaky", 60, 0.0)


@pytest.mark.parametrize("seconds", [0.02, 0.5, 1.0, 6.0, 59.5, 90.0, 360.0, 3600.0 * 3 + 7])
def test_the_simulated_reset_headers_read_back_as_the_durations_they_state(seconds: float) -> None:
    assert parse_duration(budget_sim._duration(seconds)) == pytest.approx(seconds, abs=0.51)


def test_a_simulated_http_date_retry_after_reads_back_against_the_answers_date() -> None:
    state = budget_sim._ServerState(Server(retry_after="date"), VirtualTime())
    headers = {**state.headers(125.0), **state._retry_after(7.2, 125.0)}
    assert headers["date"].endswith("GMT") and headers["retry-after"].endswith("GMT")
    assert retry_after(headers) == 8.0  # whole seconds, rounded up, from the answer's own date
    assert EPOCH > 1.7e9


def test_per_day_headers_leave_the_requests_to_be_learned() -> None:
    from judgeq.ratelimit import long_window_limits, server_limits

    state = budget_sim._ServerState(Server(rpm=120, tpm=10**7, headers="per_day"), VirtualTime())
    state.requests = 500  # far into the day: its reset is hours away
    headers = state.headers(10.0)
    assert "requests" in long_window_limits(headers)
    assert server_limits(headers) == {"tokens": 10**7}


# ----------------------------------------------------------------------------- the measures


def _cell(**changes: object) -> Cell:
    base = Cell(
        scenario=Scenario("x", Server(rpm=120)),
        used=0.95,
        refused_share=0.0,
        refused_after_fix=0.0,
        rate_limited=0,
        nulls={},
        worst_window=0.9,
        wall=250.0,
        ideal=240.0,
        own_calls_max=0,
        recovered=math.nan,
        binding="requests",
        graded=480,
        total=480,
    )
    return replace(base, **changes)  # type: ignore[arg-type]


def test_a_cell_within_every_threshold_holds() -> None:
    assert _cell().failures() == []


@pytest.mark.parametrize(
    ("changes", "missed"),
    [
        ({"used": 0.89}, "used 89% < 90%"),
        ({"refused_share": 0.021}, "429s 2.1% > 2.0%"),
        ({"worst_window": 0.49}, "worst window 49% < 50%"),
        ({"rate_limited": 2}, "2 clean jobs rate_limited"),
        ({"recovered": 0.8}, "recovered 80% < 90% a minute after"),
        ({"nulls": {"not run": 3}, "graded": 477}, "3 jobs not ended in 1800 s"),
        ({"baseline": 200.0, "clean_wall": 230.0}, "clean jobs took 1.15x their time without them > 1.1x"),
    ],
)
def test_each_threshold_is_held(changes: dict[str, object], missed: str) -> None:
    assert missed in _cell(**changes).failures()


def test_the_right_limit_given_is_held_to_half_a_percent_of_429s() -> None:
    right = _cell(scenario=Scenario("x", Server(rpm=120), given=1.0), refused_share=0.006)
    assert right.failures() == ["429s 0.6% > 0.5%"]
    learned = _cell(refused_share=0.006)
    assert learned.failures() == []


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(5))
def test_jobs_refused_for_themselves_in_the_first_wave_do_not_cut_the_rate(seed: int) -> None:
    # 96 callers sent at once (no limit, 200 ms judge), 5.5 % of the jobs refused for themselves
    # in 50 ms: their refusals come back before the others' answers, and nine of the first ten
    # answers read as congestion; the rate was cut to 146 a minute 0.3 s in and a 4-s run took
    # 3 to 4 minutes (a job held past Celery's visibility timeout is delivered twice)
    s = Scenario(
        "first wave",
        Server(rpm=None, latency=0.2, headers="none", own_retry_after=0.05),
        workers=2,
        concurrency=48,
        jobs=300,
        refused=0.055,
        kind="rate",
        horizon=600.0,
        seed=seed,
    )
    cell = run(s)
    assert set(cell.nulls) <= {"rate_limited"}  # (those refused for themselves)
    assert cell.wall < 10.0, cell.wall


def test_a_job_refused_for_itself_may_take_ten_calls_not_eleven() -> None:
    s = Scenario("x", Server(rpm=120), refused=0.1)
    assert _cell(scenario=s, own_calls_max=10).failures() == []
    assert _cell(scenario=s, own_calls_max=11).failures() == ["a job refused for itself took 11 calls > 10"]


def test_an_outage_cell_holds_nothing_learned_in_it_for_later() -> None:
    s = Scenario("x", Server(rpm=120, outage=(120.0, 180.0, "429")), kind="outage")
    assert _cell(scenario=s, kept_after=115.0).failures() == []
    assert _cell(scenario=s, kept_after=60.0).failures() == ["kept 60/min learned in the outage"]


REAL = {
    # benchmarks/rate_limit.py (2 cores, N = 300/min, 4 workers x 8, 200 ms judge), the given and
    # learned rows on 2026-11-27 before jobs refused for themselves were judged so, the others
    # after; adaptive/sliding, adaptive/bucket and adaptive/sliding+refused again on 2026-11-27
    # once a closed server was waited out: row: (jobs, use of N after the first minute, share of
    # requests answered 429)
    "given/sliding": (450, 0.950, 0.0),
    "given/persecond": (450, 0.950, 0.0),
    "learned/sliding": (450, 0.955, 0.0),
    "learned/persecond": (450, 0.955, 0.0),
    "learned/bucket": (450, 0.955, 0.0),
    "learned/bucket+refused": (450, 0.956, 0.0),
    "adaptive/sliding": (1200, 0.990, 0.036),
    "adaptive/persecond": (1200, 0.881, 0.048),
    "adaptive/bucket": (1200, 0.989, 0.152),
    "adaptive/sliding+refused": (1200, 0.842, 0.012),
}
"""The real benchmark's last figures: the simulator must keep telling the truth about them (issue
28, point 3). When a change of the budget moves a simulated row more than 10 points away, run
``python benchmarks/rate_limit.py`` again and record what it measures: the real run decides."""


DISAGREE = {
    "adaptive/bucket": "429s: simulated 2.8%, real 15.2% (12.1% at the last measure, the simulated "
    "row the same: it was within 10 points by 0.7); the real cuts overshoot (its adaptive rate "
    "oscillates 229-335/min against a limit of 300, congestions every 15 s; the simulated one "
    "holds near 235/min, one a minute): not found yet",
}
"""Rows whose simulated and real figures do not agree yet (issue 28, point 3): strict expected
failures, each naming what differs."""


@pytest.mark.slow
@pytest.mark.parametrize(
    "row",
    [
        pytest.param(r, marks=[pytest.mark.xfail(strict=True, reason=DISAGREE[r])] if r in DISAGREE else [])
        for r in sorted(REAL)
    ],
)
def test_the_simulated_rows_of_the_real_benchmark_agree_with_its_last_measured_figures(row: str) -> None:
    from judgeq.testing.budget_sim import benchmark_row, use_after

    jobs, real_use, real_429 = REAL[row]
    cell = benchmark_row(row, 300, jobs, 0.2)
    simulated = use_after(cell.admitted_at, 300, 60.0)
    assert abs(simulated - real_use) <= 0.10, (row, simulated, real_use)
    assert abs(cell.refused_share - real_429) <= 0.10, (row, cell.refused_share, real_429)


def test_use_after_measures_from_the_first_minute_to_the_last_admission() -> None:
    from judgeq.testing.budget_sim import use_after

    times = [float(t) for t in range(0, 181)]  # one a second for three minutes
    assert use_after(times, 60, 60.0) == pytest.approx(121 / 2 / 60)  # 121 in [60, 180]: 60.5 a minute
    assert math.isnan(use_after(times[:65], 60, 60.0))  # under 10 s after the first minute
    assert math.isnan(use_after([1.0], 60, 60.0))

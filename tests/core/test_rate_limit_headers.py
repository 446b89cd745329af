"""Reading the servers' rate-limit headers (issue 28, points 4 and 5): every ``retry-after``
form, OpenAI's reset durations, Anthropic's reset timestamps, limits over windows longer than a
minute (Groq's requests a day) kept out of the per-minute limits; and cached prompt tokens
charged to the budget as each provider counts them."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from email.utils import format_datetime
from types import SimpleNamespace
from typing import Any

import httpx2 as httpx
import pytest

import judgeq.ratelimit
from judgeq import JudgeReply
from judgeq.grading.request import JudgeRequest
from judgeq.judges.base import RetryPolicy, call_with_retries, retry_after_seconds
from judgeq.judges.openai import OpenAIJudge
from judgeq.ratelimit import MemoryBudget, policy
from judgeq.ratelimit.headers import (
    HEADER_DIMENSIONS,
    LongLimit,
    long_window_limits,
    parse_duration,
    parse_reset,
    retry_after,
    server_limits,
)
from judgeq.testing.clock import ManualClock as FakeClock

NOW = datetime(2026, 3, 2, 12, 0, 0, tzinfo=UTC).timestamp()


def http_date(epoch: float) -> str:
    return format_datetime(datetime.fromtimestamp(epoch, UTC), usegmt=True)


# -- retry-after ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("headers", "seconds"),
    [
        ({"retry-after-ms": "20"}, 0.02),
        ({"Retry-After-Ms": "1500"}, 1.5),
        ({"retry-after": "2"}, 2.0),
        ({"retry-after": "2.5"}, 2.5),
        ({"retry-after": " 7 "}, 7.0),
        ({"retry-after": "0"}, 0.0),
        ({"retry-after": "601"}, 601.0),  # no cap any more
        ({"retry-after": "3600"}, 3600.0),
        ({"RETRY-AFTER": "9"}, 9.0),
        ({"retry-after-ms": "250", "retry-after": "1"}, 0.25),  # the finer one first
        ({"retry-after-ms": "soon", "retry-after": "3"}, 3.0),  # an unreadable one is skipped
        ({"retry-after-ms": "-5", "retry-after": "4"}, 4.0),
        ({"retry-after": "-1"}, None),
        ({"retry-after": "inf"}, None),
        ({"retry-after": "nan"}, None),
        ({"retry-after": "soon"}, None),
        ({"retry-after": ""}, None),
        ({"retry-after": "1s"}, None),  # a duration is no retry-after
        ({"retry-after": "Mon, 32 Jan 2026 00:00:00 GMT"}, None),
        ({"x-ratelimit-reset-requests": "1s"}, None),
        ({}, None),
        (None, None),
    ],
)
def test_retry_after_reads_every_form(headers: dict[str, str] | None, seconds: float | None) -> None:
    got = retry_after(headers, now=NOW)
    assert got == (None if seconds is None else pytest.approx(seconds))


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        (http_date(NOW + 90), 90.0),  # IMF-fixdate in the future
        (http_date(NOW + 7200), 7200.0),
        (http_date(NOW - 30), 0.0),  # in the past: now
        ("Monday, 02-Mar-26 12:01:00 GMT", 60.0),  # RFC 850, obsolete but to be read
        ("Mon Mar  2 12:00:45 2026", 45.0),  # asctime, no zone: UTC
        ("Mon, 02 Mar 2026 13:00:00 +0100", 0.0),  # an offset is honoured: that is now
    ],
)
def test_an_http_date_counts_from_now(value: str, seconds: float) -> None:
    assert retry_after({"Retry-After": value}, now=NOW) == pytest.approx(seconds)


def test_an_http_date_counts_from_the_answers_own_date_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(time, "time", lambda: NOW + 1000)  # a local clock 1000 s ahead of the server's
    headers = {"retry-after": http_date(NOW + 120), "Date": http_date(NOW)}
    assert retry_after(headers) == pytest.approx(120.0)
    # no date (or an unreadable one): the local clock
    assert retry_after({"retry-after": http_date(NOW + 1120)}) == pytest.approx(120.0)
    assert retry_after({"retry-after": http_date(NOW + 1120), "date": "yesterday"}) == pytest.approx(120.0)
    # an explicit now wins over the date header
    assert retry_after(headers, now=NOW + 100) == pytest.approx(20.0)


def test_httpx_headers_and_the_adapters_helper_read_the_same() -> None:
    headers = httpx.Headers({"Retry-After": http_date(NOW + 3600), "date": http_date(NOW)})
    assert retry_after(headers) == pytest.approx(3600.0)
    assert retry_after_seconds(headers) == pytest.approx(3600.0)  # over 600 s: no longer dropped
    assert retry_after_seconds(httpx.Headers({"retry-after-ms": "20"})) == pytest.approx(0.02)
    assert retry_after_seconds({"retry-after": "bogus"}) is None


# -- reset durations and timestamps -----------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("1s", 1.0),
        ("6m0s", 360.0),
        ("20ms", 0.02),
        ("1m30s", 90.0),
        ("2m59.56s", 179.56),
        ("7.66s", 7.66),
        ("1h2m3s", 3723.0),
        ("1h", 3600.0),
        ("0.5s", 0.5),
        (".5s", 0.5),
        ("0s", 0.0),
        ("12ms", 0.012),
        ("150us", 0.00015),
        ("1µs", 1e-6),
        ("6M0S", 360.0),
        (" 9ms ", 0.009),
        ("7.66", 7.66),  # a plain number of seconds
        ("0", 0.0),
        ("60", 60.0),
    ],
)
def test_parse_duration_reads_openais_reset_format(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize(
    "text",
    [None, "", "  ", "soon", "-1s", "-5", "+5s", "1 s", "1d", "5x", "s", "ms", "1s-", "inf", "nan", "1e3"],
)
def test_parse_duration_refuses_garbage(text: str | None) -> None:
    assert parse_duration(text) is None


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("6m0s", 360.0),  # a duration
        ("7.66", 7.66),
        ("2026-03-02T12:00:30Z", 30.0),  # Anthropic's RFC 3339 time
        ("2026-03-02T12:00:30.500Z", 30.5),
        ("2026-03-02T13:01:00+01:00", 60.0),
        ("2026-03-02T11:59:00Z", 0.0),  # past: now
        (str(int(NOW + 45)), 45.0),  # a Unix time
    ],
)
def test_parse_reset_reads_durations_timestamps_and_unix_times(text: str, seconds: float) -> None:
    assert parse_reset(text, now=NOW) == pytest.approx(seconds)


@pytest.mark.parametrize("text", [None, "", "soon", "2026-03-02", "2026-13-02T00:00:00Z", "-3s"])
def test_parse_reset_refuses_garbage(text: str | None) -> None:
    assert parse_reset(text, now=NOW) is None


# -- which limits are per minute ------------------------------------------------------------------

ANTHROPIC = {
    "Anthropic-RateLimit-Requests-Limit": "50",
    "anthropic-ratelimit-requests-remaining": "49",
    "anthropic-ratelimit-requests-reset": "2026-03-02T12:00:01Z",
    "anthropic-ratelimit-input-tokens-limit": "30000",
    "anthropic-ratelimit-input-tokens-remaining": "29000",
    "anthropic-ratelimit-input-tokens-reset": "2026-03-02T12:00:02Z",
    "anthropic-ratelimit-output-tokens-limit": "8000",
    "anthropic-ratelimit-output-tokens-remaining": "8000",
    "anthropic-ratelimit-tokens-limit": "38000",
    "anthropic-ratelimit-tokens-remaining": "37000",
}
OPENAI = {  # as OpenAI answers: resets of a per-minute bucket, in milliseconds
    "x-ratelimit-limit-requests": "5000",
    "x-ratelimit-limit-tokens": "160000",
    "x-ratelimit-remaining-requests": "4999",
    "x-ratelimit-remaining-tokens": "159976",
    "x-ratelimit-reset-requests": "12ms",
    "x-ratelimit-reset-tokens": "9ms",
}
GROQ = {  # Groq's documented sample: requests a DAY, tokens a minute
    "retry-after": "2",
    "x-ratelimit-limit-requests": "14400",
    "x-ratelimit-limit-tokens": "18000",
    "x-ratelimit-remaining-requests": "14370",
    "x-ratelimit-remaining-tokens": "17997",
    "x-ratelimit-reset-requests": "2m59.56s",
    "x-ratelimit-reset-tokens": "7.66s",
}
OPENAI_DOCS_SAMPLE = {  # OpenAI's documented sample: its token reset is six minutes away
    "x-ratelimit-limit-requests": "60",
    "x-ratelimit-limit-tokens": "150000",
    "x-ratelimit-remaining-requests": "59",
    "x-ratelimit-remaining-tokens": "149984",
    "x-ratelimit-reset-requests": "1s",
    "x-ratelimit-reset-tokens": "6m0s",
}


@pytest.mark.parametrize(
    ("headers", "limits", "remaining"),
    [
        (
            ANTHROPIC,
            {"requests": 50, "input-tokens": 30000, "output-tokens": 8000, "tokens": 38000},
            {"requests": 49, "input-tokens": 29000, "output-tokens": 8000, "tokens": 37000},
        ),
        (
            {"anthropic-ratelimit-requests-limit": "50", "anthropic-ratelimit-output-tokens-limit": "bogus"},
            {"requests": 50},
            {},
        ),
        (OPENAI, {"requests": 5000, "tokens": 160000}, {"requests": 4999, "tokens": 159976}),
        ({k.upper(): v for k, v in OPENAI.items()}, {"requests": 5000, "tokens": 160000}, None),
        (  # no reset stated: nothing says longer, per minute as before
            {"x-ratelimit-limit-requests": "600", "x-ratelimit-limit-tokens": "6000"},
            {"requests": 600, "tokens": 6000},
            {},
        ),
        (GROQ, {"tokens": 18000}, {"tokens": 17997}),  # requests a day: not per minute
        (OPENAI_DOCS_SAMPLE, {"requests": 60}, {"requests": 59}),
        (
            {**OPENAI, "x-ratelimit-reset-requests": "1m0s", "x-ratelimit-reset-tokens": "60.5"},
            {"requests": 5000},  # a minute is per minute; a moment more is not
            {"requests": 4999},
        ),
        ({**OPENAI, "x-ratelimit-reset-requests": "soon"}, {"requests": 5000, "tokens": 160000}, None),
        (
            {**OPENAI, "x-ratelimit-limit-tokens": "-1", "x-ratelimit-remaining-tokens": "-1"},
            {"requests": 5000},  # Azure's -1: no limit stated
            {"requests": 4999},
        ),
        ({**OPENAI, "x-ratelimit-remaining-requests": "0"}, None, {"requests": 0, "tokens": 159976}),
        ({"x-ratelimit-limit-requests": "inf", "x-ratelimit-limit-tokens": "0"}, {}, {}),
        ({}, {}, {}),
    ],
)
def test_server_limits_takes_a_limit_per_minute_only_if_nothing_says_longer(
    headers: dict[str, str], limits: dict[str, int] | None, remaining: dict[str, int] | None
) -> None:
    if limits is not None:
        assert server_limits(headers) == limits
    if remaining is not None:
        assert server_limits(headers, "remaining") == remaining


def test_long_window_limits_are_reported_apart_with_their_reset() -> None:
    assert long_window_limits(GROQ) == {"requests": LongLimit(14400, 14370, pytest.approx(179.56))}
    assert not long_window_limits(GROQ)["requests"].exhausted
    spent = {**GROQ, "X-RateLimit-Remaining-Requests": "0", "x-ratelimit-reset-requests": "1h2m3s"}
    spent.pop("x-ratelimit-remaining-requests")
    day = long_window_limits(spent)["requests"]
    assert day.exhausted and day.reset == pytest.approx(3723.0) and day.limit == 14400
    assert long_window_limits(OPENAI_DOCS_SAMPLE) == {"tokens": LongLimit(150000, 149984, 360.0)}
    assert long_window_limits(OPENAI) == {} and long_window_limits(ANTHROPIC) == {}
    assert long_window_limits({"x-ratelimit-reset-requests": "5m"}) == {}  # nothing stated of it


def test_a_reset_time_counts_from_the_answers_date() -> None:
    headers = {
        "x-ratelimit-limit-requests": "1000",
        "x-ratelimit-remaining-requests": "0",
        "x-ratelimit-reset-requests": "2026-03-02T13:00:00Z",
        "date": http_date(NOW),
    }
    assert long_window_limits(headers) == {"requests": LongLimit(1000, 0, 3600.0)}
    assert long_window_limits(headers, now=NOW + 3570) == {}  # 30 s left: a minute's bucket
    assert server_limits(headers) == {}


def test_the_header_dimensions_are_the_policys_and_every_import_still_works() -> None:
    assert (*policy.DIMENSIONS, policy.COMBINED) == HEADER_DIMENSIONS
    assert policy.server_limits is server_limits and judgeq.ratelimit.server_limits is server_limits
    assert judgeq.ratelimit.retry_after is retry_after


def test_the_budget_learns_no_per_minute_limit_from_a_per_day_header() -> None:
    clock = SimpleNamespace(now=NOW)
    groq = MemoryBudget("openai-compatible:m:abc", clock=lambda: clock.now)
    groq.observe(GROQ)
    state = groq.snapshot()
    assert state.server.rpm is None and state.tokens_limit == 18000
    openai = MemoryBudget("openai:m:abc", clock=lambda: clock.now)
    openai.observe(OPENAI)
    state = openai.snapshot()
    assert state.server.rpm == 5000 and state.tokens_limit == 160000


# -- cached prompt tokens, as each provider counts them ---------------------------------------------

REQ = JudgeRequest(system=("s",), user="u", output_schema={}, max_tokens=100)
PROMPT, CACHED, COMPLETION = 5050, 4000, 50


def openai_judge(headers: dict[str, str]) -> OpenAIJudge:
    """The real adapter over a stand-in SDK client answering one completion with cached tokens."""
    completion = SimpleNamespace(
        choices=[
            SimpleNamespace(
                message=SimpleNamespace(content='{"score": 8}', refusal=None), finish_reason="stop"
            )
        ],
        usage=SimpleNamespace(
            prompt_tokens=PROMPT,
            completion_tokens=COMPLETION,
            prompt_tokens_details=SimpleNamespace(cached_tokens=CACHED),
        ),
        model="gpt-test",
    )
    raw = SimpleNamespace(headers=httpx.Headers(headers), parse=lambda: completion)
    create = lambda **_: raw  # noqa: E731
    client: Any = SimpleNamespace(
        chat=SimpleNamespace(completions=SimpleNamespace(with_raw_response=SimpleNamespace(create=create)))
    )
    return OpenAIJudge("gpt-test", client=client)


class Replying:
    """A judge double answering one scripted reply."""

    provider, model = "test", "double"

    def __init__(self, reply: JudgeReply) -> None:
        self.reply = reply

    def complete(self, request: JudgeRequest, *, timeout: float) -> JudgeReply:
        return self.reply


def tokens_left(judge: Any) -> float:
    """The budget's combined-tokens level after one call of ``judge`` (the clock stands still)."""
    clock = FakeClock(NOW)
    budget = MemoryBudget("openai:gpt-test:abc", clock=clock)
    out = call_with_retries(judge, REQ, RetryPolicy(), clock=clock, sleep=clock.sleep, budget=budget)
    assert out.reply is not None
    return budget.snapshot().levels["tokens"]


def test_openai_counts_cached_prompt_tokens_so_the_budget_is_charged_the_whole_prompt() -> None:
    judge = openai_judge(OPENAI)
    reply = judge.complete(REQ, timeout=5)
    assert (reply.input_tokens, reply.cache_read_input_tokens) == (PROMPT - CACHED, CACHED)
    assert reply.limit_input_tokens == PROMPT
    # charged as the server counts the call: 5,050 + 50 tokens, as a call with no cache hit
    uncached = Replying(JudgeReply(text="{}", input_tokens=PROMPT, output_tokens=COMPLETION, headers=OPENAI))
    assert tokens_left(openai_judge(OPENAI)) == pytest.approx(tokens_left(uncached))
    # where cache reads do not count (Anthropic), the same usage is charged 4,000 tokens less
    refunded = JudgeReply(
        text="{}",
        input_tokens=PROMPT - CACHED,
        output_tokens=COMPLETION,
        cache_read_input_tokens=CACHED,
        headers=OPENAI,
    )
    assert tokens_left(Replying(refunded)) == pytest.approx(tokens_left(uncached) + CACHED)


def test_anthropic_cache_writes_count_and_cache_reads_do_not() -> None:
    reply = JudgeReply(
        text="{}",
        input_tokens=1000,
        output_tokens=COMPLETION,
        cache_read_input_tokens=CACHED,
        cache_creation_input_tokens=2000,
        headers=ANTHROPIC,
    )
    plain = JudgeReply(text="{}", input_tokens=3000, output_tokens=COMPLETION, headers=ANTHROPIC)
    clock = FakeClock(NOW)
    levels = []
    for one in (reply, plain):
        budget = MemoryBudget("anthropic:m:abc", clock=clock)
        call_with_retries(Replying(one), REQ, RetryPolicy(), clock=clock, sleep=clock.sleep, budget=budget)
        levels.append(budget.snapshot().levels["input-tokens"])
    assert levels[0] == pytest.approx(levels[1])  # 1,000 + 2,000 written; the 4,000 read are free


def paused_for(seconds: float, clock: Any) -> Any:
    """A fresh in-process budget whose server has just answered a congestion with
    ``retry-after: seconds`` (three of twelve jobs refused)."""
    from judgeq.ratelimit import MemoryBudget, Usage

    budget = MemoryBudget(clock=clock)
    granted = [budget.acquire(1, 1) for _ in range(12)]
    for g in granted[:9]:
        budget.settle(Usage(1, 1), Usage(1, 1), ok=True, epoch=g.epoch)
    pauses = [budget.refused(Usage(1, 1), seconds, epoch=g.epoch, nth=1).pause for g in granted[9:]]
    assert pauses[-1] == min(seconds, 86_400.0)  # the third refused job of twelve: congestion
    return budget


def test_a_pause_of_an_hour_is_an_hour_and_a_job_it_would_outlast_ends_saying_so() -> None:
    from judgeq.ratelimit import policy

    clock = FakeClock(NOW)
    budget = paused_for(3600.0, clock)
    grant = budget.acquire(1, 1)
    assert (grant.wait, grant.paused) == (3600.0, True)  # read in full, not held to ten minutes
    answered = Replying(JudgeReply(text="{}", input_tokens=1, output_tokens=1))
    out = call_with_retries(
        answered, REQ, RetryPolicy(deadline=120.0), clock=clock, sleep=clock.sleep, budget=budget
    )
    assert out.reply is None and out.error is not None and out.error.reason == "rate_limited"
    assert str(out.error) == (
        "the judge's server asked every caller to wait 1h00m more (its retry-after on a congestion): "
        "longer than the 2m00s left of this job's 120s deadline"
    )
    assert out.attempts == 0 and clock.now == NOW  # no call made, no time spent waiting
    assert policy.MAX_PAUSE == 86_400.0  # a retry-after past a day is held to a day
    assert paused_for(10.0**7, clock).acquire(1, 1).wait == policy.MAX_PAUSE


def test_a_pause_shorter_than_the_time_a_job_has_left_is_waited_out() -> None:
    clock = FakeClock(NOW)
    budget = paused_for(90.0, clock)
    answered = Replying(JudgeReply(text="{}", input_tokens=1, output_tokens=1))
    out = call_with_retries(
        answered, REQ, RetryPolicy(deadline=120.0), clock=clock, sleep=clock.sleep, budget=budget
    )
    assert out.reply is not None and clock.now >= NOW + 90.0
    # the pace of a budget (not a pause) never ends a job, however long it asks to wait
    from judgeq.ratelimit import Limits, MemoryBudget

    slow = MemoryBudget(clock=clock)
    slow.configure(Limits(rpm=1))
    assert slow.acquire(1, 1).wait == 0.0
    assert slow.acquire(1, 1).paused is False
    out = call_with_retries(
        answered, REQ, RetryPolicy(deadline=5.0), clock=clock, sleep=clock.sleep, budget=slow
    )
    assert out.reply is not None

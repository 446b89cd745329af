"""The fake Anthropic server, exercised through the real ``anthropic`` SDK."""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Literal
from urllib.parse import quote

import anthropic
import pytest
from pydantic import BaseModel, Field

from judgeq.testing.clock import ManualClock
from judgeq.testing.fake_anthropic import FakeMessagesAPI, generate_from_schema, parse_directives

MODEL = "claude-haiku-4-5"
REPO_ROOT = Path(__file__).resolve().parents[1]

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "reasoning": {"type": "string"},
        "score": {"type": "integer", "description": "Overall quality, integer from 1 to 5"},
        "verdict": {"type": "string", "enum": ["pass", "fail"]},
        "criteria": {
            "type": "object",
            "properties": {
                "accuracy": {"type": "integer", "description": "integer from 0 to 3"},
                "notes": {"type": "string"},
            },
            "required": ["accuracy", "notes"],
            "additionalProperties": False,
        },
        "tags": {"type": "array", "items": {"type": "string"}},
        "confident": {"type": "boolean"},
    },
    "required": ["reasoning", "score", "verdict", "criteria", "tags", "confident"],
    "additionalProperties": False,
}
OUTPUT_CONFIG: Any = {"format": {"type": "json_schema", "schema": SCHEMA}}


@pytest.fixture(scope="module")
def _server() -> Iterator[FakeMessagesAPI]:
    with FakeMessagesAPI(timeout_sleep=2.0) as server:
        yield server


@pytest.fixture(scope="module")
def _client(_server: FakeMessagesAPI) -> Iterator[anthropic.Anthropic]:
    # Building an SDK client costs ~50 ms, so the module shares one (and one server).
    with anthropic.Anthropic(api_key="test-key", base_url=_server.base_url, max_retries=0) as c:
        yield c


@pytest.fixture
def fake(_server: FakeMessagesAPI) -> Iterator[FakeMessagesAPI]:
    _server.reset()
    yield _server
    _server.latency, _server.seed = 0.0, ""


@pytest.fixture
def client(fake: FakeMessagesAPI, _client: anthropic.Anthropic) -> anthropic.Anthropic:
    return _client


def ask(client: anthropic.Anthropic, text: str, **kwargs: Any) -> Any:
    kwargs.setdefault("max_tokens", 512)
    return client.messages.create(model=MODEL, messages=[{"role": "user", "content": text}], **kwargs)


def text_of(message: Any) -> str:
    assert len(message.content) == 1
    assert message.content[0].type == "text"
    return str(message.content[0].text)


# ----------------------------------------------------------------------------- answers


def test_structured_output_conforms_to_schema(client: anthropic.Anthropic) -> None:
    msg = ask(client, "Grade this answer: Paris is the capital of France.", output_config=OUTPUT_CONFIG)
    assert msg.type == "message" and msg.role == "assistant" and msg.model == MODEL
    assert msg.stop_reason == "end_turn" and msg.stop_sequence is None
    data = json.loads(text_of(msg))
    assert set(data) == set(SCHEMA["properties"])
    assert isinstance(data["reasoning"], str) and " " in data["reasoning"]
    assert isinstance(data["score"], int) and 1 <= data["score"] <= 5
    assert data["verdict"] in ("pass", "fail")
    assert set(data["criteria"]) == {"accuracy", "notes"}
    assert 0 <= data["criteria"]["accuracy"] <= 3
    assert isinstance(data["criteria"]["notes"], str)
    assert data["tags"] == [] and data["confident"] is True
    usage = msg.usage
    assert usage.input_tokens > 0 and usage.output_tokens == -(-len(text_of(msg)) // 4)
    assert usage.cache_creation_input_tokens == 0 and usage.cache_read_input_tokens == 0


def test_sdk_parse_with_pydantic_model(client: anthropic.Anthropic) -> None:
    class Grade(BaseModel):
        reasoning: str
        score: int = Field(ge=1, le=4)
        verdict: Literal["pass", "fail"]

    for i in range(5):  # the SDK moves ge/le into the description; the fake must honour it
        msg = client.messages.parse(
            model=MODEL,
            max_tokens=512,
            messages=[{"role": "user", "content": f"item {i}"}],
            output_format=Grade,
        )
        assert msg.parsed_output is not None and 1 <= msg.parsed_output.score <= 4


def _schema(**change: Any) -> dict[str, Any]:
    """A one-field verdict schema with ``change`` made to its ``score`` property (or, for keys
    starting with ``root_``, to the object itself)."""
    score: dict[str, Any] = {"type": "integer", "description": "1 to 10"}
    root: dict[str, Any] = {
        "type": "object",
        "properties": {"score": score},
        "required": ["score"],
        "additionalProperties": False,
    }
    for key, value in change.items():
        target = root if key.startswith("root_") else score
        name = key.removeprefix("root_")
        if value is None:
            target.pop(name, None)
        else:
            target[name] = value
    return root


@pytest.mark.parametrize(
    ("schema", "refused"),
    [
        # what the API documents as unsupported in structured outputs is refused (400), never
        # ignored: a judge asking for it would otherwise pass every test and fail on the API
        (_schema(root_additionalProperties=None), "additionalProperties must be false"),
        (_schema(root_additionalProperties=True), "additionalProperties must be false"),
        (_schema(minimum=1), "property 'minimum' is not supported"),
        (_schema(maximum=10), "property 'maximum' is not supported"),
        (_schema(type="string", maxLength=10), "property 'maxLength' is not supported"),
        (_schema(type="string", format="regex"), "'regex' is not a supported string format"),
        (_schema(type="array", items={"type": "string"}, minItems=2), "minItems: only 0 or 1"),
        (_schema(type="tuple"), "'tuple' is not a supported type"),
        (_schema(root_required=["score", "notes"]), "'notes' is not a property"),
        (_schema(type="array", items={"type": "object", "properties": {}}), "additionalProperties must be"),
        # and what it supports is accepted
        (_schema(), None),
        (_schema(type="string", format="date-time"), None),
        (_schema(type="array", items={"type": "string"}, minItems=1), None),
        (_schema(type=None, enum=["pass", "fail"]), None),
        (_schema(type=None, anyOf=[{"type": "integer"}, {"type": "null"}]), None),
    ],
)
def test_the_structured_output_subset_is_held_as_the_api_holds_it(
    client: anthropic.Anthropic, schema: dict[str, Any], refused: str | None
) -> None:
    config: Any = {"format": {"type": "json_schema", "schema": schema}}
    if refused is None:
        assert json.loads(text_of(ask(client, "grade", output_config=config)))
        return
    with pytest.raises(anthropic.BadRequestError, match=refused):
        ask(client, "grade", output_config=config)


def test_every_builtin_rubrics_schema_is_accepted_and_unknown_fields_are_refused(
    client: anthropic.Anthropic,
) -> None:
    from judgeq.grading.request import output_schema
    from judgeq.rubric.model import builtin_names, load_rubric

    for name in builtin_names():
        config: Any = {"format": {"type": "json_schema", "schema": output_schema(load_rubric(name))}}
        assert json.loads(text_of(ask(client, "grade", output_config=config))), name
    with pytest.raises(anthropic.BadRequestError, match="output_format: Extra inputs are not permitted"):
        ask(client, "grade", extra_body={"output_format": OUTPUT_CONFIG["format"]})


def test_deterministic_and_seeded(fake: FakeMessagesAPI, client: anthropic.Anthropic) -> None:
    first = text_of(ask(client, "same question", output_config=OUTPUT_CONFIG))
    assert text_of(ask(client, "same question", output_config=OUTPUT_CONFIG)) == first
    assert text_of(ask(client, "another question", output_config=OUTPUT_CONFIG)) != first
    fake.seed = "other-seed"
    assert text_of(ask(client, "same question", output_config=OUTPUT_CONFIG)) != first
    assert generate_from_schema(SCHEMA, "x", seed="s") == generate_from_schema(SCHEMA, "x", seed="s")


def test_default_answer_without_output_config(client: anthropic.Anthropic) -> None:
    data = json.loads(text_of(ask(client, "no schema here")))
    assert set(data) == {"score", "reasoning"} and 1 <= data["score"] <= 10


def test_score_and_verdict_directives(client: anthropic.Anthropic) -> None:
    msg = ask(client, "[[fake:score=42]] grade [[fake:verdict=fail]]", output_config=OUTPUT_CONFIG)
    data = json.loads(text_of(msg))
    assert data["score"] == 42 and data["criteria"]["accuracy"] == 42
    assert data["verdict"] == "fail"
    assert json.loads(text_of(ask(client, "[[fake:score=0]]")))["score"] == 0


def test_max_tokens_truncates_answer(client: anthropic.Anthropic) -> None:
    msg = ask(client, "short budget", max_tokens=3, output_config=OUTPUT_CONFIG)
    assert msg.stop_reason == "max_tokens" and len(text_of(msg)) == 12


@pytest.mark.parametrize(
    ("spec", "stop_reason", "expected"),
    [
        ("refusal", "refusal", "I can't help with evaluating this content."),
        ("garbage", "end_turn", "I think this is pretty good overall!!"),
        ("truncated", "max_tokens", '{"reasoning": "The answer is", "sco'),
    ],
)
def test_body_faults(client: anthropic.Anthropic, spec: str, stop_reason: str, expected: str) -> None:
    msg = ask(client, f"[[fake:{spec}]] judge this", output_config=OUTPUT_CONFIG)
    assert msg.stop_reason == stop_reason and text_of(msg) == expected
    if spec == "refusal":
        assert msg.stop_details is not None and msg.stop_details.type == "refusal"


def test_empty_and_prose(client: anthropic.Anthropic) -> None:
    empty = ask(client, "[[fake:empty]]")
    assert empty.content == [] and empty.stop_reason == "end_turn"
    prose = 'Score: 7/10 -- "fine", but [see] notes & caveats.'
    assert text_of(ask(client, f"x [[fake:prose={quote(prose)}]]")) == prose


# ----------------------------------------------------------------------------- errors


def test_wrong_api_key(fake: FakeMessagesAPI) -> None:
    bad = anthropic.Anthropic(api_key="wrong", base_url=fake.base_url, max_retries=0)
    with pytest.raises(anthropic.AuthenticationError) as info:
        ask(bad, "hello")
    assert info.value.status_code == 401
    assert info.value.body == {
        "type": "error",
        "error": {"type": "authentication_error", "message": "invalid x-api-key"},
        "request_id": info.value.body["request_id"],  # type: ignore[index]
    }
    with pytest.raises(anthropic.AuthenticationError):
        ask(
            anthropic.Anthropic(api_key="test-key", base_url=fake.base_url, max_retries=0),
            "[[fake:401]]",
        )


def test_unknown_model() -> None:
    with FakeMessagesAPI(models=(MODEL,)) as server:
        c = anthropic.Anthropic(api_key="test-key", base_url=server.base_url, max_retries=0)
        assert ask(c, "known model").content
        with pytest.raises(anthropic.NotFoundError, match="model: claude-nope"):
            c.messages.create(model="claude-nope", max_tokens=10, messages=[{"role": "user", "content": "x"}])


def test_rate_limit_with_retry_after(client: anthropic.Anthropic) -> None:
    with pytest.raises(anthropic.RateLimitError) as info:
        ask(client, "[[fake:429]] grade")
    assert info.value.response.headers["retry-after"] == "0.05"
    assert info.value.type == "rate_limit_error"
    with pytest.raises(anthropic.RateLimitError) as info:
        ask(client, "[[fake:429*2,retry_after=0.2]] grade")
    assert info.value.response.headers["retry-after"] == "0.2"


def test_overloaded_529(client: anthropic.Anthropic) -> None:
    with pytest.raises(anthropic.OverloadedError) as info:
        ask(client, "[[fake:529]]")
    assert isinstance(info.value, anthropic.InternalServerError)
    assert info.value.status_code == 529 and info.value.type == "overloaded_error"
    assert info.value.response.headers["retry-after"] == "0.05"


def test_internal_server_error_500(client: anthropic.Anthropic) -> None:
    with pytest.raises(anthropic.InternalServerError) as info:
        ask(client, "[[fake:500]]")
    assert not isinstance(info.value, anthropic.OverloadedError)
    assert info.value.status_code == 500 and info.value.type == "api_error"


def test_injected_400(client: anthropic.Anthropic) -> None:
    with pytest.raises(anthropic.BadRequestError):
        ask(client, "[[fake:400]]")
    with pytest.raises(anthropic.BadRequestError, match="unknown fault"):
        ask(client, "[[fake:teapot]]")


def test_transient_faults(fake: FakeMessagesAPI, client: anthropic.Anthropic) -> None:
    text = "[[fake:500*1]] [[fake:score=3]] transient"
    with pytest.raises(anthropic.InternalServerError):
        ask(client, text)
    assert json.loads(text_of(ask(client, text)))["score"] == 3
    assert json.loads(text_of(ask(client, text)))["score"] == 3

    # The SDK's own retries honour retry-after and get through a transient 429: without the
    # header its first backoff is at most 0.5 s, so waiting 3 s shows the header was read.
    fake.reset()
    retrying = client.with_options(max_retries=1)
    started = time.monotonic()
    msg = ask(retrying, "[[fake:429*1,retry_after=3]] retried by the SDK", output_config=OUTPUT_CONFIG)
    assert json.loads(text_of(msg))["verdict"] in ("pass", "fail")
    assert time.monotonic() - started >= 3.0
    assert fake.request_count == 2 and fake.by_status == {429: 1, 200: 1}


def test_slow_times_out() -> None:
    # the fake sleeps 60 s on `slow`: only the client's 0.3 s timeout ends the call well before
    with FakeMessagesAPI(api_key="test-key", timeout_sleep=60.0) as server:
        c = anthropic.Anthropic(api_key="test-key", base_url=server.base_url, max_retries=0, timeout=0.3)
        started = time.monotonic()
        with pytest.raises(anthropic.APITimeoutError):
            ask(c, "[[fake:slow]] take your time")
        assert time.monotonic() - started < 30.0


@pytest.mark.parametrize(
    "extra",
    [
        {"extra_body": {"temperature": 0.0}},
        {"extra_body": {"top_p": 0.9}},
        {"extra_body": {"top_k": 5}},
        {
            "tools": [{"name": "grade", "input_schema": {"type": "object"}}],
            "tool_choice": {"type": "any"},
        },
        {
            "tools": [{"name": "grade", "input_schema": {"type": "object"}}],
            "tool_choice": {"type": "tool", "name": "grade"},
        },
    ],
)
def test_rejects_unsupported_parameters(client: anthropic.Anthropic, extra: Any) -> None:
    with pytest.raises(anthropic.BadRequestError) as info:
        ask(client, "grade", **extra)
    assert info.value.type == "invalid_request_error"


def test_rejects_prefill(client: anthropic.Anthropic) -> None:
    with pytest.raises(anthropic.BadRequestError, match="prefill"):
        client.messages.create(
            model=MODEL,
            max_tokens=100,
            messages=[
                {"role": "user", "content": "grade"},
                {"role": "assistant", "content": '{"score":'},
            ],
        )


# ----------------------------------------------------------------------------- plumbing


def test_count_tokens(fake: FakeMessagesAPI, client: anthropic.Anthropic) -> None:
    result = client.messages.count_tokens(
        model=MODEL, messages=[{"role": "user", "content": "count me " * 10}]
    )
    assert result.input_tokens > 10
    assert fake.request_count == 0


def test_recorded_requests_stats_and_reset(fake: FakeMessagesAPI, client: anthropic.Anthropic) -> None:
    ask(client, "one", output_config=OUTPUT_CONFIG)
    with pytest.raises(anthropic.RateLimitError):
        ask(client, "two [[fake:429]]")
    assert fake.request_count == 2
    assert [r["messages"][0]["content"] for r in fake.requests] == ["one", "two [[fake:429]]"]
    assert fake.requests[0]["output_config"] == OUTPUT_CONFIG

    with urllib.request.urlopen(f"{fake.base_url}/_fake/stats", timeout=5) as resp:
        stats = json.loads(resp.read())
    assert stats["request_count"] == 2 and stats["by_status"] == {"200": 1, "429": 1}
    reset = urllib.request.Request(f"{fake.base_url}/_fake/reset", data=b"", method="POST")
    with urllib.request.urlopen(reset, timeout=5) as resp:
        assert json.loads(resp.read()) == {"ok": True}
    assert fake.request_count == 0 and fake.requests == []


def test_latency_and_concurrency(fake: FakeMessagesAPI, client: anthropic.Anthropic) -> None:
    fake.latency = 0.2
    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=200) as pool:
        results = list(pool.map(lambda i: ask(client, f"concurrent {i}"), range(200)))
    elapsed = time.monotonic() - started
    assert all(json.loads(text_of(m))["score"] >= 1 for m in results)
    assert fake.request_count == 200
    assert 0.2 <= elapsed < 20.0, elapsed  # serial would take 40 s


def test_directive_parser() -> None:
    d = parse_directives("a [[fake:score=2]] b [[fake:429*2,retry_after=0.2]] [[fake:500]]")
    assert (d.fault, d.count, d.retry_after, d.score) == ("429", 2, "0.2", 2)
    assert parse_directives("nothing").fault is None


def test_subprocess_mode() -> None:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(REPO_ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "judgeq.testing.fake_anthropic",
            "--port",
            "0",
            "--latency",
            "0.2",
            "--api-key",
            "sub-key",
            "--limit-model",
            "sliding_window",
            "--rpm",
            "100",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert proc.stdout is not None
        ready, _, _ = select.select([proc.stdout], [], [], 10)
        assert ready, "no READY line within 10 s"
        line = proc.stdout.readline().strip()
        assert line.startswith("READY http://127.0.0.1:"), line
        base_url = line.split(" ", 1)[1]
        c = anthropic.Anthropic(api_key="sub-key", base_url=base_url, max_retries=0)
        started = time.monotonic()
        msg = ask(c, "from another process", output_config=OUTPUT_CONFIG)
        assert time.monotonic() - started >= 0.2
        assert json.loads(text_of(msg))["verdict"] in ("pass", "fail")
        with urllib.request.urlopen(f"{base_url}/_fake/stats", timeout=5) as resp:
            stats = json.loads(resp.read())
        assert stats["request_count"] == 1
        assert stats["limit_model"] == "sliding_window" and stats["limits"]["rpm"] == 100
    finally:
        proc.terminate()
        assert proc.wait(timeout=5) == 0
        assert proc.stderr is not None and proc.stdout is not None
        assert proc.stderr.read() == ""
        proc.stdout.close()
        proc.stderr.close()


def test_rate_limits_answer_429_beyond_the_bucket_with_headers() -> None:
    """A bucket of 3 requests a minute: 3 pass, the 4th is a 429 whose retry-after covers the
    refill (20 s for one request), and every answer carries the rate-limit headers."""
    with FakeMessagesAPI(api_key="k", rpm=3, itpm=100_000, otpm=50_000) as fake:
        c = anthropic.Anthropic(api_key="k", base_url=fake.base_url, max_retries=0)
        kwargs: dict[str, Any] = {
            "model": MODEL,
            "max_tokens": 20,
            "messages": [{"role": "user", "content": "hi"}],
        }
        raw = [c.messages.with_raw_response.create(**kwargs) for _ in range(3)]
        assert [int(r.headers["anthropic-ratelimit-requests-remaining"]) for r in raw] == [2, 1, 0]
        head = raw[0].headers
        assert head["anthropic-ratelimit-requests-limit"] == "3"
        assert head["anthropic-ratelimit-input-tokens-limit"] == "100000"
        assert head["anthropic-ratelimit-output-tokens-limit"] == "50000"
        assert head["anthropic-ratelimit-requests-reset"].endswith("Z")
        with pytest.raises(anthropic.RateLimitError) as info:
            c.messages.create(**kwargs)
        assert 1 <= int(info.value.response.headers["retry-after"]) <= 20
        assert info.value.response.headers["anthropic-ratelimit-requests-remaining"] == "0"
        assert fake.by_status == {200: 3, 429: 1} and len(fake.accepted_times()) == 3


def test_input_token_limit() -> None:
    with FakeMessagesAPI(api_key="k", itpm=60) as fake:
        c = anthropic.Anthropic(api_key="k", base_url=fake.base_url, max_retries=0)
        big = {"model": MODEL, "max_tokens": 5, "messages": [{"role": "user", "content": "x" * 400}]}
        c.messages.create(**big)  # about 110 input tokens: a full bucket admits it, and is overdrawn
        with pytest.raises(anthropic.RateLimitError):
            c.messages.create(**big)
        fake.set_limits()  # unlimited again
        c.messages.create(**big)


# ----------------------------------------------------------------------------- limit models


def limited(clock: ManualClock, model: str, **kwargs: Any) -> FakeMessagesAPI:
    """A stand-in that is not serving: its admission logic, tested directly."""
    return FakeMessagesAPI(api_key="k", limit_model=model, clock=clock, **kwargs)


def admitted(fake: FakeMessagesAPI, input_tokens: int = 10, max_tokens: int = 1) -> float:
    """0.0 when the stand-in admits a request of ``input_tokens`` and ``max_tokens``, else the
    seconds it asks to wait."""
    wait, _ = fake._admit(input_tokens, max_tokens, fake.clock())
    return wait


def most_in_any_interval(times: list[float], span: float) -> int:
    """The most of ``times`` in any half-open interval [t, t + span)."""
    times = sorted(times)
    return max(sum(1 for u in times if t <= u < t + span) for t in times)


def assert_exactly(fake: FakeMessagesAPI, refused: list[float], n: int, span: float) -> None:
    """At most ``n`` admitted in any ``span``-second interval, and each refusal came when the
    last ``span`` seconds already held ``n``: the limit is enforced exactly, never early."""
    times = fake.accepted_times()
    assert most_in_any_interval(times, span) == n
    for at in refused:
        assert sum(1 for t in times if at - span < t <= at) == n, at


def limit_headers_of(headers: Any) -> dict[str, str]:
    return {k.lower(): v for k, v in headers.items() if k.lower().startswith("anthropic-ratelimit-")}


def test_limit_models_differ_on_the_same_arrivals() -> None:
    """5 requests a minute, one every 10 s, then a sixth at 50 s: the bucket has refilled
    (4 of 5 tokens back), the sliding window still holds 5 and refuses it for 10 s more, and
    per second (max(1, 5 // 60) = 1 a second) admits it."""
    outcome = {}
    for model in ("token_bucket", "sliding_window", "per_second"):
        clock = ManualClock(1000.0)
        fake = limited(clock, model, rpm=5)
        for _ in range(5):
            assert admitted(fake) == 0.0, model
            clock.sleep(10)
        outcome[model] = admitted(fake)
    assert outcome["token_bucket"] == 0.0
    assert outcome["sliding_window"] == pytest.approx(10.0)
    assert outcome["per_second"] == 0.0


def test_sliding_window_admits_exactly_n_in_any_60_seconds() -> None:
    clock = ManualClock(1000.0)
    fake = limited(clock, "sliding_window", rpm=5)
    for _ in range(5):  # a burst of the whole limit at once
        assert admitted(fake) == 0.0
    clock.sleep(30)
    assert admitted(fake) == pytest.approx(30.0)  # until the oldest slides out, at 60 s
    clock.sleep(29.9)
    assert admitted(fake) == pytest.approx(0.1)
    clock.sleep(0.1)  # 60 s after the burst: the whole burst has slid out
    for _ in range(5):
        assert admitted(fake) == 0.0
    assert admitted(fake) == pytest.approx(60.0)
    refused = [clock.now]
    # spread arrivals: a request every 7 s for 10 minutes
    for _ in range(86):
        clock.sleep(7)
        if admitted(fake) > 0.0:
            refused.append(clock.now)
    assert_exactly(fake, refused, 5, 60.0)
    assert fake.stats()["rate_limited"] == 3 + len(refused) - 1


def test_sliding_window_retry_after_waits_for_the_oldest_to_slide_out() -> None:
    clock = ManualClock(1000.0)
    fake = limited(clock, "sliding_window", rpm=3)
    for _ in range(3):
        assert admitted(fake) == 0.0
        clock.sleep(10)
    # at 30 s: full; the oldest (0 s) slides out at 60 s; the next (10 s) at 70 s
    assert admitted(fake) == pytest.approx(30.0)
    clock.sleep(30)
    assert admitted(fake) == 0.0
    assert admitted(fake) == pytest.approx(10.0)
    assert len(fake.accepted_times()) == 4


def test_sliding_window_counts_input_and_output_tokens() -> None:
    clock = ManualClock(1000.0)
    fake = limited(clock, "sliding_window", itpm=100)
    assert admitted(fake, 60) == 0.0
    clock.sleep(5)
    assert admitted(fake, 40) == 0.0
    clock.sleep(5)
    assert admitted(fake, 1) == pytest.approx(50.0)  # the first 60 slide out at 60 s
    clock.sleep(50)
    assert admitted(fake, 60) == 0.0 and admitted(fake, 1) == pytest.approx(5.0)
    clock.sleep(120)
    assert admitted(fake, 500) == 0.0  # larger than the limit: admitted by an empty window
    assert admitted(fake, 1) == pytest.approx(60.0)

    clock = ManualClock(1000.0)
    fake = limited(clock, "sliding_window", otpm=50)
    start = clock.now
    assert admitted(fake, max_tokens=40) == 0.0  # max_tokens reserved on admission ...
    assert admitted(fake, max_tokens=20) == pytest.approx(60.0)
    clock.sleep(5)
    fake._spend_output(start, 40, 10)  # ... settled to what the answer used
    assert admitted(fake, max_tokens=40) == 0.0
    clock.sleep(15)
    assert admitted(fake, max_tokens=20) == pytest.approx(45.0)  # 40 at 5 s slide out at 65 s


def test_per_second_admits_n_over_60_in_any_second() -> None:
    clock = ManualClock(1000.0)
    fake = limited(clock, "per_second", rpm=180)  # 3 a second
    assert [admitted(fake) for _ in range(4)][:3] == [0.0, 0.0, 0.0]
    assert admitted(fake) == pytest.approx(1.0)
    clock.sleep(0.5)
    assert admitted(fake) == pytest.approx(0.5)
    clock.sleep(0.5)
    assert [admitted(fake) for _ in range(3)] == [0.0, 0.0, 0.0]
    # arrivals every 50 ms for 10 s, each asking until it is refused
    refused = []
    for _ in range(200):
        clock.sleep(0.05)
        while admitted(fake) == 0.0:
            pass
        refused.append(clock.now)
    assert_exactly(fake, refused, 3, 1.0)
    # a per-minute limit below 60 is one request a second
    clock = ManualClock(1000.0)
    fake = limited(clock, "per_second", rpm=30)
    assert admitted(fake) == 0.0 and admitted(fake) == pytest.approx(1.0)
    clock.sleep(1.0)
    assert admitted(fake) == 0.0


def test_per_second_tokens_and_a_single_large_request() -> None:
    clock = ManualClock(1000.0)
    fake = limited(clock, "per_second", itpm=6000)  # 100 input tokens a second
    assert admitted(fake, 40) == 0.0 and admitted(fake, 40) == 0.0
    assert admitted(fake, 40) > 0.0  # 120 > 100
    assert admitted(fake, 20) == 0.0  # exactly 100
    clock.sleep(1.0)
    assert admitted(fake, 300) == 0.0  # larger than a second's share: its second is empty
    assert admitted(fake, 1) == pytest.approx(1.0)
    clock.sleep(0.5)
    assert admitted(fake, 1) == pytest.approx(0.5)
    clock.sleep(0.5)
    assert admitted(fake, 40) == 0.0
    assert admitted(fake, 300) == pytest.approx(1.0)  # large: waits for an empty second


def test_token_bucket_unchanged() -> None:
    clock = ManualClock(1000.0)
    fake = limited(clock, "token_bucket", rpm=60, itpm=600)
    assert all(admitted(fake) == 0.0 for _ in range(60))  # full: a burst of the whole limit
    assert admitted(fake) == pytest.approx(1.0)  # refilled at 1 a second
    clock.sleep(1.0)
    assert admitted(fake) == 0.0 and admitted(fake) > 0.0
    clock.sleep(60)
    assert admitted(fake, 900) == 0.0  # larger than the limit: a full bucket admits it
    assert admitted(fake, 10) == pytest.approx((10 + 300) / 10)  # overdrawn by 300


def test_window_models_through_the_sdk_with_headers() -> None:
    clock = ManualClock(1000.0)
    with FakeMessagesAPI(api_key="k", rpm=3, itpm=6000, limit_model="sliding_window", clock=clock) as fake:
        c = anthropic.Anthropic(api_key="k", base_url=fake.base_url, max_retries=0)
        kwargs: dict[str, Any] = {
            "model": MODEL,
            "max_tokens": 20,
            "messages": [{"role": "user", "content": "hi"}],
        }
        raw = []
        for _ in range(3):
            raw.append(c.messages.with_raw_response.create(**kwargs))
            clock.sleep(10)
        assert [int(r.headers["anthropic-ratelimit-requests-remaining"]) for r in raw] == [2, 1, 0]
        head = raw[0].headers
        assert head["anthropic-ratelimit-requests-limit"] == "3"
        assert head["anthropic-ratelimit-input-tokens-limit"] == "6000"
        assert int(head["anthropic-ratelimit-input-tokens-remaining"]) < 6000
        assert head["anthropic-ratelimit-requests-reset"].endswith("Z")
        with pytest.raises(anthropic.RateLimitError) as info:  # at 30 s: the oldest leaves at 60 s
            c.messages.create(**kwargs)
        assert info.value.response.headers["retry-after"] == "30"
        assert info.value.response.headers["anthropic-ratelimit-requests-remaining"] == "0"
        clock.sleep(30)
        assert c.messages.create(**kwargs).content

        # the same server, now per second (set over /_fake/config): 180 a minute, 3 a second
        config = urllib.request.Request(
            f"{fake.base_url}/_fake/config",
            data=json.dumps({"limit_model": "per_second", "rpm": 180}).encode(),
            method="POST",
        )
        with urllib.request.urlopen(config, timeout=5) as resp:
            stats = json.loads(resp.read())
        assert stats["limit_model"] == "per_second"
        assert stats["limits"] == {"rpm": 180, "itpm": None, "otpm": None}
        raw = [c.messages.with_raw_response.create(**kwargs) for _ in range(3)]
        assert raw[0].headers["anthropic-ratelimit-requests-limit"] == "180"  # the per-minute N
        assert [int(r.headers["anthropic-ratelimit-requests-remaining"]) for r in raw] == [2, 1, 0]
        with pytest.raises(anthropic.RateLimitError) as info:
            c.messages.create(**kwargs)
        assert info.value.response.headers["retry-after"] == "1"
        clock.sleep(1.0)
        assert c.messages.create(**kwargs).content
        stats = fake.stats()
        assert stats["count_429"] == 2 and stats["rate_limited"] == 2 and stats["injected_429"] == 0
        assert fake.by_status == {200: 8, 429: 2} and len(fake.accepted_times()) == 8

        bad = urllib.request.Request(
            f"{fake.base_url}/_fake/config", data=b'{"limit_model": "leaky"}', method="POST"
        )
        with pytest.raises(urllib.error.HTTPError) as http_error:
            urllib.request.urlopen(bad, timeout=5)
        assert http_error.value.code == 400
        assert fake.limit_model == "per_second"


@pytest.mark.parametrize("model", ["token_bucket", "sliding_window", "per_second"])
def test_no_limit_headers_but_retry_after(model: str) -> None:
    clock = ManualClock(1000.0)
    with FakeMessagesAPI(api_key="k", rpm=1, limit_model=model, limit_headers=False, clock=clock) as fake:
        c = anthropic.Anthropic(api_key="k", base_url=fake.base_url, max_retries=0)
        kwargs: dict[str, Any] = {
            "model": MODEL,
            "max_tokens": 20,
            "messages": [{"role": "user", "content": "hi"}],
        }
        ok = c.messages.with_raw_response.create(**kwargs)
        assert limit_headers_of(ok.headers) == {}
        with pytest.raises(anthropic.RateLimitError) as info:
            c.messages.create(**kwargs)
        assert limit_headers_of(info.value.response.headers) == {}
        expected = {"token_bucket": "60", "sliding_window": "60", "per_second": "1"}[model]
        assert info.value.response.headers["retry-after"] == expected


@pytest.mark.parametrize("model", ["token_bucket", "sliding_window", "per_second"])
def test_injected_429_with_retry_after_0_takes_nothing_from_the_limits(model: str) -> None:
    """``[[fake:429,retry_after=0]]``: a request refused for itself, every time, with its own
    retry-after; the limits never see it, so the one request a minute is still there."""
    clock = ManualClock(1000.0)
    with FakeMessagesAPI(api_key="k", rpm=1, limit_model=model, clock=clock) as fake:
        c = anthropic.Anthropic(api_key="k", base_url=fake.base_url, max_retries=0)
        for _ in range(3):
            with pytest.raises(anthropic.RateLimitError) as info:
                ask(c, "[[fake:429,retry_after=0]] refused for itself")
            assert info.value.response.headers["retry-after"] == "0"
            assert info.value.response.headers["anthropic-ratelimit-requests-remaining"] == "1"
        assert fake.accepted_times() == []
        assert ask(c, "an ordinary request").content
        with pytest.raises(anthropic.RateLimitError) as info:
            ask(c, "[[fake:429,retry_after=0]] still refused for itself")
        assert info.value.response.headers["retry-after"] == "0"
        stats = fake.stats()
        assert (stats["count_429"], stats["rate_limited"], stats["injected_429"]) == (4, 0, 4)
        assert len(fake.accepted_times()) == 1

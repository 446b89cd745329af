"""One contract for every judge provider (issue 31, point 5): each provider that calls an API
is run through the same cases, through its real SDK against its stand-in on loopback, so a new
provider is tested by adding it to :data:`PROVIDERS` (a stand-in and how to point its judge at
it). The stand-ins share one fault language (``[[fake:429]]``, ``[[fake:500*2]]``, ...), each
answering as its service does.

The cases: a verdict as structured output that scores; each fault the world sends (429 with
the server's wait, 5xx, overloaded, a refused key, a bad request, a slow answer, garbage, a cut
answer, a refusal) as its null reason; retries through judgeq's loop; the preflight (key and
model); provenance and the reply cache's identity naming the server; no secret in anything a
person or Redis sees. Where a provider offers a batch API, its batch lane too: requests keyed
by custom id, the batch polled to its end, each answer a reply or its null (the lane's own
suites: tests/core/test_lane.py, tests/test_batch_adapter.py)."""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from typing import Any

import pytest

from judgeq.errors import JudgeError
from judgeq.grading.request import JudgeRequest, render_request
from judgeq.grading.verdict import parse_verdict
from judgeq.judges import parse_judge_spec
from judgeq.judges.base import JudgeBase, RetryPolicy, call_with_retries
from judgeq.judges.providers import JudgeSetup, provider, registered
from judgeq.pipeline.job import provenance
from judgeq.ratelimit import server_limits
from judgeq.rubric.model import load_rubric
from judgeq.settings import load_settings
from judgeq.testing.fake_anthropic import FakeMessagesAPI
from judgeq.testing.fake_gemini import FakeGeminiAPI
from judgeq.testing.fake_openai import FakeChatAPI

RUBRIC = load_rubric("quality")
SECRET = "sk-contract-9f8e7d6c5b4a"
ENV = (
    "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "OPENAI_API_KEY", "OPENAI_BASE_URL",
    "OPENAI_COMPATIBLE_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY", "GOOGLE_GEMINI_BASE_URL",
    "GOOGLE_GENAI_USE_VERTEXAI", "AWS_REGION", "AWS_DEFAULT_REGION", "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY", "AWS_BEARER_TOKEN_BEDROCK", "AWS_PROFILE", "ANTHROPIC_BEDROCK_BASE_URL",
    "GOOGLE_APPLICATION_CREDENTIALS", "ANTHROPIC_VERTEX_PROJECT_ID", "CLOUD_ML_REGION",
    "ANTHROPIC_VERTEX_BASE_URL", "ANTHROPIC_VERTEX_ACCESS_TOKEN", "JUDGEQ_JUDGE_URLS",
)  # fmt: skip


@dataclass(frozen=True)
class Stand:
    """How one provider is tried: its stand-in (a context giving the server, its base URL and
    ``known(model)``), the environment that points the provider's SDK at it with a key, the
    model it serves and how to make it refuse structured output."""

    spec: str
    serve: Callable[[str], AbstractContextManager[Any]]
    environment: Callable[[str, str], dict[str, str]]
    model: str
    unstructured: Callable[[Any], None]
    """Makes the stand-in a server that refuses structured output (as its service's models or
    regions without it do)."""


RPM = 6000
"""The request limit a stand-in that states limits is given (its headers say it)."""


def _anthropic(key: str) -> FakeMessagesAPI:
    return FakeMessagesAPI(
        api_key=key, models=("claude-contract",), timeout_sleep=3.0, batch_latency=0.05, rpm=RPM
    )


def _openai(key: str) -> FakeChatAPI:
    return FakeChatAPI(api_key=key, models=("gpt-contract",), timeout_sleep=3.0, batch_latency=0.05, rpm=RPM)


def _vertex_environment(url: str, key: str) -> dict[str, str]:
    """Vertex AI's settings with an access token given as is (the SDK's ``access_token``; its
    application default credentials chain reaches Google's token endpoint: not exercised)."""
    return {
        "ANTHROPIC_VERTEX_ACCESS_TOKEN": key, "ANTHROPIC_VERTEX_PROJECT_ID": "judgeq-test",
        "CLOUD_ML_REGION": "us-east5", "ANTHROPIC_VERTEX_BASE_URL": f"{url}/v1",
    }  # fmt: skip


def _vertex(key: str) -> FakeMessagesAPI:
    fake = FakeMessagesAPI(api_key=key, models=("claude-contract",), timeout_sleep=3.0, rpm=RPM)
    fake.google_token = key
    return fake


def _gemini(key: str) -> FakeGeminiAPI:
    return FakeGeminiAPI(
        api_keys=(key,), models=("gemini-2.5-flash",), timeout_sleep=3.0, batch_polls_to_finish=2
    )


PROVIDERS = [
    Stand(
        "anthropic:claude-contract",
        _anthropic,
        lambda url, key: {"ANTHROPIC_API_KEY": key, "ANTHROPIC_BASE_URL": url},
        "claude-contract",
        lambda fake: setattr(fake, "structured", False),
    ),
    Stand(
        "openai:gpt-contract",
        _openai,
        lambda url, key: {"OPENAI_API_KEY": key, "OPENAI_BASE_URL": url + "/v1"},
        "gpt-contract",
        lambda fake: setattr(fake, "structured", False),
    ),
    Stand(
        "openai-compatible:gpt-contract@{url}/v1",
        _openai,
        lambda url, key: {"OPENAI_COMPATIBLE_API_KEY": key},
        "gpt-contract",
        lambda fake: setattr(fake, "structured", False),
    ),
    Stand(
        "bedrock:claude-contract",
        _anthropic,
        lambda url, key: {
            "AWS_REGION": "us-east-1",
            "AWS_BEARER_TOKEN_BEDROCK": key,
            "ANTHROPIC_BEDROCK_BASE_URL": url,
        },
        "claude-contract",
        lambda fake: setattr(fake, "structured", False),
    ),
    Stand(
        "vertex:claude-contract",
        _vertex,
        _vertex_environment,
        "claude-contract",
        lambda fake: setattr(fake, "structured", False),
    ),
    Stand(
        "gemini:gemini-2.5-flash",
        _gemini,
        lambda url, key: {"GEMINI_API_KEY": key, "GOOGLE_GEMINI_BASE_URL": url},
        "gemini-2.5-flash",
        lambda fake: setattr(fake, "json_mode", False),
    ),
]
IDS = [s.spec.partition(":")[0] for s in PROVIDERS]


def test_every_provider_that_calls_an_api_is_in_the_contract() -> None:
    """A provider registered without a place here is a provider nobody tested."""
    tried = {s.spec.partition(":")[0] for s in PROVIDERS}
    calling = {p for p in registered() if not provider(p).offline and not provider(p).own_key_budget}
    assert calling == tried


@dataclass
class Tried:
    """A provider's judge pointed at its stand-in."""

    judge: JudgeBase
    fake: Any
    url: str
    stand: Stand


@contextmanager
def tried(stand: Stand, monkeypatch: pytest.MonkeyPatch, key: str = SECRET) -> Iterator[Tried]:
    for name in ENV:
        monkeypatch.delenv(name, raising=False)
    with stand.serve(SECRET) as fake:
        url = fake.base_url
        for name, value in stand.environment(url, key).items():
            monkeypatch.setenv(name, value)
        monkeypatch.setenv("JUDGEQ_JUDGE_URLS", url)
        spec = parse_judge_spec(stand.spec.format(url=url))
        setup = JudgeSetup.of(load_settings())  # as a worker builds it: from this environment
        yield Tried(spec.api.build(spec.model, setup), fake, url, stand)


def request(marker: str = "") -> JudgeRequest:
    return render_request(RUBRIC, input="What is the capital of France?", output=f"Paris. {marker}".strip())


@pytest.fixture(params=PROVIDERS, ids=IDS)
def stand(request: pytest.FixtureRequest) -> Stand:
    value: Stand = request.param
    return value


def test_a_verdict_comes_back_structured_and_scores(stand: Stand, monkeypatch: pytest.MonkeyPatch) -> None:
    with tried(stand, monkeypatch) as t:
        reply = t.judge.complete(request("[[fake:score=7]]"), timeout=5)
    verdict = parse_verdict(
        RUBRIC, text=reply.text, tool_input=reply.tool_input, stop_reason=reply.stop_reason
    )
    assert verdict.null_reason is None, reply.text
    assert verdict.scores and set(verdict.scores.values()) == {7}
    assert reply.input_tokens > 0 and reply.output_tokens > 0
    assert (reply.response_format or t.judge.response_format) == "json_schema"


def test_a_server_refusing_structured_output_gets_the_verdict_in_a_looser_format(
    stand: Stand, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A model or region without structured output refuses it with a 400: the judge asks in
    its provider's next format (the request's words ask for the JSON verdict in each), says so
    in the reply (provenance), and keeps that format: one refused request a judge, not a job."""
    with tried(stand, monkeypatch) as t:
        stand.unstructured(t.fake)
        first = t.judge.complete(request("[[fake:score=7]]"), timeout=5)
        before = t.fake.request_count
        again = t.judge.complete(request("[[fake:score=6]]"), timeout=5)
        assert t.fake.request_count == before + 1
    assert first.response_format not in (None, "json_schema")
    assert again.response_format == first.response_format == t.judge.response_format
    for reply, score in ((first, 7), (again, 6)):
        verdict = parse_verdict(
            RUBRIC, text=reply.text, tool_input=reply.tool_input, stop_reason=reply.stop_reason
        )
        assert verdict.null_reason is None, reply.text
        assert set(verdict.scores.values()) == {score}


FAULTS = [
    ("[[fake:429,retry_after=2]]", "rate_limited"),
    ("[[fake:500]]", "api_error"),
    ("[[fake:529]]", "overloaded"),
    ("[[fake:401]]", "auth_error"),
    ("[[fake:400]]", "invalid_request"),
]


@pytest.mark.parametrize(("marker", "reason"), FAULTS, ids=[r for _, r in FAULTS])
def test_each_fault_is_its_null_reason(
    stand: Stand, monkeypatch: pytest.MonkeyPatch, marker: str, reason: str
) -> None:
    with tried(stand, monkeypatch) as t, pytest.raises(JudgeError) as caught:
        t.judge.complete(request(marker), timeout=5)
    assert caught.value.reason == reason, str(caught.value)
    if reason == "rate_limited":  # the server's wait (a header, or Google's RetryInfo) reaches the budget
        assert caught.value.retry_after == pytest.approx(2.0)
    assert SECRET not in str(caught.value)


def test_a_slow_answer_is_a_timeout(stand: Stand, monkeypatch: pytest.MonkeyPatch) -> None:
    with tried(stand, monkeypatch) as t, pytest.raises(JudgeError) as caught:
        t.judge.complete(request("[[fake:slow]]"), timeout=0.3)
    assert caught.value.reason == "timeout"


@pytest.mark.parametrize(
    ("marker", "null_reason", "stop"),
    [
        ("[[fake:garbage]]", "parse_error", None),
        ("[[fake:truncated]]", None, "max_tokens"),
        ("[[fake:refusal]]", None, "refusal"),
    ],
    ids=["garbage", "truncated", "refusal"],
)
def test_an_answer_that_is_no_verdict_is_said_so(
    stand: Stand, monkeypatch: pytest.MonkeyPatch, marker: str, null_reason: str | None, stop: str | None
) -> None:
    with tried(stand, monkeypatch) as t:
        reply = t.judge.complete(request(marker), timeout=5)
    verdict = parse_verdict(
        RUBRIC, text=reply.text, tool_input=reply.tool_input, stop_reason=reply.stop_reason
    )
    assert verdict.null_reason is not None  # never a score made up from it
    if null_reason is not None:
        assert verdict.null_reason == null_reason
    if stop is not None:
        assert reply.stop_reason == stop


def test_judgeqs_loop_retries_a_failing_call_and_counts_the_attempts(
    stand: Stand, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The SDK makes one attempt; judgeq's retry loop owns retries and the deadline."""
    clock = [0.0]
    with tried(stand, monkeypatch) as t:
        outcome = call_with_retries(
            t.judge,
            request("[[fake:500*2]]"),
            RetryPolicy(timeout=5, deadline=60, base_delay=0.01, max_delay=0.01),
            clock=lambda: clock[0],
            sleep=lambda s: clock.__setitem__(0, clock[0] + s),
            rng=random.Random(0),
        )
    assert outcome.reply is not None and outcome.attempts == 3 and len(outcome.errors) == 2


def test_the_preflight_proves_the_key_and_the_model(stand: Stand, monkeypatch: pytest.MonkeyPatch) -> None:
    with tried(stand, monkeypatch) as t:
        t.judge.check(timeout=5)
        assert t.judge.can_check
    with tried(stand, monkeypatch, key="sk-wrong-key") as t, pytest.raises(JudgeError) as refused:
        t.judge.check(timeout=5)
    assert refused.value.reason == "auth_error" and "sk-wrong-key" not in str(refused.value)


def test_provenance_and_the_cache_name_the_server_never_the_key(
    stand: Stand, monkeypatch: pytest.MonkeyPatch
) -> None:
    with tried(stand, monkeypatch) as t:
        reply = t.judge.complete(request(), timeout=5)
        host = t.url.split("://")[1]
        said = provenance(t.judge, reply)
        assert said.split()[:2] == [t.judge.provider, host] and stand.model in said
        assert host in t.judge.cache_identity and t.judge.cache_identity.startswith(t.judge.provider + ":")
        seen = [said, t.judge.cache_identity, repr(t.judge), str(t.judge.endpoint), str(vars(t.judge))]
    assert all(SECRET not in text for text in seen[:4])
    with tried(stand, monkeypatch) as other:  # another server: another identity in the reply cache
        assert other.judge.cache_identity != t.judge.cache_identity


def test_no_secret_reaches_the_logs_even_at_debug(
    stand: Stand, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Every logger (the SDK's, its HTTP client's, judgeq's) at DEBUG, through an answer, a
    refused key and a rate limit: the key is in none of it. (Redis, task messages, reports and
    the CLI: tests/cli/test_no_secret_printed.py, through a whole run.)"""
    caplog.set_level(logging.DEBUG)
    with tried(stand, monkeypatch) as t:
        t.judge.complete(request(), timeout=5)
        for marker in ("[[fake:401]]", "[[fake:429,retry_after=2]]"):
            with pytest.raises(JudgeError):
                t.judge.complete(request(marker), timeout=5)
    assert caplog.records  # (the SDKs log their requests at DEBUG: something was read)
    assert SECRET not in caplog.text
    assert all(SECRET not in repr(r.args) for r in caplog.records)


def _where(fact: Callable[[Any], bool]) -> list[Any]:
    """The rows whose provider has ``fact`` (a case that is not every provider's)."""
    return [
        pytest.param(s, id=i)
        for s, i in zip(PROVIDERS, IDS, strict=True)
        if fact(parse_judge_spec(s.spec.format(url="http://127.0.0.1:9")).api)
    ]


@pytest.mark.parametrize("stand", _where(lambda api: api.served_by_key))
def test_a_provider_without_a_key_says_so_before_any_call(
    stand: Stand, monkeypatch: pytest.MonkeyPatch
) -> None:
    """(A provider a key alone serves; the clouds' missing set-up: tests/core/test_cloud_claude.py;
    an OpenAI-compatible server may need no key.)"""
    spec = parse_judge_spec(stand.spec.format(url="http://127.0.0.1:9"))
    for name in ENV:
        monkeypatch.delenv(name, raising=False)
    assert not spec.api.has_credentials(load_settings())
    judge = spec.api.build(spec.model, JudgeSetup())
    assert not judge.has_credentials
    with pytest.raises(JudgeError) as caught:
        judge.complete(request(), timeout=5)
    assert caught.value.reason == "auth_error" and spec.api.key_variable in str(caught.value)


@pytest.mark.parametrize("stand", PROVIDERS, ids=IDS)
def test_a_judge_takes_batches_exactly_when_its_provider_has_a_batch_api(
    stand: Stand, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the batch lane asks (``as_batch_judge()``), not the batch methods a class inherits: a
    cloud's Claude and an OpenAI-compatible server extend adapters that have them."""
    with tried(stand, monkeypatch) as t:
        api = parse_judge_spec(stand.spec.format(url=t.url)).api
        assert (t.judge.as_batch_judge() is None) == (api.batch_api is None)
        if t.judge.as_batch_judge() is not None:
            assert t.judge.as_batch_judge() is t.judge


@pytest.mark.parametrize("stand", _where(lambda api: api.batch_api is not None))
def test_a_batch_api_where_offered_answers_each_request_by_its_id(
    stand: Stand, monkeypatch: pytest.MonkeyPatch
) -> None:
    """(A provider without one: --batch-api refuses it, tests/core/test_openai_judge.py.)"""
    from judgeq.judges.batches import BatchJudge

    with tried(stand, monkeypatch) as t:
        judge = t.judge
        assert isinstance(judge, BatchJudge)
        created = judge.batch_create(
            [
                ("j0", judge.batch_params(request("[[fake:score=7]]"))),
                ("j1", judge.batch_params(request("[[fake:500]]"))),
            ]
        )
        info = judge.batch_retrieve(created.id)
        for _ in range(200):
            if info.status == "ended":
                break
            time.sleep(0.05)
            info = judge.batch_retrieve(created.id)
        items = {i.custom_id: i for i in judge.batch_results(created.id)}
    assert info.status == "ended" and set(items) == {"j0", "j1"}
    reply = items["j0"].reply
    assert reply is not None
    verdict = parse_verdict(
        RUBRIC, text=reply.text, tool_input=reply.tool_input, stop_reason=reply.stop_reason
    )
    assert set(verdict.scores.values()) == {7}
    assert items["j1"].error is not None and items["j1"].error.reason == "api_error"


def test_the_limits_a_server_states_reach_the_budget(stand: Stand, monkeypatch: pytest.MonkeyPatch) -> None:
    """The providers whose servers state their limits in headers (:attr:`Provider.limit_headers`:
    Anthropic's ``anthropic-ratelimit-*``, OpenAI's ``x-ratelimit-*``) teach the shared budget
    the server's limit; those that state none (Gemini; Claude on Bedrock and Vertex AI, whose
    quotas are the clouds') leave the budget to learn from 429s (the adaptive mode)."""
    with tried(stand, monkeypatch) as t:
        reply = t.judge.complete(request(), timeout=5)
        states = parse_judge_spec(stand.spec.format(url=t.url)).api.limit_headers
    assert server_limits(reply.headers) == ({"requests": RPM} if states else {})
    assert all(name.startswith((*states, "retry-after")) for name in reply.headers)

"""The fake's Message Batches API, exercised through the real ``anthropic`` SDK.

No test sleeps a fixed time: batches are polled with ``retrieve`` until they end, with a generous
deadline, so a slow machine only makes the tests slower."""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import anthropic
import pytest
from anthropic.types.messages import (
    MessageBatch,
    MessageBatchCanceledResult,
    MessageBatchErroredResult,
    MessageBatchExpiredResult,
    MessageBatchIndividualResponse,
    MessageBatchSucceededResult,
)

from judgeq.testing.fake_anthropic import GARBAGE_TEXT, FakeMessagesAPI, parse_directives

MODEL = "claude-haiku-4-5"
REPO_ROOT = Path(__file__).resolve().parents[1]
DEADLINE = 30.0  # seconds a batch may take to end; it normally takes batch_latency
LONG = 600.0  # a batch_latency no test waits for: such a batch ends only when canceled

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "reasoning": {"type": "string"},
        "score": {"type": "integer", "description": "integer from 1 to 5"},
    },
    "required": ["reasoning", "score"],
    "additionalProperties": False,
}


@pytest.fixture(scope="module")
def _server() -> Iterator[FakeMessagesAPI]:
    with FakeMessagesAPI(batch_latency=0.05) as server:
        yield server


@pytest.fixture(scope="module")
def _client(_server: FakeMessagesAPI) -> Iterator[anthropic.Anthropic]:
    with anthropic.Anthropic(api_key="test-key", base_url=_server.base_url, max_retries=0) as c:
        yield c


@pytest.fixture
def fake(_server: FakeMessagesAPI) -> Iterator[FakeMessagesAPI]:
    _server.reset()
    yield _server
    _server.batch_latency, _server.seed = 0.05, ""
    _server.reset()  # lets the threads of long batches go


@pytest.fixture
def client(fake: FakeMessagesAPI, _client: anthropic.Anthropic) -> anthropic.Anthropic:
    return _client


def params(text: str, **kwargs: Any) -> dict[str, Any]:
    return {"model": MODEL, "max_tokens": 512, "messages": [{"role": "user", "content": text}], **kwargs}


def wait_ended(client: anthropic.Anthropic, batch_id: str, deadline: float = DEADLINE) -> MessageBatch:
    give_up = time.monotonic() + deadline
    while True:
        batch = client.messages.batches.retrieve(batch_id)
        if batch.processing_status == "ended":
            return batch
        if time.monotonic() > give_up:
            pytest.fail(f"batch {batch_id} still {batch.processing_status!r} after {deadline} s")
        time.sleep(0.01)


def results_by_id(client: anthropic.Anthropic, batch_id: str) -> dict[str, Any]:
    lines = list(client.messages.batches.results(batch_id))
    assert all(isinstance(line, MessageBatchIndividualResponse) for line in lines)
    counts = Counter(line.custom_id for line in lines)
    assert all(n == 1 for n in counts.values()), counts  # every custom_id exactly once
    return {line.custom_id: line.result for line in lines}


def http(fake: FakeMessagesAPI, method: str, path: str, body: Any = None, key: str = "test-key") -> Any:
    """(status, content type, body bytes) of a raw request, for what the SDK will not send."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(f"{fake.base_url}{path}", data=data, method=method)
    request.add_header("x-api-key", key)
    request.add_header("content-type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=30) as resp:
            return resp.status, resp.headers["content-type"], resp.read()
    except urllib.error.HTTPError as exc:
        with exc:
            return exc.code, exc.headers["content-type"], exc.read()


# ----------------------------------------------------------------------------- processing


def test_mixed_batch_ends_with_the_right_counts_and_results(
    fake: FakeMessagesAPI, client: anthropic.Anthropic
) -> None:
    schema = {"format": {"type": "json_schema", "schema": SCHEMA}}
    requests: list[Any] = [
        {"custom_id": "plain", "params": params("grade this answer")},
        {"custom_id": "schema", "params": params("grade [[fake:score=4]]", output_config=schema)},
        {"custom_id": "garbage", "params": params("grade [[fake:garbage]]")},
        {"custom_id": "rate-429", "params": params("grade [[fake:429]]")},
        {"custom_id": "server_500", "params": params("grade [[fake:500]]")},
        {"custom_id": "overloaded", "params": params("grade [[fake:529]]")},
        {"custom_id": "expire", "params": params("grade [[fake:batch=expire,500]]")},
        {"custom_id": "temperature", "params": params("grade", temperature=0.2)},
        {
            "custom_id": "no-max-tokens",
            "params": {"model": MODEL, "messages": [{"role": "user", "content": "x"}]},
        },
        {"custom_id": "typo", "params": params("grade [[fake:bogus]]")},
    ]
    created = client.messages.batches.create(requests=requests)
    assert created.id.startswith("msgbatch_") and created.type == "message_batch"
    assert created.processing_status == "in_progress"
    assert created.request_counts.processing == len(requests)
    assert created.ended_at is None and created.results_url is None and created.archived_at is None
    assert created.cancel_initiated_at is None
    assert created.expires_at - created.created_at == timedelta(hours=24)

    batch = wait_ended(client, created.id)
    counts = batch.request_counts
    assert (counts.processing, counts.succeeded, counts.errored, counts.canceled, counts.expired) == (
        0,
        3,
        6,
        0,
        1,
    )
    assert batch.ended_at is not None and batch.ended_at >= batch.created_at
    assert batch.results_url == f"{fake.base_url}/v1/messages/batches/{batch.id}/results"

    results = results_by_id(client, batch.id)
    assert set(results) == {r["custom_id"] for r in requests}
    succeeded = {cid for cid, r in results.items() if isinstance(r, MessageBatchSucceededResult)}
    assert succeeded == {"plain", "schema", "garbage"}
    assert json.loads(results["plain"].message.content[0].text)["score"] >= 1
    assert json.loads(results["schema"].message.content[0].text)["score"] == 4
    assert results["garbage"].message.content[0].text == GARBAGE_TEXT
    assert results["plain"].type == "succeeded" and results["plain"].message.model == MODEL

    assert isinstance(results["expire"], MessageBatchExpiredResult)
    errors = {
        cid: r.error.error.type for cid, r in results.items() if isinstance(r, MessageBatchErroredResult)
    }
    assert errors == {
        "rate-429": "rate_limit_error",
        "server_500": "api_error",
        "overloaded": "overloaded_error",
        "temperature": "invalid_request_error",
        "no-max-tokens": "invalid_request_error",
        "typo": "invalid_request_error",
    }
    assert results["temperature"].error.type == "error"
    assert "temperature" in results["temperature"].error.error.message
    assert "max_tokens" in results["no-max-tokens"].error.error.message

    # batch requests bypass /v1/messages' counters, and are counted on their own
    assert fake.request_count == 0 and fake.by_status == {} and fake.requests == []
    assert fake.batch_request_count == len(requests)


def test_results_are_jsonl_in_a_shuffled_order(client: anthropic.Anthropic) -> None:
    ids = [f"req-{i:02d}" for i in range(12)]
    batch = client.messages.batches.create(requests=[{"custom_id": i, "params": params(i)} for i in ids])
    wait_ended(client, batch.id)
    decoder = client.messages.batches.results(batch.id)
    assert decoder.http_response.headers["content-type"] == "application/x-jsonl"
    order = [line.custom_id for line in decoder]
    assert sorted(order) == ids and order != ids
    again = [line.custom_id for line in client.messages.batches.results(batch.id)]
    assert again == order  # deterministic


def test_two_requests_never_come_back_in_request_order(client: anthropic.Anthropic) -> None:
    for first, second in (("a", "b"), ("b", "a")):
        batch = client.messages.batches.create(
            requests=[
                {"custom_id": first, "params": params("1")},
                {"custom_id": second, "params": params("2")},
            ]
        )
        wait_ended(client, batch.id)
        assert [line.custom_id for line in client.messages.batches.results(batch.id)] == [second, first]


def test_batch_answers_equal_the_messages_api(fake: FakeMessagesAPI, client: anthropic.Anthropic) -> None:
    texts = ["first answer to grade", "second [[fake:verdict=fail]]", "third [[fake:truncated]]"]
    schema = {
        "format": {
            "type": "json_schema",
            "schema": {
                **SCHEMA,
                "properties": {**SCHEMA["properties"], "verdict": {"enum": ["pass", "fail"]}},
            },
        }
    }
    batch = client.messages.batches.create(
        requests=[
            {"custom_id": f"r{i}", "params": params(t, output_config=schema)} for i, t in enumerate(texts)
        ]
    )
    wait_ended(client, batch.id)
    results = results_by_id(client, batch.id)
    for i, text in enumerate(texts):
        direct = client.messages.create(**params(text, output_config=schema))
        batched = results[f"r{i}"].message
        assert batched.content[0].text == direct.content[0].text
        assert batched.stop_reason == direct.stop_reason
        assert batched.usage.input_tokens > 0 and batched.usage.output_tokens == direct.usage.output_tokens
    assert fake.request_count == len(texts)


def test_transient_fault_counts_attempts_like_the_messages_api(client: anthropic.Anthropic) -> None:
    request = [{"custom_id": "flaky", "params": params("flaky [[fake:500*1]]")}]
    first = client.messages.batches.create(requests=request)
    wait_ended(client, first.id)
    assert results_by_id(client, first.id)["flaky"].type == "errored"
    second = client.messages.batches.create(requests=request)
    wait_ended(client, second.id)
    assert results_by_id(client, second.id)["flaky"].type == "succeeded"


def test_rate_limits_do_not_apply_to_batches() -> None:
    with FakeMessagesAPI(rpm=1, itpm=10, otpm=10, batch_latency=0.01) as fake:
        c = anthropic.Anthropic(api_key="test-key", base_url=fake.base_url, max_retries=0)
        batch = c.messages.batches.create(
            requests=[{"custom_id": f"r{i}", "params": params("x" * 400)} for i in range(5)]
        )
        assert wait_ended(c, batch.id).request_counts.succeeded == 5
        assert fake.accepted_times() == [] and fake.batch_request_count == 5
        c.messages.create(**params("hi"))  # the buckets were left full
        with pytest.raises(anthropic.RateLimitError):
            c.messages.create(**params("hi"))


def test_slow_and_latency_do_not_delay_a_batch(fake: FakeMessagesAPI, client: anthropic.Anthropic) -> None:
    fake.latency, fake.timeout_sleep = 5.0, 5.0
    try:
        batch = client.messages.batches.create(
            requests=[{"custom_id": "s", "params": params("[[fake:slow]]")}]
        )
        wait_ended(client, batch.id, deadline=4.0)
        assert results_by_id(client, batch.id)["s"].type == "succeeded"
    finally:
        fake.latency, fake.timeout_sleep = 0.0, 5.0


def test_batch_directive_is_ignored_by_the_messages_api(client: anthropic.Anthropic) -> None:
    assert parse_directives("[[fake:batch=expire]]").batch == "expire"
    message = client.messages.create(**params("x [[fake:batch=expire]]"))
    assert json.loads(message.content[0].text)["score"] >= 1
    with pytest.raises(anthropic.BadRequestError):
        client.messages.create(**params("x [[fake:batch=explode]]"))


# ----------------------------------------------------------------------------- before the end, cancel


def test_results_before_the_end_are_an_error(fake: FakeMessagesAPI, client: anthropic.Anthropic) -> None:
    fake.batch_latency = LONG
    batch = client.messages.batches.create(requests=[{"custom_id": "a", "params": params("x")}])
    assert client.messages.batches.retrieve(batch.id).processing_status == "in_progress"
    with pytest.raises(anthropic.AnthropicError, match="results_url"):
        client.messages.batches.results(batch.id)  # the SDK checks results_url first
    status, _, body = http(fake, "GET", f"/v1/messages/batches/{batch.id}/results")
    assert status == 400 and json.loads(body)["error"]["type"] == "invalid_request_error"
    with pytest.raises(anthropic.BadRequestError):
        client.messages.batches.delete(batch.id)  # only an ended batch may be deleted


def test_cancel_mid_processing(fake: FakeMessagesAPI, client: anthropic.Anthropic) -> None:
    fake.batch_latency = LONG
    ids = ["one", "two", "three"]
    batch = client.messages.batches.create(requests=[{"custom_id": i, "params": params(i)} for i in ids])
    canceling = client.messages.batches.cancel(batch.id)
    assert canceling.processing_status == "canceling"
    assert canceling.cancel_initiated_at is not None and canceling.ended_at is None
    assert canceling.request_counts.processing == 3

    ended = wait_ended(client, batch.id)  # well before LONG: the cancel ends it
    assert ended.request_counts.canceled == 3 and ended.request_counts.processing == 0
    assert ended.cancel_initiated_at == canceling.cancel_initiated_at
    results = results_by_id(client, batch.id)
    assert set(results) == set(ids)
    assert all(isinstance(r, MessageBatchCanceledResult) and r.type == "canceled" for r in results.values())

    with pytest.raises(anthropic.BadRequestError, match="already"):
        client.messages.batches.cancel(batch.id)  # an ended batch cannot be canceled
    deleted = client.messages.batches.delete(batch.id)
    assert (deleted.id, deleted.type) == (batch.id, "message_batch_deleted")
    with pytest.raises(anthropic.NotFoundError):
        client.messages.batches.retrieve(batch.id)


# ----------------------------------------------------------------------------- errors


def test_unknown_batch_id_is_404(client: anthropic.Anthropic) -> None:
    for call in (
        client.messages.batches.retrieve,
        client.messages.batches.cancel,
        client.messages.batches.results,
        client.messages.batches.delete,
    ):
        with pytest.raises(anthropic.NotFoundError) as info:
            call("msgbatch_nope")
        assert info.value.body["error"]["type"] == "not_found_error"  # type: ignore[index]


def test_wrong_key_is_401(fake: FakeMessagesAPI, client: anthropic.Anthropic) -> None:
    batch = client.messages.batches.create(requests=[{"custom_id": "a", "params": params("x")}])
    with anthropic.Anthropic(api_key="wrong", base_url=fake.base_url, max_retries=0) as bad:
        with pytest.raises(anthropic.AuthenticationError):
            bad.messages.batches.create(requests=[{"custom_id": "b", "params": params("x")}])
        for call in (bad.messages.batches.retrieve, bad.messages.batches.cancel, bad.messages.batches.delete):
            with pytest.raises(anthropic.AuthenticationError):
                call(batch.id)
        with pytest.raises(anthropic.AuthenticationError):
            bad.messages.batches.list()
    wait_ended(client, batch.id)
    status, _, _ = http(fake, "GET", f"/v1/messages/batches/{batch.id}/results", key="wrong")
    assert status == 401
    assert fake.batch_request_count == 1


@pytest.mark.parametrize(
    "requests",
    [
        [],
        [{"custom_id": "same", "params": params("a")}, {"custom_id": "same", "params": params("b")}],
        [{"custom_id": "x" * 65, "params": params("a")}],
        [{"custom_id": "", "params": params("a")}],
        [{"custom_id": "has space", "params": params("a")}],
        [{"custom_id": "trailing-newline\n", "params": params("a")}],
        [{"custom_id": "no-params"}],
        [{"params": params("a")}],
    ],
    ids=["empty", "duplicate", "too-long", "blank", "space", "newline", "no-params", "no-custom-id"],
)
def test_create_rejects_a_malformed_batch(
    fake: FakeMessagesAPI, client: anthropic.Anthropic, requests: list[Any]
) -> None:
    with pytest.raises(anthropic.BadRequestError) as info:
        client.messages.batches.create(requests=requests)
    assert info.value.body["error"]["type"] == "invalid_request_error"  # type: ignore[index]
    assert fake.batches() == {} and fake.batch_request_count == 0


def test_create_limits(fake: FakeMessagesAPI) -> None:
    tiny = {"model": MODEL, "max_tokens": 1, "messages": [{"role": "user", "content": "x"}]}
    too_many = {"requests": [{"custom_id": f"r{i}", "params": tiny} for i in range(100_001)]}
    status, _, body = http(fake, "POST", "/v1/messages/batches", too_many)
    assert status == 400 and "100000" in json.loads(body)["error"]["message"]
    status, _, body = http(fake, "POST", "/v1/messages/batches", {"nope": []})
    assert status == 400
    longest = {"requests": [{"custom_id": "a" * 64, "params": tiny}]}
    status, _, body = http(fake, "POST", "/v1/messages/batches", longest)
    assert status == 200 and json.loads(body)["request_counts"]["processing"] == 1


# ----------------------------------------------------------------------------- list, admin, CLI


def test_list_is_paginated_newest_first(client: anthropic.Anthropic) -> None:
    ids = [
        client.messages.batches.create(requests=[{"custom_id": "a", "params": params(str(i))}]).id
        for i in range(5)
    ]
    newest_first = ids[::-1]
    page = client.messages.batches.list(limit=2)
    assert [b.id for b in page.data] == newest_first[:2]
    assert page.has_more and page.first_id == newest_first[0] and page.last_id == newest_first[1]
    assert [b.id for b in client.messages.batches.list(limit=2)] == newest_first  # auto-paging
    before = client.messages.batches.list(before_id=newest_first[3], limit=2)
    assert [b.id for b in before.data] == newest_first[1:3] and before.has_more
    last = client.messages.batches.list(after_id=newest_first[2], limit=5)
    assert [b.id for b in last.data] == newest_first[3:] and not last.has_more
    with pytest.raises(anthropic.BadRequestError):
        client.messages.batches.list(limit=1001)


def test_stats_batches_and_reset(fake: FakeMessagesAPI, client: anthropic.Anthropic) -> None:
    done = client.messages.batches.create(
        requests=[{"custom_id": f"r{i}", "params": params(str(i))} for i in range(3)]
    )
    wait_ended(client, done.id)
    fake.batch_latency = LONG
    pending = client.messages.batches.create(requests=[{"custom_id": "p", "params": params("p")}])
    assert fake.batches() == {done.id: "ended", pending.id: "in_progress"}
    with urllib.request.urlopen(f"{fake.base_url}/_fake/stats", timeout=5) as resp:
        stats = json.loads(resp.read())
    assert stats["batch_request_count"] == 4 and stats["request_count"] == 0
    assert stats["batches"] == {"in_progress": 1, "canceling": 0, "ended": 1}
    with urllib.request.urlopen(f"{fake.base_url}/_fake/batches", timeout=5) as resp:
        assert json.loads(resp.read()) == {"batches": fake.batches()}

    fake.reset()
    assert fake.batches() == {} and fake.batch_request_count == 0
    assert fake.stats()["batches"] == {"in_progress": 0, "canceling": 0, "ended": 0}
    with pytest.raises(anthropic.NotFoundError):
        client.messages.batches.retrieve(done.id)


def test_config_endpoint_sets_batch_latency(fake: FakeMessagesAPI) -> None:
    request = urllib.request.Request(
        f"{fake.base_url}/_fake/config", data=json.dumps({"batch_latency": 1.5}).encode(), method="POST"
    )
    with urllib.request.urlopen(request, timeout=5) as resp:
        assert json.loads(resp.read())["batch_latency"] == 1.5
    assert fake.batch_latency == 1.5


def test_subprocess_batch_latency_flag() -> None:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(REPO_ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    command = [sys.executable, "-m", "judgeq.testing.fake_anthropic", "--port", "0", "--batch-latency", "0.3"]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        assert proc.stdout is not None
        ready, _, _ = select.select([proc.stdout], [], [], 10)
        assert ready, "no READY line within 10 s"
        base_url = proc.stdout.readline().strip().split(" ", 1)[1]
        with anthropic.Anthropic(api_key="test-key", base_url=base_url, max_retries=0) as c:
            started = time.monotonic()
            batch = c.messages.batches.create(requests=[{"custom_id": "a", "params": params("x")}])
            ended = wait_ended(c, batch.id)
            assert time.monotonic() - started >= 0.3
            assert ended.results_url == f"{base_url}/v1/messages/batches/{batch.id}/results"
            assert results_by_id(c, batch.id)["a"].type == "succeeded"
    finally:
        proc.terminate()
        assert proc.wait(timeout=5) == 0
        assert proc.stderr is not None and proc.stdout is not None
        assert proc.stderr.read() == ""
        proc.stdout.close()
        proc.stderr.close()

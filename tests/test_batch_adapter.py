"""The Anthropic adapter's Message Batches methods (judgeq.judges.batches.BatchJudge), through the real SDK
against the fake API: what each kind of result becomes, and the errors of the batch endpoints."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

import judgeq
from judgeq.judges.anthropic import AnthropicJudge
from judgeq.judges.batches import BatchJudge
from judgeq.testing.fake_anthropic import FakeMessagesAPI

MODEL = "claude-haiku-4-5"
SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"reasoning": {"type": "string"}, "score": {"type": "integer", "description": "1 to 10"}},
    "required": ["reasoning", "score"],
    "additionalProperties": False,
}


@pytest.fixture
def fake() -> Iterator[FakeMessagesAPI]:
    with FakeMessagesAPI(batch_latency=0.05) as server:
        yield server


def params(text: str) -> dict[str, Any]:
    return {
        "model": MODEL,
        "max_tokens": 256,
        "messages": [{"role": "user", "content": text}],
        "output_config": {"format": {"type": "json_schema", "schema": SCHEMA}},
    }


def ended(judge: AnthropicJudge, batch_id: str) -> judgeq.JudgeError | None:
    deadline = time.monotonic() + 60
    while judge.batch_retrieve(batch_id).status != "ended":
        assert time.monotonic() < deadline, "the fake's batch never ended"
        time.sleep(0.02)
    return None


def test_every_kind_of_batch_result(fake: FakeMessagesAPI) -> None:
    judge = AnthropicJudge(MODEL, api_key="test-key", base_url=fake.base_url)
    assert isinstance(judge, BatchJudge)
    info = judge.batch_create(
        [
            ("j0", params("grade this")),
            ("j1", params("grade this [[fake:500]]")),
            ("j2", params("grade this [[fake:batch=expire]]")),
            ("j3", params("grade this [[fake:garbage]]")),
        ]
    )
    assert info.status == "in_progress" and info.counts["processing"] == 4
    ended(judge, info.id)
    assert judge.batch_retrieve(info.id).counts == {
        "processing": 0,
        "succeeded": 2,
        "errored": 1,
        "canceled": 0,
        "expired": 1,
    }
    items = {item.custom_id: item for item in judge.batch_results(info.id)}
    assert set(items) == {"j0", "j1", "j2", "j3"}
    assert items["j0"].reply is not None and '"score"' in items["j0"].reply.text
    assert items["j0"].reply.input_tokens > 0 and items["j0"].error is None
    assert isinstance(items["j1"].error, judgeq.JudgeAPIError) and "api_error" in str(items["j1"].error)
    assert isinstance(items["j2"].error, judgeq.JudgeTimeout) and "expired" in str(items["j2"].error)
    assert items["j3"].reply is not None, "a garbage reply is a reply: the parser makes it a parse_error"
    assert fake.request_count == 0, "no live call"


def test_a_canceled_batch_gives_canceled_results(fake: FakeMessagesAPI) -> None:
    fake.batch_latency = 600
    judge = AnthropicJudge(MODEL, api_key="test-key", base_url=fake.base_url)
    info = judge.batch_create([("j0", params("a")), ("j1", params("b"))])
    judge.batch_cancel(info.id)
    ended(judge, info.id)
    errors = [item.error for item in judge.batch_results(info.id)]
    assert all(isinstance(e, judgeq.JudgeCanceled) and e.reason == "canceled" for e in errors)
    assert len(errors) == 2


def test_batch_endpoint_errors_are_judgeq_errors(fake: FakeMessagesAPI) -> None:
    judge = AnthropicJudge(MODEL, api_key="wrong", base_url=fake.base_url)
    with pytest.raises(judgeq.JudgeAuthError):
        judge.batch_create([("j0", params("a"))])
    good = AnthropicJudge(MODEL, api_key="test-key", base_url=fake.base_url)
    with pytest.raises(judgeq.JudgeInvalidRequest):
        good.batch_create([("bad id!", params("a"))])
    with pytest.raises(judgeq.JudgeModelNotFound):
        good.batch_retrieve("msgbatch_nope")
    fake.batch_latency = 600
    info = good.batch_create([("j0", params("a"))])
    with pytest.raises(judgeq.JudgeError):
        list(good.batch_results(info.id))  # not ended: no results yet
    good.batch_cancel(info.id)

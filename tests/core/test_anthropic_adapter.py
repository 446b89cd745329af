"""The Anthropic adapter: SDK answers and errors translated into judgeq's types."""

from __future__ import annotations

import json

import pytest

from judgeq import (
    JudgeAPIError,
    JudgeAuthError,
    JudgeError,
    JudgeInvalidRequest,
    JudgeOverloaded,
    JudgeRateLimited,
    JudgeTimeout,
    load_rubric,
)
from judgeq.grading.request import render_request
from judgeq.judges.anthropic import AnthropicJudge
from judgeq.testing.mock_messages import error_json, message_json, mock_client

REQ = render_request(load_rubric("quality"), input="q", output="a")


def judge_answering(status: int, body: dict, headers: dict[str, str] | None = None) -> AnthropicJudge:
    return AnthropicJudge("m", client=mock_client(lambda _: (status, body, headers or {})))


@pytest.mark.parametrize(
    ("status", "kind", "expected", "retry_after"),
    [
        (429, "rate_limit_error", JudgeRateLimited, 1.5),
        (529, "overloaded_error", JudgeOverloaded, 2.0),
        (500, "api_error", JudgeAPIError, None),
        (503, "api_error", JudgeAPIError, None),
        (401, "authentication_error", JudgeAuthError, None),
        (403, "permission_error", JudgeAuthError, None),
        (400, "invalid_request_error", JudgeInvalidRequest, None),
        (404, "not_found_error", JudgeInvalidRequest, None),
        (408, "timeout_error", JudgeTimeout, None),
    ],
)
def test_status_errors_are_translated(
    status: int, kind: str, expected: type[JudgeError], retry_after: float | None
) -> None:
    headers = {"retry-after": str(retry_after)} if retry_after else {}
    judge = judge_answering(status, error_json(kind, "nope"), headers)
    with pytest.raises(expected) as info:
        judge.complete(REQ, timeout=5)
    assert info.value.retry_after == retry_after
    assert "nope" in str(info.value)


def test_retry_after_ms_wins() -> None:
    judge = judge_answering(
        429, error_json("rate_limit_error", "x"), {"retry-after-ms": "250", "retry-after": "9"}
    )
    with pytest.raises(JudgeRateLimited) as info:
        judge.complete(REQ, timeout=5)
    assert info.value.retry_after == 0.25


def test_no_key_is_an_auth_error(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ANTHROPIC_CONFIG_DIR", "/nonexistent-judgeq-test")
    judge = AnthropicJudge("m", base_url="http://127.0.0.1:9")
    with pytest.raises(JudgeAuthError, match="no Anthropic API key"):
        judge.complete(REQ, timeout=1)


def test_reply_carries_text_usage_and_tool_input() -> None:
    body = message_json(json.dumps({"score": 7}), input_tokens=11, output_tokens=3)
    body["content"].append({"type": "tool_use", "id": "t1", "name": "grade", "input": {"score": 8}})
    reply = AnthropicJudge("m", client=mock_client(lambda _: body)).complete(REQ, timeout=5)
    assert reply.text == '{"score": 7}' and reply.tool_input == {"score": 8}
    assert (reply.input_tokens, reply.output_tokens, reply.stop_reason) == (11, 3, "end_turn")


def test_connection_failure_is_retryable_api_error() -> None:
    judge = AnthropicJudge("m", api_key="k", base_url="http://127.0.0.1:9")
    with pytest.raises(JudgeAPIError) as info:
        judge.complete(REQ, timeout=2)
    assert info.value.retryable

"""One mapping of HTTP error statuses to null reasons, for every provider (issue 31, point 1):
each provider's SDK exception, as its SDK raises it for a status, becomes the error the table in
judgeq/judges/statuses.py says; where providers differ, the difference is their rules' data."""

from __future__ import annotations

from typing import Any

import anthropic
import httpx2 as httpx
import openai
import pytest

from judgeq.judges import anthropic as anthropic_judge
from judgeq.judges import openai as openai_judge
from judgeq.judges.anthropic import ANTHROPIC_STATUSES
from judgeq.judges.openai import OPENAI_STATUSES
from judgeq.judges.statuses import StatusRules, error_for

# (status, error code, message) -> the null reason every provider gives it
COMMON: dict[tuple[int, str, str], str] = {
    (400, "", "bad field"): "invalid_request",
    (401, "", "no key"): "auth_error",
    (402, "", "pay"): "billing_error",
    (403, "", "forbidden"): "auth_error",
    (404, "", "no such model"): "model_not_found",
    (408, "", "slow"): "timeout",
    (409, "", "conflict"): "api_error",
    (413, "", "too large"): "invalid_request",
    (422, "", "unprocessable"): "invalid_request",
    (429, "", "slow down"): "rate_limited",
    (500, "", "oops"): "api_error",
    (502, "", "bad gateway"): "api_error",
    (504, "", "gateway timeout"): "api_error",
    (529, "", "overloaded"): "overloaded",
}
# where a provider's API says it its own way
DIFFERENT: dict[str, dict[tuple[int, str, str], str]] = {
    "anthropic": {
        (400, "", "Your credit balance is too low"): "billing_error",
        (429, "insufficient_quota", "quota"): "rate_limited",  # not a code Anthropic sends
        (503, "", "unavailable"): "api_error",
    },
    "openai": {
        (400, "", "Your credit balance is too low"): "invalid_request",
        (429, "insufficient_quota", "quota"): "billing_error",
        (503, "", "unavailable"): "overloaded",
    },
}
RULES = {"anthropic": ANTHROPIC_STATUSES, "openai": OPENAI_STATUSES}
CASES = [(p, case, {**COMMON, **DIFFERENT[p]}[case]) for p in RULES for case in {**COMMON, **DIFFERENT[p]}]


def _sdk_error(provider: str, status: int, code: str, message: str) -> Exception:
    """The exception the provider's own SDK raises for an answer with ``status``."""
    request = httpx.Request("POST", "http://127.0.0.1:9/v1/messages")
    body: dict[str, Any] = {"type": "error", "error": {"type": "x", "message": message}}
    if code:
        body["error"]["code"] = code
    response = httpx.Response(status, json=body, request=request, headers={"retry-after": "7"})
    client: Any
    if provider == "anthropic":
        client = anthropic.Anthropic(api_key="k", base_url="http://127.0.0.1:9")
    else:
        client = openai.OpenAI(api_key="k", base_url="http://127.0.0.1:9/v1")
    return client._make_status_error_from_response(response)  # what the SDK raises for it


@pytest.mark.parametrize(("provider", "case", "reason"), CASES, ids=lambda x: str(x))
def test_each_providers_sdk_error_becomes_the_tables_reason(
    provider: str, case: tuple[int, str, str], reason: str
) -> None:
    status, code, message = case
    exc = _sdk_error(provider, status, code, message)
    translate = anthropic_judge.translate_error if provider == "anthropic" else openai_judge.translate_error
    error = translate(exc)
    assert error.reason == reason, (provider, case)
    assert error.reason == error_for(status, message, code=code, rules=RULES[provider]).reason
    retried = reason in ("rate_limited", "overloaded", "api_error")
    assert (error.retry_after == 7.0) is retried, "a retried error carries the server's retry-after"


def test_the_differences_are_data_and_the_default_rules_are_the_common_table() -> None:
    for (status, code, message), reason in COMMON.items():
        assert error_for(status, message, code=code, rules=StatusRules()).reason == reason
        for rules in RULES.values():
            assert error_for(status, message, code=code, rules=rules).reason == reason

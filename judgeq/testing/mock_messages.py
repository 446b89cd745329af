"""In-process Messages API doubles: a real ``anthropic.Anthropic`` client whose transport is
a Python function (no sockets).  For unit tests of the judge adapter and the goldens.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from typing import Any

import anthropic
import httpx2

__all__ = ["Handler", "error_json", "message_json", "mock_client", "verdict_for_schema"]

Handler = Callable[[dict[str, Any]], "dict[str, Any] | tuple[int, dict[str, Any], dict[str, str]]"]


def message_json(
    text: str,
    *,
    model: str = "claude-test",
    stop_reason: str = "end_turn",
    input_tokens: int = 100,
    output_tokens: int = 20,
) -> dict[str, Any]:
    """A Messages API response body with one text block."""
    return {
        "id": f"msg_{uuid.uuid4().hex[:24]}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [{"type": "text", "text": text}] if text else [],
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": {
            "input_tokens": input_tokens,
            "output_tokens": output_tokens,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
        },
    }


def error_json(kind: str, message: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": kind, "message": message}}


def verdict_for_schema(schema: dict[str, Any], score: float | str) -> dict[str, Any]:
    """A verdict object filling ``schema`` (from :func:`judgeq.output_schema`) with ``score``."""
    out: dict[str, Any] = {}
    for name, prop in schema.get("properties", {}).items():
        kind = prop.get("type")
        if name == "verdict":
            out[name] = score
        elif kind == "string" and "enum" in prop:  # a pairwise dimension: A, B or tie
            out[name] = score if score in prop["enum"] else prop["enum"][0]
        elif kind == "object":
            out[name] = {k: score for k in prop.get("properties", {})}
        elif kind in ("integer", "number"):
            out[name] = score
        elif kind == "array":
            out[name] = []
        else:
            out[name] = f"mock {name}"
    return out


def mock_client(handler: Handler, *, api_key: str = "test-key") -> anthropic.Anthropic:
    """An SDK client whose HTTP layer calls ``handler(request_json)``.

    The handler returns a response body (status 200) or ``(status, body, headers)``.
    """

    def transport(request: httpx2.Request) -> httpx2.Response:
        body = json.loads(request.content or b"{}")
        answer = handler(body)
        status, payload, headers = (200, answer, {}) if isinstance(answer, dict) else answer
        return httpx2.Response(status, json=payload, headers=headers)

    return anthropic.Anthropic(
        api_key=api_key,
        base_url="http://judge.invalid",
        max_retries=0,
        http_client=httpx2.Client(transport=httpx2.MockTransport(transport)),
    )

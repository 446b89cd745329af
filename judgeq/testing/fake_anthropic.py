"""A fake Anthropic Messages API server for judgeq's tests and benchmarks.

Point the real ``anthropic`` SDK at it::

    with FakeMessagesAPI(latency=0.05) as fake:
        client = anthropic.Anthropic(api_key="test-key", base_url=fake.base_url)
        msg = client.messages.create(model="claude-haiku-4-5", max_tokens=512, messages=[...])

or run it as a separate process (prints ``READY http://127.0.0.1:PORT`` once serving)::

    python -m judgeq.testing.fake_anthropic --port 0 --latency 0.2 [--api-key K] [--batch-latency S]
        [--rpm N] [--itpm N] [--otpm N] [--limit-model token_bucket|sliding_window|per_second]
        [--no-limit-headers]

Stdlib only. Endpoints:

* ``POST /v1/messages`` -- non-streaming Messages API. Answers JSON conforming to
  ``output_config.format.schema`` when given (``{"score": N, "reasoning": ...}`` otherwise),
  deterministically from ``sha256(seed + text of the last user message)``.
* ``POST /v1/messages/count_tokens`` -- ``{"input_tokens": ceil(len(body) / 4)}``, no latency.
* ``GET /v1/models/MODEL`` -- the model's record (404 when ``models`` is set and lacks it; 401
  with a wrong key; 405 for every model when ``models_api=False``, as a gateway that serves only
  Messages); counted in ``model_checks``, not in ``request_count``.
* Message Batches (same authentication as ``/v1/messages``):

  - ``POST /v1/messages/batches`` -- ``{"requests": [{"custom_id", "params"}]}``: 1 to 100,000
    requests, ``custom_id`` unique and matching ``^[a-zA-Z0-9_-]{1,64}$``, ``params`` an object
    (else 400 for the whole batch). ``params`` themselves are validated later, like the real API
    does: an invalid one ends as an ``errored`` result. Answers the MessageBatch (``in_progress``).
  - ``GET /v1/messages/batches/ID`` (retrieve), ``GET /v1/messages/batches`` (list, newest first,
    ``limit``/``after_id``/``before_id``), ``DELETE /v1/messages/batches/ID`` (ended batches only).
  - ``POST /v1/messages/batches/ID/cancel`` -- an ``in_progress`` batch becomes ``canceling``, then
    ends at once with every request ``canceled`` (unless its processing had already begun: those
    requests are not interruptible and keep their results); a batch that has ended answers 400.
  - ``GET /v1/messages/batches/ID/results`` -- ``application/x-jsonl``, one
    ``{"custom_id", "result"}`` line per request, in an order that differs from the request order
    (deterministic in ``seed`` and the custom_ids); 400 while the batch has not ended. The
    ``results_url`` of an ended batch is built from the Host header of the request that reads it.

  The whole batch is processed ``batch_latency`` seconds (default 0.5) after its creation (or at
  once when the test calls ``finish_batches()``), in a background thread: each request is answered
  exactly as ``POST /v1/messages`` would answer it (same validation and fault directives; a
  4xx/5xx answer becomes an ``errored`` result carrying that error object), except that the per-
  request ``latency``, the ``slow`` sleep and the rate limits do not apply. The directive
  ``[[fake:batch=expire]]`` makes a request ``expired`` (it is ignored by ``/v1/messages``). Batch
  requests are counted in ``batch_request_count`` (when the batch is created), never in
  ``request_count``/``by_status``/``requests``.

* Admin endpoints, no authentication: ``GET /_fake/stats`` (counters, the limits and the limit
  model; ``count_429`` = every 429 of ``/v1/messages``, of which ``rate_limited`` by the rate
  limits and ``injected_429`` by ``[[fake:429]]``), ``GET /_fake/accepted`` (``{"times": [...]}``:
  the ``clock()`` -- by default ``time.monotonic()`` -- of every admitted request),
  ``GET /_fake/batches`` (``{"batches": {id: processing_status}}``), ``POST /_fake/reset``,
  ``POST /_fake/config`` (any of ``{"latency": s, "batch_latency": s, "rpm": N, "itpm": N,
  "otpm": N, "limit_model": "sliding_window", "limit_headers": false}``; giving any of
  rpm/itpm/otpm sets all three, a missing one unlimited; limits start afresh whenever the
  limits or the model are set; answers the stats).

Rate limits (``rpm``, ``itpm``, ``otpm``: per minute; None = unlimited) follow one of the
models of :mod:`judgeq.testing.limits` (written once there, also run by the budget simulator),
``limit_model`` (constructor, ``--limit-model``, ``/_fake/config``):

* ``token_bucket`` (the default), like the real API's: one bucket per limit, full at the limit
  and refilled continuously at limit/60 per second. A request larger than the limit is
  admitted by a full bucket (which it overdraws).
* ``sliding_window``, as gateways (LiteLLM, Kong) enforce: at most N in ANY 60-second interval
  (an amount admitted at t counts until t + 60 s). A refused request waits until the oldest
  admitted amounts slide out far enough to admit it. Output tokens count in the same window,
  from when the answer is made.
* ``per_second``, as providers document ("60 RPM may be enforced as 1 request per second"):
  the same window 1 second wide holding ``max(1, floor(N/60))`` (requests, and tokens alike).
  A single request larger than that (say 300 input tokens under itpm 6000, 100 a second) is
  admitted when its second is otherwise empty (so is an oversized amount in
  ``sliding_window``). Its ``retry-after`` is therefore always ``1``.
* ``fixed_window``, as LiteLLM's proxy counts: at most N per calendar minute, from 0 at each
  minute's start.

In every model a request needs one request, its input tokens (``ceil(len(body) / 4)``) and
its ``max_tokens`` output tokens, reserved when it is admitted and settled to the output
tokens it used when it is answered (none for an injected error), as Anthropic documents its
OTPM limit ("estimated based on max_tokens at the beginning of each request, and adjusted at
the end of the request to reflect the actual number of output tokens used",
https://docs.anthropic.com/en/api/rate-limits). A request that does not fit takes nothing and is answered
429 with ``retry-after`` (whole seconds until it fits, rounded up, at least 1). Every
``/v1/messages`` answer carries
``anthropic-ratelimit-{requests,input-tokens,output-tokens}-{limit,remaining,reset}`` for the
configured limits (a very high limit and remaining when none is): ``limit`` is the per-minute
limit N in every model (what providers document and send, even when they enforce per
second), ``remaining`` what is left in the bucket or current window (for ``per_second``: of
the second's share), ``reset`` (RFC 3339, rounded up to the second) when the bucket is full or
the window empty again. With ``limit_headers=False`` (``--no-limit-headers``) no
``anthropic-ratelimit-*`` header is sent, as gateways do; 429s keep their ``retry-after``.

Like current Claude models, ``/v1/messages`` rejects ``temperature``/``top_p``/``top_k``,
forced tool use (``tool_choice`` type ``tool``/``any``) and assistant prefill with 400.

Fault injection: put ``[[fake:SPEC]]`` in a user message. SPEC is one of ``429``, ``500``,
``529``, ``401``, ``400``, ``slow``, ``garbage``, ``truncated``, ``refusal``, ``empty`` or
``prose=URL-ENCODED-TEXT``, optionally with ``*N`` (transient: only the first N attempts of
this request fail; attempts are counted per sha256 of the last user message) and
``,retry_after=S`` (429/529 only; default ``0.05``; ``0`` allowed). ``429`` is a request refused
for itself: it is answered before the rate limits are consulted, takes nothing from them, is
not an admitted request, and carries its own ``retry-after`` (and the limit headers as they
stand). Modifiers ``score=N`` (every integer or
number field becomes N, even out of range) and ``verdict=V`` (enum fields containing V, and any
string field named ``verdict``, become V) combine with a fault. Comma-separated parts may share
one directive (``[[fake:score=3,verdict=fail]]``); the first fault found wins. ``batch=expire``
(Message Batches only, see above) combines with anything and wins over a fault. An unknown SPEC
is answered with 400 so typos are loud.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import math
import re
import socket
import socketserver
import sys
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any
from urllib.parse import parse_qs, unquote

from judgeq.testing.limits import LIMIT_MODELS, Limiter, make_limit
from judgeq.testing.serving import serve_until_signalled

__all__ = [
    "DEFAULT_LIMIT_MODEL",
    "DEFAULT_RETRY_AFTER",
    "LIMIT_MODELS",
    "DirectiveError",
    "Directives",
    "FakeMessagesAPI",
    "generate_from_schema",
    "main",
    "parse_directives",
]

DEFAULT_RETRY_AFTER = "0.05"
MAX_RECORDED_REQUESTS = 10_000
MAX_BATCH_REQUESTS = 100_000
MAX_BATCH_BYTES = 256 * 1024 * 1024
DEFAULT_BATCH_LATENCY = 0.5
BATCH_LIFETIME = timedelta(hours=24)

_DIRECTIVE_RE = re.compile(r"\[\[fake:(.*?)\]\]", re.DOTALL)
_NUM = r"-?\d+(?:\.\d+)?"
_RANGE_RE = re.compile(rf"from\s+({_NUM})\s+to\s+({_NUM})", re.IGNORECASE)
# ``anthropic.lib._parse._transform.transform_schema`` moves unsupported keywords into the
# description as ``{minimum: 1, maximum: 10}``; honour that form too.
_MIN_RE = re.compile(rf"\bminimum:\s*({_NUM})")
_MAX_RE = re.compile(rf"\bmaximum:\s*({_NUM})")
_CUSTOM_ID_RE = re.compile(r"[a-zA-Z0-9_-]{1,64}")
_BATCH_PATH_RE = re.compile(r"/v1/messages/batches/([^/]+)(/results|/cancel)?")
_BATCH_STATUSES = ("in_progress", "canceling", "ended")

_CLOUD_PATHS = re.compile(
    r"/model/(?P<bedrock>[^/]+)/invoke"
    r"|/v1/projects/[^/]+/locations/[^/]+/publishers/anthropic/models/(?P<vertex>[^/:]+):rawPredict"
)
"""Where Bedrock and Vertex AI take a Messages request (the SDK's own clients send them so)."""
_STATUS_FAULTS = {"400": 400, "401": 401, "429": 429, "500": 500, "529": 529}
_BODY_FAULTS = frozenset({"slow", "garbage", "truncated", "refusal", "empty"})
_SAMPLING_FIELDS = ("temperature", "top_p", "top_k")
_SENTENCE_FIELDS = frozenset(
    {"reasoning", "notes", "rationale", "explanation", "justification", "feedback", "comments"}
)

_ERROR_DEFAULTS: dict[int, tuple[str, str]] = {
    400: ("invalid_request_error", "fake: injected invalid request"),
    401: ("authentication_error", "invalid x-api-key"),
    404: ("not_found_error", "Not found"),
    413: ("request_too_large", "Request exceeds the maximum allowed number of bytes."),
    429: (
        "rate_limit_error",
        "This request would exceed the rate limit for your organization (fake). "
        "Please retry after the time given in the retry-after header.",
    ),
    500: ("api_error", "Internal server error"),
    529: ("overloaded_error", "Overloaded"),
}

GARBAGE_TEXT = "I think this is pretty good overall!!"
TRUNCATED_TEXT = '{"reasoning": "The answer is", "sco'
REFUSAL_TEXT = "I can't help with evaluating this content."

_SENTENCES = (
    "The response answers the question directly and is mostly accurate, with minor omissions.",
    "The response is relevant and clearly written, though some supporting detail is missing.",
    "The response covers the key points but includes one questionable claim.",
    "The response is partially correct; it misses an important aspect of the question.",
)


# --------------------------------------------------------------------------- directives


_REQUEST_FIELDS = frozenset(
    {
        "model", "messages", "max_tokens", "system", "metadata", "stop_sequences", "stream",
        "temperature", "top_p", "top_k", "tools", "tool_choice", "thinking", "output_config",
        "service_tier", "container", "mcp_servers", "context_management", "inference_geo",
    }
)  # fmt: skip
"""The Messages API's request fields; any other is refused (400 "Extra inputs are not
permitted"), as the API does."""

_SCHEMA_TYPES = frozenset({"object", "array", "string", "integer", "number", "boolean", "null"})
_STRING_FORMATS = frozenset(
    {"date-time", "time", "date", "duration", "email", "hostname", "uri", "ipv4", "ipv6", "uuid"}
)
_SCHEMA_KEYS = frozenset(
    {
        "type", "description", "title", "enum", "const", "anyOf", "allOf", "$ref", "$defs",
        "properties", "additionalProperties", "required", "format", "items", "minItems",
    }
)  # fmt: skip


def check_output_schema(schema: Any, path: str) -> None:
    """Refuse (``_BadRequest``, a 400) a structured-output schema outside the subset the API
    supports, as it does (the subset the SDK's ``transform_schema`` writes: the supported types,
    every object closed with ``additionalProperties: false``, string formats from its list,
    ``minItems`` 0 or 1, no numeric or length bounds)."""
    if not isinstance(schema, dict):
        raise _BadRequest(f"{path}: a schema must be an object")
    unknown = sorted(set(schema) - _SCHEMA_KEYS)
    if unknown:
        raise _BadRequest(f"{path}: property '{unknown[0]}' is not supported in structured outputs")
    for name, sub in (schema.get("$defs") or {}).items():
        check_output_schema(sub, f"{path}.$defs.{name}")
    if "$ref" in schema:
        if not str(schema["$ref"]).startswith("#/"):
            raise _BadRequest(f"{path}.$ref: only local references (#/...) are supported")
        return
    for key in ("anyOf", "allOf"):
        for i, sub in enumerate(schema.get(key) or []):
            check_output_schema(sub, f"{path}.{key}.{i}")
    kind = schema.get("type")
    if kind is None:
        if not ({"anyOf", "allOf", "enum", "const"} & set(schema)):
            raise _BadRequest(f"{path}: a schema needs a type, anyOf, allOf, enum or const")
        return
    if kind not in _SCHEMA_TYPES:
        raise _BadRequest(f"{path}.type: {kind!r} is not a supported type")
    if kind == "object":
        if schema.get("additionalProperties") is not False:
            raise _BadRequest(f"{path}: additionalProperties must be false for every object")
        properties = schema.get("properties") or {}
        for name, sub in properties.items():
            check_output_schema(sub, f"{path}.properties.{name}")
        missing = [r for r in schema.get("required") or [] if r not in properties]
        if missing:
            raise _BadRequest(f"{path}.required: {missing[0]!r} is not a property")
    elif kind == "string" and "format" in schema and schema["format"] not in _STRING_FORMATS:
        raise _BadRequest(f"{path}.format: {schema['format']!r} is not a supported string format")
    elif kind == "array":
        if "items" in schema:
            check_output_schema(schema["items"], f"{path}.items")
        if schema.get("minItems", 0) not in (0, 1):
            raise _BadRequest(f"{path}.minItems: only 0 or 1 is supported")


class DirectiveError(ValueError):
    """A ``[[fake:...]]`` directive could not be parsed."""


@dataclass
class Directives:
    """The fault-injection directives found in a request's user messages."""

    fault: str | None = None
    """``"429"``, ``"500"``, ``"529"``, ``"401"``, ``"400"``, ``"slow"``, ``"garbage"``,
    ``"truncated"``, ``"refusal"``, ``"empty"``, ``"prose"`` or None."""
    count: int | None = None
    """Fail only the first ``count`` attempts; None = permanent."""
    retry_after: str = DEFAULT_RETRY_AFTER
    prose: str | None = None
    score: int | float | None = None
    verdict: str | None = None
    batch: str | None = None
    """``"expire"``: inside a Message Batch, the request ends ``expired`` (ignored elsewhere)."""


def _parse_number(value: str) -> int | float:
    try:
        return int(value)
    except ValueError:
        return float(value)


def parse_directives(text: str) -> Directives:
    """Parse every ``[[fake:SPEC]]`` in ``text``. Raises DirectiveError on an unknown SPEC."""
    found = Directives()
    retry_after: str | None = None
    for match in _DIRECTIVE_RE.finditer(text):
        spec = match.group(1).strip()
        if spec.startswith("prose="):
            if found.fault is None:
                found.fault = "prose"
                found.prose = unquote(spec[len("prose=") :])
            continue
        for raw_part in spec.split(","):
            part = raw_part.strip()
            if not part:
                continue
            key, sep, value = part.partition("=")
            key, value = key.strip().lower(), value.strip()
            if sep:
                if key == "score":
                    try:
                        score = _parse_number(value)
                    except ValueError:
                        raise DirectiveError(f"bad score in [[fake:{spec}]]") from None
                    if found.score is None:
                        found.score = score
                elif key == "verdict":
                    if found.verdict is None:
                        found.verdict = value
                elif key == "batch":
                    if value.lower() != "expire":
                        raise DirectiveError(f"unknown batch outcome {value!r} in [[fake:{spec}]]")
                    found.batch = "expire"
                elif key in ("retry_after", "retry-after"):
                    if not value or any(ch in value for ch in "\r\n"):
                        raise DirectiveError(f"bad retry_after in [[fake:{spec}]]")
                    if retry_after is None:
                        retry_after = value
                else:
                    raise DirectiveError(f"unknown option {key!r} in [[fake:{spec}]]")
                continue
            name, star, count_text = key.partition("*")
            name = name.strip()
            if name not in _STATUS_FAULTS and name not in _BODY_FAULTS:
                raise DirectiveError(f"unknown fault {name!r} in [[fake:{spec}]]")
            count: int | None = None
            if star:
                try:
                    count = int(count_text.strip())
                except ValueError:
                    raise DirectiveError(f"bad count in [[fake:{spec}]]") from None
            if found.fault is None:
                found.fault, found.count = name, count
    if retry_after is not None:
        found.retry_after = retry_after
    return found


# --------------------------------------------------------------------------- schema answers


class _SchemaWalker:
    def __init__(
        self,
        root: dict[str, Any],
        key_text: str,
        seed: str,
        score: int | float | None,
        verdict: str | None,
    ) -> None:
        self.root = root
        self.digest = hashlib.sha256((seed + key_text).encode("utf-8")).digest()
        self.score = score
        self.verdict = verdict

    def hash_int(self, path: str) -> int:
        return int.from_bytes(hashlib.sha256(self.digest + path.encode()).digest()[:8], "big")

    def hex8(self, path: str) -> str:
        return hashlib.sha256(self.digest + path.encode()).hexdigest()[:8]

    def resolve(self, ref: str) -> dict[str, Any]:
        if not ref.startswith("#/"):
            return {}
        node: Any = self.root
        for token in ref[2:].split("/"):
            token = token.replace("~1", "/").replace("~0", "~")
            if not isinstance(node, dict) or token not in node:
                return {}
            node = node[token]
        return node if isinstance(node, dict) else {}

    def walk(self, schema: Any, path: str, name: str, depth: int = 0) -> Any:
        if depth > 32 or not isinstance(schema, dict):
            return None
        if isinstance(schema.get("$ref"), str):
            target = dict(self.resolve(schema["$ref"]))
            if "description" in schema and "description" not in target:
                target["description"] = schema["description"]
            return self.walk(target, path, name, depth + 1)
        if "const" in schema:
            return schema["const"]
        enum = schema.get("enum")
        if isinstance(enum, list) and enum:
            return self.pick_enum(enum, path, name)
        for keyword in ("anyOf", "oneOf"):
            variants = schema.get(keyword)
            if isinstance(variants, list) and variants:
                non_null = [v for v in variants if not (isinstance(v, dict) and _is_null(v))]
                chosen = dict(non_null[0] if non_null else variants[0])
                if "description" in schema and "description" not in chosen:
                    chosen["description"] = schema["description"]
                return self.walk(chosen, path, name, depth + 1)
        all_of = schema.get("allOf")
        if isinstance(all_of, list) and all_of:
            merged: dict[str, Any] = {k: v for k, v in schema.items() if k != "allOf"}
            for variant in all_of:
                if isinstance(variant, dict):
                    if isinstance(variant.get("$ref"), str):
                        variant = self.resolve(variant["$ref"])
                    for key, value in variant.items():
                        merged.setdefault(key, value)
            return self.walk(merged, path, name, depth + 1)

        type_ = schema.get("type")
        if isinstance(type_, list):
            non_null_types = [t for t in type_ if t != "null"]
            type_ = non_null_types[0] if non_null_types else "null"
        if type_ is None:
            type_ = "object" if "properties" in schema else "array" if "items" in schema else ""

        if type_ == "object":
            props = schema.get("properties")
            if not isinstance(props, dict):
                return {}
            return {key: self.walk(sub, f"{path}.{key}", key, depth + 1) for key, sub in props.items()}
        if type_ == "array":
            min_items = schema.get("minItems")
            count = min(min_items, 5) if isinstance(min_items, int) and min_items > 0 else 0
            items = schema.get("items", {})
            return [self.walk(items, f"{path}[{i}]", name, depth + 1) for i in range(count)]
        if type_ in ("integer", "number"):
            return self.number(schema, path, integer=type_ == "integer")
        if type_ == "boolean":
            return True
        if type_ == "null":
            return None
        return self.string(schema, path, name)

    def pick_enum(self, values: list[Any], path: str, name: str) -> Any:
        if self.verdict is not None and (self.verdict in values or name == "verdict"):
            return self.verdict
        all_numbers = all(isinstance(v, int | float) and not isinstance(v, bool) for v in values)
        if self.score is not None and all_numbers:
            return self.score
        return values[self.hash_int(path) % len(values)]

    def number(self, schema: dict[str, Any], path: str, *, integer: bool) -> int | float:
        if self.score is not None:
            return self.score
        low, high = score_range(schema)
        if integer or (float(low).is_integer() and float(high).is_integer()):
            lo, hi = math.ceil(low), math.floor(high)
            if hi < lo:
                hi = lo
            return lo + self.hash_int(path) % (hi - lo + 1)
        fraction = (self.hash_int(path) % 1001) / 1000
        return round(low + fraction * (high - low), 3)

    def string(self, schema: dict[str, Any], path: str, name: str) -> str:
        if self.verdict is not None and name == "verdict":
            return self.verdict
        fmt = schema.get("format")
        tag = self.hex8(path)
        formatted = {
            "date-time": "2024-01-01T00:00:00Z",
            "date": "2024-01-01",
            "time": "00:00:00Z",
            "duration": "P1D",
            "email": f"judge-{tag}@example.com",
            "hostname": "example.com",
            "uri": f"https://example.com/{tag}",
            "ipv4": "127.0.0.1",
            "ipv6": "::1",
            "uuid": str(uuid.UUID(bytes=self.digest[:16])),
        }
        if isinstance(fmt, str) and fmt in formatted:
            return formatted[fmt]
        if name.lower() in _SENTENCE_FIELDS:
            sentence = _SENTENCES[self.hash_int(path) % len(_SENTENCES)]
            text = f"{sentence} (fake judge {tag})"
        else:
            text = f"{name or 'value'}-{tag}"
        min_length = schema.get("minLength")
        if isinstance(min_length, int) and len(text) < min_length:
            text = text + "x" * (min_length - len(text))
        max_length = schema.get("maxLength")
        if isinstance(max_length, int) and max_length >= 0:
            text = text[:max_length]
        return text


def _is_null(schema: dict[str, Any]) -> bool:
    return schema.get("type") == "null" or ("const" in schema and schema["const"] is None)


def score_range(schema: dict[str, Any]) -> tuple[int | float, int | float]:
    """The (low, high) range of a numeric schema: ``from A to B`` in its description first,
    then ``minimum``/``maximum`` keywords, then ``{minimum: A, maximum: B}`` in the
    description (the SDK's transform_schema form); default 1..10."""
    description = schema.get("description")
    description = description if isinstance(description, str) else ""
    match = _RANGE_RE.search(description)
    if match:
        low, high = _parse_number(match.group(1)), _parse_number(match.group(2))
        return (low, high) if low <= high else (high, low)
    low_v: int | float | None = None
    high_v: int | float | None = None
    for key in ("minimum", "exclusiveMinimum"):
        value = schema.get(key)
        if isinstance(value, int | float) and not isinstance(value, bool):
            low_v = value + (1 if key.startswith("exclusive") else 0)
            break
    for key in ("maximum", "exclusiveMaximum"):
        value = schema.get(key)
        if isinstance(value, int | float) and not isinstance(value, bool):
            high_v = value - (1 if key.startswith("exclusive") else 0)
            break
    if low_v is None and (m := _MIN_RE.search(description)):
        low_v = _parse_number(m.group(1))
    if high_v is None and (m := _MAX_RE.search(description)):
        high_v = _parse_number(m.group(1))
    low = 1 if low_v is None else low_v
    high = max(low, 10) if high_v is None else high_v
    return (low, high) if low <= high else (high, low)


def generate_from_schema(
    schema: dict[str, Any],
    key_text: str,
    *,
    seed: str = "",
    score: int | float | None = None,
    verdict: str | None = None,
) -> Any:
    """The value the fake answers for ``schema``: deterministic in (seed, key_text)."""
    return _SchemaWalker(schema, key_text, seed, score, verdict).walk(schema, "$", "")


DEFAULT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "score": {"type": "integer", "description": "integer from 1 to 10"},
        "reasoning": {"type": "string"},
    },
}
"""The verdict a stand-in answers when the request gives no schema (a model following the
request's words: "Answer with one JSON object")."""


def _default_answer(key_text: str, seed: str, score: int | float | None) -> dict[str, Any]:
    result: dict[str, Any] = generate_from_schema(DEFAULT_SCHEMA, key_text, seed=seed, score=score)
    return result


# --------------------------------------------------------------------------- request helpers


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    parts: list[str] = []
    if isinstance(content, list):
        for block in content:
            if isinstance(block, str):
                parts.append(block)
            elif isinstance(block, dict):
                if block.get("type") == "text" and isinstance(block.get("text"), str):
                    parts.append(block["text"])
                elif block.get("type") == "tool_result":
                    parts.append(_content_text(block.get("content")))
    return "\n".join(parts)


def _tokens(text: str) -> int:
    return math.ceil(len(text) / 4)


@dataclass
class _Reply:
    status: int
    body: bytes
    headers: dict[str, str]
    content_type: str = "application/json"


def _json_reply(status: int, payload: Any, headers: dict[str, str] | None = None) -> _Reply:
    body = json.dumps(payload).encode("utf-8")
    return _Reply(status, body, dict(headers or {}))


def _error_reply(status: int, message: str | None = None, headers: dict[str, str] | None = None) -> _Reply:
    error_type, default_message = _ERROR_DEFAULTS.get(status, ("api_error", "Error"))
    payload = {
        "type": "error",
        "error": {"type": error_type, "message": message or default_message},
        "request_id": f"req_fake_{uuid.uuid4().hex[:24]}",
    }
    return _json_reply(status, payload, headers)


_UNLIMITED_HEADERS = {
    f"anthropic-ratelimit-{name}-{what}": "1000000000"
    for name in ("requests", "input-tokens", "output-tokens")
    for what in ("limit", "remaining")
}

DEFAULT_LIMIT_MODEL = "token_bucket"
_LIMIT_DIMENSIONS = (("requests", "rpm"), ("input-tokens", "itpm"), ("output-tokens", "otpm"))


def _reset_header(seconds_from_now: float) -> str:
    """RFC 3339 (whole seconds, rounded up so it is never early) of a moment from now."""
    moment = math.ceil(time.time() + max(0.0, seconds_from_now))
    return datetime.fromtimestamp(moment, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def _check_limit_model(model: str) -> str:
    if model not in LIMIT_MODELS:
        raise ValueError(f"limit_model must be one of {', '.join(LIMIT_MODELS)}; got {model!r}")
    return model


class _BadRequest(Exception):
    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def _rfc3339(moment: datetime | None) -> str | None:
    if moment is None:
        return None
    return moment.isoformat(timespec="microseconds").replace("+00:00", "Z")


def _shuffled(custom_ids: list[str], seed: str) -> list[str]:
    """The custom_ids in an order deterministic in (seed, ids) that differs from the given
    order whenever there are two or more, so clients must match results by custom_id."""
    order = sorted(custom_ids, key=lambda cid: hashlib.sha256(f"{seed}\0{cid}".encode()).digest())
    if len(order) > 1 and order == custom_ids:
        order = order[1:] + order[:1]
    return order


@dataclass
class _Batch:
    """A Message Batch; mutated only under ``FakeMessagesAPI._lock``."""

    id: str
    requests: list[tuple[str, dict[str, Any]]]
    created_at: datetime
    latency: float
    processing_status: str = "in_progress"
    ended_at: datetime | None = None
    cancel_initiated_at: datetime | None = None
    results: dict[str, dict[str, Any]] | None = None
    """custom_id -> result object, once ended."""
    order: list[str] = field(default_factory=list)
    """The order of the lines of the results file."""
    wake: threading.Event = field(default_factory=threading.Event)
    """Set to process at once: on cancel (and on reset, to let the thread go)."""

    def as_json(self, base_url: str) -> dict[str, Any]:
        counts = dict.fromkeys(("processing", "succeeded", "errored", "canceled", "expired"), 0)
        if self.results is None:
            counts["processing"] = len(self.requests)
        else:
            for result in self.results.values():
                counts[result["type"]] += 1
        ended = self.processing_status == "ended"
        return {
            "id": self.id,
            "type": "message_batch",
            "processing_status": self.processing_status,
            "request_counts": counts,
            "ended_at": _rfc3339(self.ended_at),
            "created_at": _rfc3339(self.created_at),
            "expires_at": _rfc3339(self.created_at + BATCH_LIFETIME),
            "archived_at": None,
            "cancel_initiated_at": _rfc3339(self.cancel_initiated_at),
            "results_url": f"{base_url}/v1/messages/batches/{self.id}/results" if ended else None,
        }


# --------------------------------------------------------------------------- the server


class FakeMessagesAPI:
    """An in-process fake of the Anthropic Messages API (see the module docstring).

    ``latency`` and ``batch_latency`` may be changed while serving (``batch_latency`` applies to
    the batches created afterwards). ``requests`` holds the decoded JSON bodies of the last
    10,000 ``/v1/messages`` requests; ``request_count`` counts them all; ``batch_request_count``
    counts the requests of the Message Batches created.
    """

    def __init__(
        self,
        *,
        latency: float = 0.0,
        api_key: str | None = "test-key",
        models: tuple[str, ...] | None = None,
        timeout_sleep: float = 5.0,
        seed: str = "",
        rpm: int | None = None,
        itpm: int | None = None,
        otpm: int | None = None,
        limit_headers: bool = True,
        batch_latency: float = DEFAULT_BATCH_LATENCY,
        models_api: bool = True,
        limit_model: str = DEFAULT_LIMIT_MODEL,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.latency = latency
        self.models_api = models_api
        self.batch_latency = batch_latency
        self.limit_headers = limit_headers
        self.clock = clock
        """The rate limits' clock (and that of ``accepted_times``): a test may inject its own."""
        self._limiters: dict[str, Limiter] = {}
        self._accepted: deque[float] = deque(maxlen=1_000_000)
        self._limits: dict[str, int | None] = {"rpm": None, "itpm": None, "otpm": None}
        self._limit_model = _check_limit_model(limit_model)
        self._rate_limited = 0
        self._injected_429 = 0
        self.api_key = api_key
        self.refused_key: tuple[int, str] | None = None
        """How a wrong key is refused: None, as the API does (401 ``authentication_error``), or
        a gateway's ``(status, message)``: LiteLLM with a master key and no database answers
        every call ``(400, "No connected db.")``."""
        self.models = tuple(models) if models is not None else None
        self.aws_access_key = "AKIDFAKEJUDGEQ"
        """The AWS access key id a SigV4-signed Bedrock request must name (its secret is not
        checked: the signature's presence and form are)."""
        self.google_token = "ya29.fake-judgeq-token"
        """The access token a Vertex AI request must carry."""
        self.structured = True
        """False: the server does not know structured outputs (a model, or a cloud's region,
        without them): ``output_config`` is refused as an unknown field, a 400 "output_config:
        Extra inputs are not permitted" (as Claude on Vertex AI has answered Haiku 4.5's)."""
        self.timeout_sleep = timeout_sleep
        self.seed = seed
        self._lock = threading.Lock()
        self._requests: deque[Any] = deque(maxlen=MAX_RECORDED_REQUESTS)
        self._request_count = 0
        self.model_checks = 0
        self._by_status: dict[int, int] = {}
        self._attempts: dict[str, int] = {}
        self._batches: dict[str, _Batch] = {}
        self._batch_request_count = 0
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self._host = "127.0.0.1"
        self.set_limits(rpm=rpm, itpm=itpm, otpm=otpm)

    # ----------------------------------------------------------------- lifecycle

    def start(self, port: int = 0, host: str = "127.0.0.1") -> FakeMessagesAPI:
        """Bind ``host:port`` (port 0 = a free port) and serve in a daemon thread."""
        if self._server is not None:
            raise RuntimeError("FakeMessagesAPI is already started")
        server = _Server((host, port), self)
        self._server, self._host = server, host
        self._thread = threading.Thread(
            target=server.serve_forever,
            kwargs={"poll_interval": 0.05},
            name=f"fake-anthropic:{server.server_address[1]}",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving, close the listening socket and cut every open connection, as a server
        going away does (idempotent; :meth:`start` on the same port brings it back)."""
        server, thread = self._server, self._thread
        self._server = self._thread = None
        if server is None:
            return
        server.shutdown()
        server.server_close()
        server.drop_connections()
        if thread is not None:
            thread.join(timeout=5)

    def __enter__(self) -> FakeMessagesAPI:
        if self._server is None:
            self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("FakeMessagesAPI is not started")
        return int(self._server.server_address[1])

    @property
    def base_url(self) -> str:
        host = "127.0.0.1" if self._host in ("", "0.0.0.0") else self._host
        return f"http://{host}:{self.port}"

    # ----------------------------------------------------------------- inspection

    @property
    def requests(self) -> list[Any]:
        """A copy of the decoded JSON bodies received on /v1/messages (the last 10,000)."""
        with self._lock:
            return list(self._requests)

    @property
    def request_count(self) -> int:
        with self._lock:
            return self._request_count

    @property
    def by_status(self) -> dict[int, int]:
        with self._lock:
            return dict(self._by_status)

    @property
    def batch_request_count(self) -> int:
        """Requests received in the Message Batches created (since the last reset)."""
        with self._lock:
            return self._batch_request_count

    def batches(self) -> dict[str, str]:
        """``{batch id: processing_status}`` of the stored Message Batches, oldest first."""
        with self._lock:
            return {batch.id: batch.processing_status for batch in self._batches.values()}

    @property
    def limit_model(self) -> str:
        """``token_bucket``, ``sliding_window`` or ``per_second`` (see the module docstring);
        setting it starts the limits afresh (buckets full, windows empty)."""
        with self._lock:
            return self._limit_model

    @limit_model.setter
    def limit_model(self, model: str) -> None:
        self.set_limits(**self.limits, limit_model=model)

    @property
    def limits(self) -> dict[str, int | None]:
        """``{"rpm": N, "itpm": N, "otpm": N}``; None = unlimited."""
        with self._lock:
            return dict(self._limits)

    def set_limits(
        self,
        *,
        rpm: int | None = None,
        itpm: int | None = None,
        otpm: int | None = None,
        limit_model: str | None = None,
    ) -> None:
        """Set (or, with None, remove) the per-minute limits, and the limit model when given
        (else the current one); they start afresh: buckets full, windows empty."""
        limits = {"rpm": rpm, "itpm": itpm, "otpm": otpm}
        for key, value in limits.items():
            if value is not None:
                if isinstance(value, bool) or not isinstance(value, int | float):
                    raise TypeError(f"{key} must be a number or None; got {value!r}")
                limits[key] = int(value) if value > 0 else None
        model = None if limit_model is None else _check_limit_model(limit_model)
        now = self.clock()
        with self._lock:
            if model is not None:
                self._limit_model = model
            self._limits = limits
            self._limiters = {
                name: make_limit(self._limit_model, per_minute, now)
                for name, key in _LIMIT_DIMENSIONS
                if (per_minute := limits[key])
            }

    def accepted_times(self) -> list[float]:
        """The ``clock()`` (default ``time.monotonic()``) of every /v1/messages request
        admitted by the rate limits."""
        with self._lock:
            return list(self._accepted)

    def _limit_headers(self, now: float) -> dict[str, str]:
        """The ``anthropic-ratelimit-*`` headers now (none when ``limit_headers`` is off);
        called under ``_lock``."""
        if not self.limit_headers:
            return {}
        if not self._limiters:
            # like the real API, which always sends its limits: no limit configured here
            # reads as a very high one
            return dict(_UNLIMITED_HEADERS)
        headers: dict[str, str] = {}
        for name, limiter in self._limiters.items():
            headers[f"anthropic-ratelimit-{name}-limit"] = str(limiter.per_minute)
            headers[f"anthropic-ratelimit-{name}-remaining"] = str(limiter.remaining(now))
            headers[f"anthropic-ratelimit-{name}-reset"] = _reset_header(limiter.replenished_in(now))
        return headers

    def _admit(self, input_tokens: int, max_tokens: int, now: float) -> tuple[float, dict[str, str]]:
        """Take a request's share of the limits at ``now``: (0, headers) when admitted, else
        (seconds to wait, headers) with nothing taken. Its output tokens are reserved as
        ``max_tokens`` (settled at its end: :meth:`_spend_output`)."""
        with self._lock:
            need = {"requests": 1.0, "input-tokens": float(input_tokens), "output-tokens": float(max_tokens)}
            wait = max((lim.wait_for(need[name], now) for name, lim in self._limiters.items()), default=0.0)
            if wait == 0.0:
                for name, limiter in self._limiters.items():
                    limiter.take(need[name], now)
                self._accepted.append(now)
            else:
                self._rate_limited += 1
            return wait, self._limit_headers(now)

    def _spend_output(self, admitted: float, max_tokens: int, output_tokens: int) -> None:
        """Settle the output tokens a request admitted at ``admitted`` reserved to what it used."""
        now = self.clock()
        with self._lock:
            limiter = self._limiters.get("output-tokens")
            if limiter is not None:
                limiter.settle(admitted, float(max_tokens), float(output_tokens), now)

    def stats(self) -> dict[str, Any]:
        """What ``GET /_fake/stats`` answers."""
        with self._lock:
            by_batch_status = dict.fromkeys(_BATCH_STATUSES, 0)
            for batch in self._batches.values():
                by_batch_status[batch.processing_status] += 1
            return {
                "request_count": self._request_count,
                "by_status": {str(k): v for k, v in sorted(self._by_status.items())},
                "latency": self.latency,
                "batch_request_count": self._batch_request_count,
                "batches": by_batch_status,
                "batch_latency": self.batch_latency,
                "limit_model": self._limit_model,
                "limits": dict(self._limits),
                "limit_headers": self.limit_headers,
                "count_429": self._by_status.get(429, 0),
                "rate_limited": self._rate_limited,
                "injected_429": self._injected_429,
            }

    def finish_batches(self) -> int:
        """Process every Message Batch still in progress now, whatever its latency (a test's
        way to end a batch when it chooses); how many were woken."""
        with self._lock:
            pending = [b for b in self._batches.values() if b.processing_status == "in_progress"]
            for batch in pending:
                batch.wake.set()
        return len(pending)

    def reset(self) -> None:
        """Forget recorded requests, counters, per-request attempt counts, rate limits and
        Message Batches (a batch still processing is dropped, never finished). The limit
        model and ``limit_headers`` stay."""
        with self._lock:
            for batch in self._batches.values():
                batch.wake.set()
            self._batches.clear()
            self._batch_request_count = 0
            self._requests.clear()
            self._request_count = 0
            self.model_checks = 0
            self._by_status.clear()
            self._attempts.clear()
            self._accepted.clear()
            self._limiters = {}
            self._limits = {"rpm": None, "itpm": None, "otpm": None}
            self._rate_limited = self._injected_429 = 0

    # ----------------------------------------------------------------- request handling

    def _handle(self, method: str, path: str, headers: Any, raw: bytes) -> _Reply:
        path, _, query = path.partition("?")
        path = path.rstrip("/") or "/"
        if path == "/v1/messages/batches" or path.startswith("/v1/messages/batches/"):
            try:
                return self._batch_endpoint(method, path, parse_qs(query), headers, raw)
            except Exception as exc:  # a bug in the fake must not hang the client
                return _error_reply(500, f"fake server error: {exc!r}")
        if method == "POST" and path == "/v1/messages":
            with self._lock:
                self._request_count += 1
            try:
                reply = self._messages(headers, raw)
            except Exception as exc:  # a bug in the fake must not hang the client
                reply = _error_reply(500, f"fake server error: {exc!r}")
            with self._lock:
                self._by_status[reply.status] = self._by_status.get(reply.status, 0) + 1
            return reply
        if method == "POST" and path == "/v1/messages/count_tokens":
            return self._count_tokens(headers, raw)
        cloud = _CLOUD_PATHS.fullmatch(path) if method == "POST" else None
        if cloud is not None:  # Claude on Amazon Bedrock or Google Vertex AI
            with self._lock:
                self._request_count += 1
            try:
                reply = self._cloud(headers, raw, cloud)
            except Exception as exc:  # a bug in the fake must not hang the client
                reply = _error_reply(500, f"fake server error: {exc!r}")
            with self._lock:
                self._by_status[reply.status] = self._by_status.get(reply.status, 0) + 1
            return reply
        if method == "GET" and path.startswith("/v1/models/"):
            return self._model(headers, path.removeprefix("/v1/models/"))
        if method == "GET" and path == "/_fake/stats":
            return _json_reply(200, self.stats())
        if method == "GET" and path == "/_fake/accepted":
            return _json_reply(200, {"times": self.accepted_times()})
        if method == "GET" and path == "/_fake/batches":
            return _json_reply(200, {"batches": self.batches()})
        if method == "POST" and path == "/_fake/reset":
            self.reset()
            return _json_reply(200, {"ok": True})
        if method == "POST" and path == "/_fake/config":
            try:
                config = json.loads(raw or b"{}")
                if "latency" in config:
                    self.latency = float(config["latency"])
                if "batch_latency" in config:
                    self.batch_latency = float(config["batch_latency"])
                if "limit_headers" in config:
                    if not isinstance(config["limit_headers"], bool):
                        raise TypeError("limit_headers must be true or false")
                    self.limit_headers = config["limit_headers"]
                if {"rpm", "itpm", "otpm"} & set(config):
                    self.set_limits(
                        **{k: config.get(k) for k in ("rpm", "itpm", "otpm")},
                        limit_model=config.get("limit_model"),
                    )
                elif "limit_model" in config:
                    self.limit_model = config["limit_model"]
            except (ValueError, TypeError, AttributeError) as exc:
                return _error_reply(400, f'expected a JSON object like {{"latency": 0.1}}: {exc}')
            return _json_reply(200, self.stats())
        return _error_reply(404, f"Not found: {method} {path}")

    def _cloud(self, headers: Any, raw: bytes, found: re.Match[str]) -> _Reply:
        """A Messages request as Bedrock (``/model/{id}/invoke``, SigV4-signed or a Bedrock API
        key) or Vertex AI (``.../publishers/anthropic/models/{id}:rawPredict``, a Google access
        token) carry it: the model in the path, not the body; ``anthropic_version`` the cloud's."""
        bedrock = found.group("bedrock") is not None
        auth = str(headers.get("authorization") or "")
        if bedrock:
            signed = auth.startswith("AWS4-HMAC-SHA256 ") and f"Credential={self.aws_access_key}/" in auth
            if not (signed and headers.get("x-amz-date")) and auth != f"Bearer {self.api_key}":
                return _json_reply(403, {"message": "The security token included in the request is invalid."})
        elif auth != f"Bearer {self.google_token}":
            return _json_reply(
                401,
                {
                    "error": {
                        "code": 401,
                        "message": "Request had invalid authentication credentials.",
                        "status": "UNAUTHENTICATED",
                    }
                },
            )
        try:
            body = json.loads(raw)
        except ValueError:
            return _error_reply(400, "Request body is not valid JSON")
        # (the clouds take the API version in the body, the model in the path; the SDK sends its own
        # version, 2026-10-21 in anthropic 2.x, where the clouds' documents show older ones)
        if (
            not isinstance(body, dict)
            or not isinstance(body.get("anthropic_version"), str)
            or "model" in body
        ):
            return _error_reply(400, "expected anthropic_version in the body and the model in the path")
        model = unquote(found.group("bedrock") or found.group("vertex"))
        body = {key: value for key, value in body.items() if key != "anthropic_version"}
        body["model"] = model
        headers = {**dict(headers.items()), "x-api-key": self.api_key or ""}
        reply = self._messages(headers, json.dumps(body).encode())
        # the clouds enforce their own quotas and state none of Anthropic's rate-limit headers
        kept = {k: v for k, v in reply.headers.items() if not k.lower().startswith("anthropic-ratelimit-")}
        return _Reply(reply.status, reply.body, kept, reply.content_type)

    def _authorized(self, headers: Any) -> bool:
        if self.api_key is None:
            return True
        if headers.get("x-api-key") == self.api_key:
            return True
        return bool(headers.get("authorization") == f"Bearer {self.api_key}")

    def _model(self, headers: Any, model: str) -> _Reply:
        with self._lock:
            self.model_checks += 1
        if not self.models_api:
            return _error_reply(405, "Method not allowed: this endpoint serves Messages only")
        if not self._authorized(headers):
            return _error_reply(*self.refused_key) if self.refused_key else _error_reply(401)
        if self.models is not None and model not in self.models:
            return _error_reply(404, f"model: {model}")
        record = {"type": "model", "id": model, "display_name": model, "created_at": "2025-01-01T00:00:00Z"}
        return _json_reply(200, record)

    def _count_tokens(self, headers: Any, raw: bytes) -> _Reply:
        if not self._authorized(headers):
            return _error_reply(*self.refused_key) if self.refused_key else _error_reply(401)
        text = raw.decode("utf-8", "replace")
        try:
            body = json.loads(text)
        except ValueError:
            return _error_reply(400, "Request body is not valid JSON")
        if not isinstance(body, dict) or "messages" not in body or "model" not in body:
            return _error_reply(400, "count_tokens needs `model` and `messages`")
        return _json_reply(200, {"input_tokens": _tokens(text)})

    def _messages(self, headers: Any, raw: bytes) -> _Reply:
        latency = self.latency
        if latency > 0:
            time.sleep(latency)
        text = raw.decode("utf-8", "replace")
        body: Any = None
        with contextlib.suppress(ValueError):
            body = json.loads(text)
        if body is not None:
            with self._lock:
                self._requests.append(body)
        if not self._authorized(headers):
            return _error_reply(*self.refused_key) if self.refused_key else _error_reply(401)
        if not isinstance(body, dict):
            return _error_reply(400, "Request body must be a JSON object")
        return self._answer(body, text)

    def _answer(self, body: dict[str, Any], text: str, *, in_batch: bool = False) -> _Reply:
        """What ``POST /v1/messages`` answers for ``body`` (``text``: its JSON text). Inside a
        Message Batch (``in_batch``) the rate limits and the ``slow`` sleep do not apply."""
        try:
            messages = self._validate(body)
        except _BadRequest as exc:
            return _error_reply(400, exc.message)
        model = body["model"]
        if self.models is not None and model not in self.models:
            return _error_reply(404, f"model: {model}")
        user_texts = [_content_text(m.get("content")) for m in messages if m["role"] == "user"]
        key_text = user_texts[-1] if user_texts else ""
        try:
            directives = parse_directives("\n".join(user_texts))
        except DirectiveError as exc:
            return _error_reply(400, f"fake: {exc}")

        fault = directives.fault
        if fault == "429":
            # a request refused for itself: before the rate limits, which it takes nothing from
            fault = self._fault_attempt(directives, key_text)
            if fault == "429":
                with self._lock:
                    if not in_batch:
                        self._injected_429 += 1
                    headers = {} if in_batch else self._limit_headers(self.clock())
                return _error_reply(429, headers={**headers, "retry-after": directives.retry_after})
        limit_headers: dict[str, str] = {}
        admitted = self.clock()
        if not in_batch:
            wait, limit_headers = self._admit(_tokens(text), body["max_tokens"], admitted)
            if wait > 0:
                retry = {"retry-after": str(max(1, math.ceil(wait)))}
                return _error_reply(429, "rate limit exceeded (fake)", headers={**limit_headers, **retry})
        if fault is not None:
            fault = self._fault_attempt(directives, key_text)

        if fault in _STATUS_FAULTS:
            status = _STATUS_FAULTS[fault]
            extra = {"retry-after": directives.retry_after} if status == 529 else {}
            if not in_batch:  # no output: the reservation comes back
                self._spend_output(admitted, body["max_tokens"], 0)
            return _error_reply(status, headers={**limit_headers, **extra})
        if fault == "slow":
            if not in_batch:
                time.sleep(self.timeout_sleep)
            fault = None

        stop_reason = "end_turn"
        stop_details: dict[str, Any] | None = None
        if fault == "garbage":
            answer: str | None = GARBAGE_TEXT
        elif fault == "truncated":
            answer, stop_reason = TRUNCATED_TEXT, "max_tokens"
        elif fault == "refusal":
            answer, stop_reason = REFUSAL_TEXT, "refusal"
            stop_details = {"type": "refusal", "category": None, "explanation": None}
        elif fault == "empty":
            answer = None
        elif fault == "prose":
            answer = directives.prose or ""
        else:
            answer = self._normal_answer(body, key_text, directives)
            max_tokens = body["max_tokens"]
            if _tokens(answer) > max_tokens:
                answer, stop_reason = answer[: max_tokens * 4], "max_tokens"

        content = [] if answer is None else [{"type": "text", "text": answer}]
        message = {
            "id": f"msg_fake_{uuid.uuid4().hex[:24]}",
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": content,
            "stop_reason": stop_reason,
            "stop_sequence": None,
            "stop_details": stop_details,
            "usage": {
                "input_tokens": _tokens(text),
                "output_tokens": _tokens(answer or ""),
                "cache_creation_input_tokens": 0,
                "cache_read_input_tokens": 0,
            },
        }
        if not in_batch:
            self._spend_output(admitted, body["max_tokens"], message["usage"]["output_tokens"])
        return _json_reply(200, message, limit_headers)

    def _fault_attempt(self, directives: Directives, key_text: str) -> str | None:
        """The fault this attempt gets: ``directives.fault``, or None once a transient fault
        (``*N``) has failed its first N attempts (counted here, per sha256 of ``key_text``)."""
        if directives.fault is None or directives.count is None:
            return directives.fault
        key = hashlib.sha256(key_text.encode("utf-8")).hexdigest()
        with self._lock:
            attempt = self._attempts.get(key, 0) + 1
            self._attempts[key] = attempt
        return directives.fault if attempt <= directives.count else None

    def _validate(self, body: dict[str, Any]) -> list[dict[str, Any]]:
        for required in ("model", "max_tokens", "messages"):
            if required not in body:
                raise _BadRequest(f"{required}: Field required")
        if not isinstance(body["model"], str) or not body["model"]:
            raise _BadRequest("model: Input should be a non-empty string")
        max_tokens = body["max_tokens"]
        if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
            raise _BadRequest("max_tokens: Input should be a positive integer")
        messages = body["messages"]
        if not isinstance(messages, list) or not messages:
            raise _BadRequest("messages: at least one message is required")
        for i, message in enumerate(messages):
            if not isinstance(message, dict) or message.get("role") not in ("user", "assistant"):
                raise _BadRequest(f"messages.{i}: each message needs role 'user' or 'assistant'")
        for name in _SAMPLING_FIELDS:
            if name in body:
                raise _BadRequest(
                    f"{name}: sampling parameters are not supported for this model; "
                    f"remove `{name}` from the request"
                )
        tool_choice = body.get("tool_choice")
        if isinstance(tool_choice, dict) and tool_choice.get("type") in ("tool", "any"):
            raise _BadRequest(
                f"tool_choice: forced tool use (type {tool_choice.get('type')!r}) is not "
                "supported for this model; use 'auto' or 'none'"
            )
        if messages[-1]["role"] == "assistant":
            raise _BadRequest(
                "This model does not support assistant message prefill. "
                "The conversation must end with a user message."
            )
        if body.get("stream"):
            raise _BadRequest("stream: the fake server does not support streaming")
        known = _REQUEST_FIELDS if self.structured else _REQUEST_FIELDS - {"output_config"}
        extra = sorted(set(body) - known)
        if extra:  # (the API refuses what it does not know: e.g. the beta's output_format)
            raise _BadRequest(f"{extra[0]}: Extra inputs are not permitted")
        output_config = body.get("output_config")
        if output_config is not None:
            if not isinstance(output_config, dict):
                raise _BadRequest("output_config: Input should be an object")
            fmt = output_config.get("format")
            if fmt is not None and (
                not isinstance(fmt, dict)
                or fmt.get("type") != "json_schema"
                or not isinstance(fmt.get("schema"), dict)
            ):
                raise _BadRequest('output_config.format: expected {"type": "json_schema", "schema": {...}}')
            if fmt is not None:
                check_output_schema(fmt["schema"], "output_config.format.schema")
        return messages

    def _normal_answer(self, body: dict[str, Any], key_text: str, directives: Directives) -> str:
        output_config = body.get("output_config") or {}
        fmt = output_config.get("format")
        if isinstance(fmt, dict) and isinstance(fmt.get("schema"), dict):
            value = generate_from_schema(
                fmt["schema"],
                key_text,
                seed=self.seed,
                score=directives.score,
                verdict=directives.verdict,
            )
        else:
            value = _default_answer(key_text, self.seed, directives.score)
        return json.dumps(value)

    # ----------------------------------------------------------------- message batches

    def _batch_endpoint(
        self, method: str, path: str, query: dict[str, list[str]], headers: Any, raw: bytes
    ) -> _Reply:
        if not self._authorized(headers):
            return _error_reply(*self.refused_key) if self.refused_key else _error_reply(401)
        host = headers.get("host")
        base_url = f"http://{host}" if host else self.base_url
        if path == "/v1/messages/batches":
            if method == "POST":
                return self._create_batch(raw, base_url)
            if method == "GET":
                return self._list_batches(query, base_url)
            return _error_reply(404, f"Not found: {method} {path}")
        match = _BATCH_PATH_RE.fullmatch(path)
        if match is None:
            return _error_reply(404, f"Not found: {method} {path}")
        batch_id, action = match.group(1), match.group(2) or ""
        with self._lock:
            batch = self._batches.get(batch_id)
            if batch is None:
                return _error_reply(404, f"message_batch_id: no Message Batch {batch_id!r}")
            if (method, action) == ("GET", ""):
                return _json_reply(200, batch.as_json(base_url))
            if (method, action) == ("POST", "/cancel"):
                if batch.processing_status == "ended":
                    return _error_reply(
                        400,
                        f"Message Batch {batch_id} cannot be canceled because it has already "
                        "finished processing",
                    )
                if batch.processing_status == "in_progress":
                    batch.processing_status = "canceling"
                    batch.cancel_initiated_at = datetime.now(UTC)
                    batch.wake.set()
                return _json_reply(200, batch.as_json(base_url))
            if (method, action) == ("DELETE", ""):
                if batch.processing_status != "ended":
                    return _error_reply(
                        400,
                        f"Message Batch {batch_id} is still processing: only a batch that has ended "
                        "can be deleted (cancel it first)",
                    )
                del self._batches[batch_id]
                return _json_reply(200, {"id": batch_id, "type": "message_batch_deleted"})
            if (method, action) == ("GET", "/results"):
                if batch.results is None or batch.processing_status != "ended":
                    return _error_reply(
                        400,
                        f"Message Batch {batch_id} has not finished processing (processing_status "
                        f"{batch.processing_status!r}); its results are available once it has ended",
                    )
                results, order = batch.results, batch.order
            else:
                return _error_reply(404, f"Not found: {method} {path}")
        lines = (json.dumps({"custom_id": cid, "result": results[cid]}) + "\n" for cid in order)
        body = "".join(lines).encode("utf-8")
        return _Reply(200, body, {}, content_type="application/x-jsonl")

    def _create_batch(self, raw: bytes, base_url: str) -> _Reply:
        if len(raw) > MAX_BATCH_BYTES:
            return _error_reply(413, f"A Message Batch is limited to {MAX_BATCH_BYTES} bytes")
        try:
            body = json.loads(raw)
        except ValueError:
            return _error_reply(400, "Request body is not valid JSON")
        if not isinstance(body, dict):
            return _error_reply(400, "Request body must be a JSON object")
        if "requests" not in body:
            return _error_reply(400, "requests: Field required")
        items = body["requests"]
        if not isinstance(items, list):
            return _error_reply(400, "requests: Input should be a valid list")
        if not 1 <= len(items) <= MAX_BATCH_REQUESTS:
            return _error_reply(
                400, f"requests: a Message Batch holds 1 to {MAX_BATCH_REQUESTS} requests, got {len(items)}"
            )
        requests: list[tuple[str, dict[str, Any]]] = []
        seen: set[str] = set()
        for i, item in enumerate(items):
            if not isinstance(item, dict):
                return _error_reply(400, f"requests.{i}: Input should be an object")
            custom_id = item.get("custom_id")
            if not isinstance(custom_id, str) or not _CUSTOM_ID_RE.fullmatch(custom_id):
                return _error_reply(
                    400, f"requests.{i}.custom_id: String should match pattern '^[a-zA-Z0-9_-]{{1,64}}$'"
                )
            if custom_id in seen:
                return _error_reply(
                    400,
                    f"requests.{i}.custom_id: duplicate custom_id {custom_id!r}; each custom_id must be "
                    "unique within a Message Batch",
                )
            params = item.get("params")
            if not isinstance(params, dict):
                return _error_reply(400, f"requests.{i}.params: Input should be an object")
            seen.add(custom_id)
            requests.append((custom_id, params))

        batch = _Batch(
            id=f"msgbatch_fake_{uuid.uuid4().hex[:24]}",
            requests=requests,
            created_at=datetime.now(UTC),
            latency=max(0.0, float(self.batch_latency)),
        )
        with self._lock:
            self._batches[batch.id] = batch
            self._batch_request_count += len(requests)
            reply = _json_reply(200, batch.as_json(base_url))
        threading.Thread(
            target=self._process_batch, args=(batch,), name=f"fake-anthropic:{batch.id}", daemon=True
        ).start()
        return reply

    def _list_batches(self, query: dict[str, list[str]], base_url: str) -> _Reply:
        try:
            limit = int(query.get("limit", ["20"])[-1])
        except ValueError:
            return _error_reply(400, "limit: Input should be a valid integer")
        if not 1 <= limit <= 1000:
            return _error_reply(400, "limit: Input should be between 1 and 1000")
        after_id = query.get("after_id", [""])[-1]
        before_id = query.get("before_id", [""])[-1]
        if after_id and before_id:
            return _error_reply(400, "after_id and before_id cannot be used together")
        with self._lock:
            newest_first = list(reversed(self._batches.values()))
            ids = [batch.id for batch in newest_first]
            cursor = after_id or before_id
            if cursor and cursor not in ids:
                return _error_reply(
                    400, f"{'after_id' if after_id else 'before_id'}: no Message Batch {cursor!r}"
                )
            if before_id:
                end = ids.index(before_id)
                start = max(0, end - limit)
                has_more = start > 0
            else:
                start = ids.index(after_id) + 1 if after_id else 0
                end = min(len(ids), start + limit)
                has_more = end < len(ids)
            data = [batch.as_json(base_url) for batch in newest_first[start:end]]
        return _json_reply(
            200,
            {
                "data": data,
                "has_more": has_more,
                "first_id": data[0]["id"] if data else None,
                "last_id": data[-1]["id"] if data else None,
            },
        )

    def _process_batch(self, batch: _Batch) -> None:
        """The batch's background thread: end it after its latency (or at once on cancel)."""
        batch.wake.wait(batch.latency)
        with self._lock:
            if self._batches.get(batch.id) is not batch:
                return  # forgotten by reset()
            canceled = batch.processing_status == "canceling"
        results: dict[str, dict[str, Any]] = {}
        for custom_id, params in batch.requests:
            results[custom_id] = {"type": "canceled"} if canceled else self._batch_result(params)
        order = _shuffled([custom_id for custom_id, _ in batch.requests], self.seed)
        with self._lock:
            if self._batches.get(batch.id) is not batch:
                return
            batch.results, batch.order = results, order
            batch.processing_status = "ended"
            batch.ended_at = datetime.now(UTC)

    def _batch_result(self, params: dict[str, Any]) -> dict[str, Any]:
        """The result object of one batch request: /v1/messages' answer, or ``expired``."""
        messages = params.get("messages")
        if isinstance(messages, list):
            user_texts = [
                _content_text(m.get("content"))
                for m in messages
                if isinstance(m, dict) and m.get("role") == "user"
            ]
            with contextlib.suppress(DirectiveError):
                if parse_directives("\n".join(user_texts)).batch == "expire":
                    return {"type": "expired"}
        try:
            reply = self._answer(params, json.dumps(params), in_batch=True)
        except Exception as exc:  # a bug in the fake becomes an api_error, as on /v1/messages
            reply = _error_reply(500, f"fake server error: {exc!r}")
        payload = json.loads(reply.body)
        if reply.status == 200:
            return {"type": "succeeded", "message": payload}
        return {"type": "errored", "error": payload}


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 1024
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], fake: FakeMessagesAPI) -> None:
        self.fake = fake
        self._open: set[socket.socket] = set()
        self._open_lock = threading.Lock()
        super().__init__(address, _Handler)

    def get_request(self) -> tuple[socket.socket, Any]:
        conn, address = super().get_request()
        with self._open_lock:
            self._open.add(conn)
        return conn, address

    def shutdown_request(self, request: Any) -> None:
        with self._open_lock:
            self._open.discard(request)
        super().shutdown_request(request)

    def drop_connections(self) -> None:
        """Cut every open connection, kept-alive ones included, as a server going away does."""
        with self._open_lock:
            conns = list(self._open)
        for conn in conns:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)

    def server_bind(self) -> None:
        # HTTPServer.server_bind calls socket.getfqdn(), a reverse DNS lookup that can stall.
        socketserver.TCPServer.server_bind(self)
        host, port = self.server_address[:2]
        self.server_name = str(host)
        self.server_port = int(port)

    def handle_error(self, request: Any, client_address: Any) -> None:
        if isinstance(sys.exc_info()[1], ConnectionError | TimeoutError):
            return  # the client went away (e.g. it timed out on a `slow` request)
        super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "FakeAnthropic/1.0"
    sys_version = ""
    timeout = 120  # idle keep-alive connections are closed after this many seconds
    # Headers and body go out in two writes: without TCP_NODELAY, Nagle's algorithm and the
    # client's delayed ACK add ~40 ms to every response.
    disable_nagle_algorithm = True
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_POST(self) -> None:
        self._dispatch("POST")

    def do_DELETE(self) -> None:
        self._dispatch("DELETE")

    def _read_body(self) -> bytes:
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            chunks: list[bytes] = []
            while True:
                size = int(self.rfile.readline().split(b";", 1)[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return b"".join(chunks)
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length > 0 else b""

    def _dispatch(self, method: str) -> None:
        try:
            raw = self._read_body()
        except (ValueError, OSError):
            self.close_connection = True
            reply = _error_reply(400, "could not read the request body")
        else:
            reply = self.server.fake._handle(method, self.path, self.headers, raw)
        try:
            self.send_response(reply.status)
            self.send_header("Content-Type", reply.content_type)
            self.send_header("Content-Length", str(len(reply.body)))
            self.send_header("request-id", f"req_fake_{uuid.uuid4().hex[:24]}")
            for name, value in reply.headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(reply.body)
            self.wfile.flush()
        except OSError:
            self.close_connection = True


# --------------------------------------------------------------------------- CLI


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m judgeq.testing.fake_anthropic",
        description="Fake Anthropic Messages API server for judgeq tests and benchmarks.",
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 = a free port (default)")
    parser.add_argument("--latency", type=float, default=0.0, help="seconds per /v1/messages")
    parser.add_argument(
        "--batch-latency",
        type=float,
        default=DEFAULT_BATCH_LATENCY,
        help="seconds from a Message Batch's creation to its end",
    )
    parser.add_argument("--api-key", default="test-key", help="expected x-api-key")
    parser.add_argument("--no-auth", action="store_true", help="accept any x-api-key")
    parser.add_argument("--models", default=None, help="comma-separated known models")
    parser.add_argument("--timeout-sleep", type=float, default=5.0, help="sleep for [[fake:slow]]")
    parser.add_argument("--seed", default="")
    parser.add_argument("--rpm", type=int, default=None, help="requests per minute (429 beyond)")
    parser.add_argument("--itpm", type=int, default=None, help="input tokens per minute")
    parser.add_argument("--otpm", type=int, default=None, help="output tokens per minute")
    parser.add_argument(
        "--limit-model",
        choices=LIMIT_MODELS,
        default=DEFAULT_LIMIT_MODEL,
        help="how rpm/itpm/otpm are enforced (see the module docstring)",
    )
    parser.add_argument("--no-limit-headers", action="store_true", help="send no anthropic-ratelimit-*")
    args = parser.parse_args(argv)

    models = tuple(m.strip() for m in args.models.split(",") if m.strip()) if args.models else None
    fake = FakeMessagesAPI(
        latency=args.latency,
        api_key=None if args.no_auth else args.api_key,
        models=models,
        timeout_sleep=args.timeout_sleep,
        seed=args.seed,
        rpm=args.rpm,
        itpm=args.itpm,
        otpm=args.otpm,
        limit_headers=not args.no_limit_headers,
        batch_latency=args.batch_latency,
        limit_model=args.limit_model,
    )
    return serve_until_signalled(fake, args.port, args.host)


if __name__ == "__main__":
    sys.exit(main())

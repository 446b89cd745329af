"""A stand-in for the Gemini Developer API (generativelanguage.googleapis.com).

Stdlib only. Serves what the google-genai SDK (3.6.1) calls for a judge:

  POST /{v1,v1beta}/models/{model}:generateContent
  POST /{v1,v1beta}/models/{model}:countTokens
  GET  /{v1,v1beta}/models/{model}            (models.get - preflight check)
  GET  /{v1,v1beta}/models                    (models.list)
  POST /{v1,v1beta}/models/{model}:batchGenerateContent   (Batch Mode, inlined requests)
  GET  /{v1,v1beta}/batches/{id}
  POST /{v1,v1beta}/batches/{id}:cancel

Behaviour copied from the real service (see NOTES.md for sources):

* Auth: key from the `x-goog-api-key` header (or `?key=` query param, which the
  real API also accepts). Missing key -> 403 PERMISSION_DENIED ("Method doesn't
  allow unregistered callers ..."). Wrong key -> 400 INVALID_ARGUMENT with an
  ErrorInfo detail reason API_KEY_INVALID. Google does NOT use 401 for a bad key.
* Unknown model -> 404 NOT_FOUND.
* Unknown JSON field anywhere we model -> 400 INVALID_ARGUMENT
  'Invalid JSON payload received. Unknown name "x" at \'generation_config\': Cannot find field.'
  with a google.rpc.BadRequest detail. Both lowerCamel and snake_case spellings
  are accepted, as Google's proto-JSON parser does (the SDK itself sends e.g.
  thinkingConfig.thinking_budget and responseSchema.property_ordering).
* 429 RESOURCE_EXHAUSTED carries QuotaFailure + Help + RetryInfo(retryDelay)
  details in the body and NO Retry-After header (Gemini does not send one).
* Error bodies: {"error": {"code", "message", "status", "details"?}}.

Fault injection: latency, fail_with=[(status, google_status[, message]), ...]
(served in order by generateContent before it succeeds), garbage=True (200 with a
non-JSON body on generateContent); and the fault markers every stand-in shares, in a user
message (``[[fake:429]]``, ``[[fake:500*2]]``, ``[[fake:529]]`` -> 503 UNAVAILABLE,
``[[fake:401]]`` -> 400 API_KEY_INVALID, ``[[fake:400]]``, ``[[fake:slow]]``,
``[[fake:garbage]]``, ``[[fake:truncated]]``, ``[[fake:refusal]]``, ``[[fake:score=N]]``,
``[[fake:verdict=V]]``, ``retry_after=S`` as the 429's RetryInfo delay).

Run it as a separate process (prints ``READY http://127.0.0.1:PORT`` once serving, then
serves until SIGTERM/SIGINT)::

    python -m judgeq.testing.fake_gemini --port 0 --latency 0.2 [--api-key K]
        [--models gemini-2.5-flash,gemini-2.5-pro] [--retry-delay 30s] [--batch-polls N]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import SplitResult, parse_qs, urlsplit

from judgeq.testing.fake_anthropic import (
    DEFAULT_SCHEMA,
    DirectiveError,
    Directives,
    generate_from_schema,
    parse_directives,
)
from judgeq.testing.serving import serve_until_signalled

__all__ = [
    "BAD_KEY_MESSAGE",
    "MISSING_KEY_MESSAGE",
    "FakeGeminiAPI",
    "approx_tokens",
    "main",
    "value_from_schema",
]

# ---------------------------------------------------------------------------
# Field catalogues (lowerCamel; snake_case equivalents are accepted too).
# Taken from what google-genai 3.6.1 can send in Gemini-Developer mode
# (models.py _GenerateContentParameters_to_mldev / _GenerateContentConfig_to_mldev).
# ---------------------------------------------------------------------------
GENERATE_TOP_LEVEL = {
    "model",
    "contents",
    "tools",
    "toolConfig",
    "safetySettings",
    "systemInstruction",
    "generationConfig",
    "cachedContent",
    "labels",
    "serviceTier",
    "store",
    "continuationToken",
}
GENERATION_CONFIG = {
    "stopSequences",
    "responseMimeType",
    "responseSchema",
    "responseJsonSchema",
    "responseModalities",
    "candidateCount",
    "maxOutputTokens",
    "temperature",
    "topP",
    "topK",
    "seed",
    "presencePenalty",
    "frequencyPenalty",
    "responseLogprobs",
    "logprobs",
    "enableEnhancedCivicAnswers",
    "speechConfig",
    "thinkingConfig",
    "imageConfig",
    "mediaResolution",
    "audioTranscriptionConfig",
}
THINKING_CONFIG = {"includeThoughts", "thinkingBudget", "thinkingLevel"}
CONTENT = {"role", "parts"}
PART = {
    "text",
    "inlineData",
    "fileData",
    "functionCall",
    "functionResponse",
    "executableCode",
    "codeExecutionResult",
    "thought",
    "thoughtSignature",
    "videoMetadata",
    "partMetadata",
    "mediaResolution",
}
# google.ai.generativelanguage Schema (OpenAPI subset) used by responseSchema.
SCHEMA = {
    "type",
    "format",
    "title",
    "description",
    "nullable",
    "enum",
    "maxItems",
    "minItems",
    "properties",
    "required",
    "minProperties",
    "maxProperties",
    "minLength",
    "maxLength",
    "pattern",
    "example",
    "anyOf",
    "propertyOrdering",
    "default",
    "items",
    "minimum",
    "maximum",
}
COUNT_TOKENS_TOP_LEVEL = {"contents", "generateContentRequest"}
BATCH_TOP_LEVEL = {"batch"}
BATCH = {"displayName", "inputConfig", "model", "priority", "webhookConfig"}
INPUT_CONFIG = {"requests", "fileName"}

STATUS_NAMES = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    408: "DEADLINE_EXCEEDED",
    409: "ABORTED",
    429: "RESOURCE_EXHAUSTED",
    499: "CANCELLED",
    500: "INTERNAL",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}
DEFAULT_MESSAGES = {
    "RESOURCE_EXHAUSTED": (
        "You exceeded your current quota, please check your plan and billing "
        "details. For more information on this error, head to: "
        "https://ai.google.dev/gemini-api/docs/rate-limits. Please retry in {delay}."
    ),
    "INTERNAL": "An internal error has occurred. Please retry or report in "
    "https://developers.generativeai.google/guide/troubleshooting",
    "UNAVAILABLE": "The model is overloaded. Please try again later.",
    "DEADLINE_EXCEEDED": "Deadline expired before operation could complete.",
}
MISSING_KEY_MESSAGE = (
    "Method doesn't allow unregistered callers (callers without established "
    "identity). Please use API Key or other form of API consumer identity to "
    "call this API."
)
BAD_KEY_MESSAGE = "API key not valid. Please pass a valid API key."
GARBAGE = "I think this is pretty good overall!!"
TRUNCATED = '{"reasoning": "The answer is", "sco'
DIRECTIVE_STATUSES = {
    "429": (429, "RESOURCE_EXHAUSTED"),
    "500": (500, "INTERNAL"),
    "529": (503, "UNAVAILABLE"),  # Google's "the model is overloaded"
    "401": (400, "INVALID_ARGUMENT"),  # Google refuses a key with a 400 API_KEY_INVALID
    "400": (400, "INVALID_ARGUMENT"),
}
"""The fault markers shared with the other stand-ins (``[[fake:429]]``, ...; see
:func:`judgeq.testing.fake_anthropic.parse_directives`) as Google answers each."""


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(w[:1].upper() + w[1:] for w in rest)


def _proto_path(path: str) -> str:
    """'generationConfig.thinkingConfig' -> 'generation_config.thinking_config'."""
    return ".".join(_snake(p) for p in path.split(".") if p)


class _BadRequest(Exception):
    def __init__(self, message: str, field: str = "", violation: bool = True) -> None:
        super().__init__(message)
        self.message = message
        self.field = field
        self.violation = violation


def _get(d: dict[str, Any], camel: str, default: Any = None) -> Any:
    if camel in d:
        return d[camel]
    return d.get(_snake(camel), default)


def _check_fields(obj: Any, allowed: set[str], where: str) -> None:
    if not isinstance(obj, dict):
        raise _BadRequest(f"Invalid value at '{_proto_path(where)}', expected an object.", where)
    allowed_all = allowed | {_snake(a) for a in allowed}
    for key in obj:
        if key not in allowed_all:
            at = f" at '{_proto_path(where)}'" if where else ""
            raise _BadRequest(
                f'Invalid JSON payload received. Unknown name "{key}"{at}: Cannot find field.', where
            )


# ---------------------------------------------------------------------------
# Deterministic value generation from a schema.
# ---------------------------------------------------------------------------
def _norm_type(t: Any) -> str | None:
    if isinstance(t, list):
        non_null = [x for x in t if str(x).lower() != "null"]
        t = non_null[0] if non_null else "null"
    return str(t).lower() if t is not None else None


def value_from_schema(schema: Any, root: dict[str, Any] | None = None, depth: int = 0) -> Any:
    """Build the simplest value that validates against `schema`.

    Understands both responseSchema (OpenAPI subset, TYPE names upper-case,
    snake/camel keys) and responseJsonSchema (JSON Schema incl. $ref/$defs).
    enums -> first value; integers/numbers -> minimum (or 0); strings -> short
    text padded to minLength; arrays -> max(minItems, 1) items; objects -> every
    listed property.
    """
    if root is None:
        root = schema if isinstance(schema, dict) else {}
    if depth > 32 or schema is True or not isinstance(schema, dict):
        return "x"
    if "$ref" in schema:
        ref = schema["$ref"]
        node: Any = root
        for part in ref.lstrip("#/").split("/"):
            node = node.get(part, {}) if isinstance(node, dict) else {}
        return value_from_schema(node, root, depth + 1)
    if "const" in schema:
        return schema["const"]
    if schema.get("enum"):
        return schema["enum"][0]
    for key in ("anyOf", "any_of", "oneOf", "allOf"):
        if schema.get(key):
            options = [
                s for s in schema[key] if not (isinstance(s, dict) and _norm_type(s.get("type")) == "null")
            ]
            return value_from_schema((options or schema[key])[0], root, depth + 1)
    t = _norm_type(schema.get("type"))
    if t is None:
        if "properties" in schema:
            t = "object"
        elif "items" in schema or "prefixItems" in schema:
            t = "array"
        else:
            return "x"
    if t == "null":
        return None
    if t == "boolean":
        return False
    if t in ("integer", "number"):
        lo = schema.get("minimum")
        xlo = schema.get("exclusiveMinimum")
        hi = schema.get("maximum")
        if lo is not None:
            v = lo
        elif xlo is not None:
            v = xlo + 1 if t == "integer" else xlo + 0.5
        elif hi is not None and hi < 0:
            v = hi
        else:
            v = 0
        if t == "integer":
            return int(float(v)) if float(v).is_integer() else int(float(v)) + 1
        return float(v)
    if t == "string":
        fmt = schema.get("format")
        if fmt == "date-time":
            return "2024-01-01T00:00:00Z"
        if fmt == "date":
            return "2024-01-01"
        if fmt == "time":
            return "00:00:00"
        if fmt == "email":
            return "a@example.com"
        if fmt in ("uri", "url"):
            return "https://example.com"
        if fmt == "uuid":
            return "00000000-0000-0000-0000-000000000000"
        text = "ok"
        min_len = int(_get(schema, "minLength", 0) or 0)
        max_len = _get(schema, "maxLength")
        if len(text) < min_len:
            text = text + "x" * (min_len - len(text))
        if max_len is not None:
            text = text[: int(max_len)]
        return text
    if t == "array":
        prefix = schema.get("prefixItems") or []
        out = [value_from_schema(s, root, depth + 1) for s in prefix]
        n = max(int(_get(schema, "minItems", 0) or 0), 1)
        items = schema.get("items")
        if isinstance(items, dict) or items is True:
            while len(out) < n:
                out.append(value_from_schema(items, root, depth + 1))
        return out
    if t == "object":
        props = schema.get("properties") or {}
        order = _get(schema, "propertyOrdering") or list(props)
        order = [k for k in order if k in props] + [k for k in props if k not in order]
        return {k: value_from_schema(props[k], root, depth + 1) for k in order}
    return "x"


# ---------------------------------------------------------------------------
# Request helpers.
# ---------------------------------------------------------------------------
def _texts(contents: Any) -> Iterable[str]:
    if isinstance(contents, dict):
        contents = [contents]
    for c in contents or []:
        if isinstance(c, dict):
            for p in c.get("parts") or []:
                if isinstance(p, dict) and isinstance(p.get("text"), str):
                    yield p["text"]


def approx_tokens(text: str) -> int:
    return max(1, (len(text) + 3) // 4) if text else 0


def _error_body(
    code: int, status: str, message: str, details: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    err: dict[str, Any] = {"code": code, "message": message, "status": status}
    if details:
        err["details"] = details
    return {"error": err}


def _rfc3339(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + f".{int((t % 1) * 1e6):06d}Z"


class FakeGeminiAPI:
    """Context-managed stand-in server. `.base_url` goes into HttpOptions(base_url=...)."""

    def __init__(
        self,
        *,
        models: Iterable[str] = ("gemini-2.5-flash", "gemini-2.5-pro", "gemini-2.5-flash-lite"),
        api_keys: Iterable[str] = ("k",),
        latency: float = 0.0,
        fail_with: Iterable[tuple[Any, ...]] = (),
        garbage: bool = False,
        retry_delay: str = "30s",
        responder: Callable[[str, dict[str, Any]], str] | None = None,
        timeout_sleep: float = 5.0,
        batch_polls_to_finish: int = 2,
    ) -> None:
        self.models = tuple(m.split("/", 1)[1] if m.startswith("models/") else m for m in models)
        self.api_keys = set(api_keys)
        self.latency = latency
        self.fail_with = list(fail_with)
        self.garbage = garbage
        self.retry_delay = retry_delay
        self.responder = responder  # (model, body) -> text; overrides schema generation
        self.timeout_sleep = timeout_sleep
        """Seconds a ``[[fake:slow]]`` request sleeps."""
        self.json_mode = True
        """False: the model has no JSON mode, as Google's older models: a request asking for JSON
        (``responseMimeType: application/json``, a response schema) is a 400 INVALID_ARGUMENT
        "JSON mode is not enabled for models/MODEL"."""
        self._attempts: dict[str, int] = {}
        self.batch_polls_to_finish = batch_polls_to_finish
        self.request_count = 0  # every HTTP request received
        self.requests: list[dict[str, Any]] = []  # parsed JSON bodies (POST), in order
        self.log: list[tuple[str, str, dict[str, str], str]] = []  # (method, path, headers, body)
        self.batches: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._host = "127.0.0.1"

    # -- lifecycle ---------------------------------------------------------
    def start(self, port: int = 0, host: str = "127.0.0.1") -> FakeGeminiAPI:
        """Bind ``host:port`` (port 0 = a free port) and serve in a daemon thread."""
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:
                fake._dispatch(self, "GET")

            def do_POST(self) -> None:
                fake._dispatch(self, "POST")

            def do_DELETE(self) -> None:
                fake._dispatch(self, "DELETE")

            def log_message(self, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer((host, port), Handler)
        self._host = host
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> FakeGeminiAPI:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    @property
    def base_url(self) -> str:
        assert self._server is not None, "start() first"
        host = "127.0.0.1" if self._host in ("", "0.0.0.0") else self._host
        return f"http://{host}:{self._server.server_address[1]}"

    # -- plumbing ----------------------------------------------------------
    def _send(
        self,
        h: BaseHTTPRequestHandler,
        code: int,
        payload: Any,
        content_type: str = "application/json; charset=UTF-8",
    ) -> None:
        raw = payload if isinstance(payload, bytes) else json.dumps(payload, indent=2).encode()
        try:
            h.send_response(code)
            h.send_header("Content-Type", content_type)
            h.send_header("Vary", "Origin, X-Origin, Referer")
            h.send_header("Content-Length", str(len(raw)))
            h.end_headers()
            h.wfile.write(raw)
        except (BrokenPipeError, ConnectionResetError):
            pass  # client gave up (e.g. its timeout fired during `latency`)

    def _err(
        self,
        h: BaseHTTPRequestHandler,
        code: int,
        message: str,
        status: str | None = None,
        details: list[dict[str, Any]] | None = None,
    ) -> None:
        self._send(h, code, _error_body(code, status or STATUS_NAMES.get(code, "UNKNOWN"), message, details))

    def _dispatch(self, h: BaseHTTPRequestHandler, method: str) -> None:
        n = int(h.headers.get("Content-Length") or 0)
        raw = h.rfile.read(n) if n else b""
        url = urlsplit(h.path)
        with self._lock:
            self.request_count += 1
            self.log.append((method, url.path, dict(h.headers), raw.decode("utf-8", "replace")))
        try:
            self._route(h, method, url, raw)
        except _BadRequest as e:
            details: list[dict[str, Any]] | None = None
            if e.violation:
                details = [
                    {
                        "@type": "type.googleapis.com/google.rpc.BadRequest",
                        "fieldViolations": [{"field": _proto_path(e.field), "description": e.message}],
                    }
                ]
            self._err(h, 400, e.message, "INVALID_ARGUMENT", details)

    def _auth(self, h: BaseHTTPRequestHandler, url: SplitResult) -> bool:
        key = h.headers.get("x-goog-api-key") or (parse_qs(url.query).get("key") or [""])[0]
        if not key:
            self._err(h, 403, MISSING_KEY_MESSAGE, "PERMISSION_DENIED")
            return False
        if key not in self.api_keys:
            self._refuse_key(h)
            return False
        return True

    def _refuse_key(self, h: BaseHTTPRequestHandler) -> None:
        """Google's answer to a key it does not know: 400 ``API_KEY_INVALID`` (not a 401)."""
        self._err(
            h,
            400,
            BAD_KEY_MESSAGE,
            "INVALID_ARGUMENT",
            [
                {
                    "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                    "reason": "API_KEY_INVALID",
                    "domain": "googleapis.com",
                    "metadata": {"service": "generativelanguage.googleapis.com"},
                },
                {
                    "@type": "type.googleapis.com/google.rpc.LocalizedMessage",
                    "locale": "en-US",
                    "message": BAD_KEY_MESSAGE,
                },
            ],
        )

    def _route(self, h: BaseHTTPRequestHandler, method: str, url: SplitResult, raw: bytes) -> None:
        m = re.fullmatch(r"/(v1|v1beta|v1alpha)/(.+)", url.path)
        if not m:
            # GFE answers unknown paths with an HTML 404; JSON is close enough here.
            return self._err(h, 404, f"Requested path {url.path} was not found.", "NOT_FOUND")
        version, rest = m.groups()
        if not self._auth(h, url):
            return
        body: dict[str, Any] = {}
        if method == "POST":
            try:
                body = json.loads(raw or b"{}")
            except json.JSONDecodeError as e:
                raise _BadRequest(f"Invalid JSON payload received. {e.msg}.", violation=False) from None
            if not isinstance(body, dict):
                raise _BadRequest("Invalid JSON payload received. Expected an object.", violation=False)
            with self._lock:
                self.requests.append(body)

        if method == "GET" and rest == "models":
            return self._list_models(h, url)
        mm = re.fullmatch(r"models/([^/:]+)(?::(\w+))?", rest)
        if mm:
            model, verb = mm.groups()
            if verb is None and method == "GET":
                return self._get_model(h, version, model)
            if model not in self.models:
                return self._err(
                    h,
                    404,
                    (
                        f"models/{model} is not found for API version {version}, or is not "
                        f"supported for {verb}. Call ListModels to see the list of available "
                        "models and their supported methods."
                    ),
                    "NOT_FOUND",
                )
            if method == "POST" and verb == "generateContent":
                return self._generate(h, model, body)
            if method == "POST" and verb == "countTokens":
                return self._count_tokens(h, body)
            if method == "POST" and verb == "batchGenerateContent":
                return self._batch_create(h, model, body)
        mb = re.fullmatch(r"batches/([^/:]+)(?::(\w+))?", rest)
        if mb:
            return self._batch(h, method, *mb.groups())
        return self._err(h, 404, f"Method not found: {method} {url.path}", "NOT_FOUND")

    # -- models ------------------------------------------------------------
    def _model_resource(self, model: str) -> dict[str, Any]:
        return {
            "name": f"models/{model}",
            "version": "001",
            "displayName": model.replace("-", " ").title(),
            "description": f"Fake {model}",
            "inputTokenLimit": 1048576,
            "outputTokenLimit": 65536,
            "supportedGenerationMethods": [
                "generateContent",
                "countTokens",
                "createCachedContent",
                "batchGenerateContent",
            ],
            "temperature": 1,
            "topP": 0.95,
            "topK": 64,
            "maxTemperature": 2,
            "thinking": True,
        }

    def _get_model(self, h: BaseHTTPRequestHandler, version: str, model: str) -> None:
        if model not in self.models:
            # Exact real wording for GET not verified; status/code are.
            return self._err(h, 404, f"models/{model} is not found for API version {version}.", "NOT_FOUND")
        self._send(h, 200, self._model_resource(model))

    def _list_models(self, h: BaseHTTPRequestHandler, url: SplitResult) -> None:
        self._send(h, 200, {"models": [self._model_resource(m) for m in self.models]})

    # -- validation --------------------------------------------------------
    def _validate_contents(self, contents: Any, where: str) -> None:
        if not isinstance(contents, list):
            contents = [contents]
        for i, c in enumerate(contents):
            _check_fields(c, CONTENT, f"{where}[{i}]")
            parts = c.get("parts")
            if not parts:
                raise _BadRequest("Request contains an invalid argument.", f"{where}[{i}].parts")
            for j, p in enumerate(parts):
                _check_fields(p, PART, f"{where}[{i}].parts[{j}]")

    def _validate_schema(self, s: Any, where: str) -> None:
        _check_fields(s, SCHEMA, where)
        t = _get(s, "type")
        if t is not None and str(t).upper() not in (
            "STRING",
            "NUMBER",
            "INTEGER",
            "BOOLEAN",
            "ARRAY",
            "OBJECT",
            "NULL",
            "TYPE_UNSPECIFIED",
        ):
            raise _BadRequest(
                f"Invalid value at '{_proto_path(where)}.type' (type.googleapis.com/"
                f'google.ai.generativelanguage.v1beta.Type), "{t}"',
                where + ".type",
            )
        for k, v in (_get(s, "properties") or {}).items():
            self._validate_schema(v, f"{where}.properties[{k}].value")
        if _get(s, "items") is not None:
            self._validate_schema(_get(s, "items"), f"{where}.items")
        for i, v in enumerate(_get(s, "anyOf") or []):
            self._validate_schema(v, f"{where}.anyOf[{i}]")

    def _validate_generate(self, body: dict[str, Any], where: str = "") -> dict[str, Any]:
        _check_fields(body, GENERATE_TOP_LEVEL, where)
        pre = f"{where}." if where else ""
        if not _get(body, "contents"):
            raise _BadRequest(
                "* GenerateContentRequest.contents: contents is not specified\n", violation=False
            )
        self._validate_contents(body["contents"], pre + "contents")
        si = _get(body, "systemInstruction")
        if si is not None:
            self._validate_contents(si, pre + "systemInstruction")
        gc = _get(body, "generationConfig") or {}
        _check_fields(gc, GENERATION_CONFIG, pre + "generationConfig")
        tc = _get(gc, "thinkingConfig")
        if tc is not None:
            _check_fields(tc, THINKING_CONFIG, pre + "generationConfig.thinkingConfig")
            budget = _get(tc, "thinkingBudget")
            if budget is not None and (not isinstance(budget, int) or budget < -1):
                raise _BadRequest(
                    f"Invalid value at 'generation_config.thinking_config."
                    f"thinking_budget' (TYPE_INT32), {budget}",
                    "generationConfig.thinkingConfig.thinkingBudget",
                )
        temp = _get(gc, "temperature")
        if temp is not None and not (0 <= temp <= 2):
            raise _BadRequest(
                "* GenerateContentRequest.generation_config.temperature: "
                "temperature must be between 0 and 2\n",
                violation=False,
            )
        mot = _get(gc, "maxOutputTokens")
        if mot is not None and (not isinstance(mot, int) or mot < 1):
            raise _BadRequest(
                "* GenerateContentRequest.generation_config.max_output_tokens: "
                "max_output_tokens must be positive.\n",
                violation=False,
            )
        rs, rjs = _get(gc, "responseSchema"), _get(gc, "responseJsonSchema")
        mime = _get(gc, "responseMimeType")
        if rs is not None and rjs is not None:
            raise _BadRequest("responseSchema and responseJsonSchema cannot both be set.", violation=False)
        if (rs is not None or rjs is not None) and mime not in ("application/json", "text/x.enum"):
            # Real API refuses a schema without a JSON mime type.
            raise _BadRequest(
                "* GenerateContentRequest.generation_config.response_mime_type: "
                "response_mime_type must be one of [application/json, "
                "text/x.enum] when response_schema is set.\n",
                violation=False,
            )
        if rs is not None:
            self._validate_schema(rs, pre + "generationConfig.responseSchema")
        if mime is not None and mime not in ("text/plain", "application/json", "text/x.enum"):
            raise _BadRequest(
                f"* GenerateContentRequest.generation_config.response_mime_type: "
                f"allowed mimetypes are `text/plain`, `application/json`, "
                f"`text/x.enum`, got {mime}.\n",
                violation=False,
            )
        return gc

    # -- generateContent ---------------------------------------------------
    def _answer(
        self, model: str, body: dict[str, Any], directives: Directives | None = None, fault: str | None = None
    ) -> dict[str, Any]:
        """The answer to a request: a JSON Schema's is generated as the other stand-ins do
        (deterministic in the request; ``[[fake:score=N]]``, ``[[fake:verdict=V]]`` honoured);
        the body faults ``garbage``, ``truncated``, ``refusal`` (finish ``SAFETY``, no text) and
        ``empty``."""
        gc = _get(body, "generationConfig") or {}
        user = "".join(_texts(_get(body, "contents")))
        found = directives or Directives()
        if self.responder is not None:
            text = self.responder(model, body)
        else:
            json_schema = _get(gc, "responseJsonSchema")
            schema = _get(gc, "responseSchema")
            mime = _get(gc, "responseMimeType")
            if isinstance(json_schema, dict):
                text = json.dumps(
                    generate_from_schema(json_schema, user, score=found.score, verdict=found.verdict)
                )
            elif schema is not None:
                value = value_from_schema(schema)
                text = value if mime == "text/x.enum" else json.dumps(value)
            else:  # no schema: a model following the request's words (a JSON verdict)
                text = json.dumps(
                    generate_from_schema(DEFAULT_SCHEMA, user, score=found.score, verdict=found.verdict)
                )
        text = {"garbage": GARBAGE, "truncated": TRUNCATED, "refusal": "", "empty": ""}.get(fault or "", text)
        prompt = user + "".join(_texts(_get(body, "systemInstruction")))
        finish = {"truncated": "MAX_TOKENS", "refusal": "SAFETY"}.get(fault or "", "STOP")
        out_tokens = approx_tokens(text)
        mot = _get(gc, "maxOutputTokens")
        if mot is not None and out_tokens > mot:
            text, finish, out_tokens = text[: mot * 4], "MAX_TOKENS", mot
        tc = _get(gc, "thinkingConfig") or {}
        budget = _get(tc, "thinkingBudget")
        thoughts = 0 if budget == 0 or (model.endswith("-lite") and budget is None) else 8
        usage = {
            "promptTokenCount": approx_tokens(prompt),
            "candidatesTokenCount": out_tokens,
            "totalTokenCount": approx_tokens(prompt) + out_tokens + thoughts,
            "promptTokensDetails": [{"modality": "TEXT", "tokenCount": approx_tokens(prompt)}],
        }
        if thoughts:
            usage["thoughtsTokenCount"] = thoughts
        # a blocked answer has no content (Google's finishReason SAFETY)
        content = {} if fault == "refusal" else {"content": {"parts": [{"text": text}], "role": "model"}}
        return {
            "candidates": [{**content, "finishReason": finish, "index": 0}],
            "usageMetadata": usage,
            "modelVersion": model,
            "responseId": uuid.uuid4().hex[:22],
        }

    def _inject_fault(self, h: BaseHTTPRequestHandler) -> bool:
        with self._lock:
            fault = self.fail_with.pop(0) if self.fail_with else None
        if fault is None:
            return False
        code, status, *msg = fault
        self._fault(h, code, status, self.retry_delay, msg[0] if msg else None)
        return True

    def _fault(
        self, h: BaseHTTPRequestHandler, code: int, status: str, delay: str, text: str | None = None
    ) -> None:
        """Google's error answer for ``status`` (a 429 with its quota and RetryInfo details)."""
        details: list[dict[str, Any]] | None = None
        if status == "RESOURCE_EXHAUSTED":
            details = [
                {
                    "@type": "type.googleapis.com/google.rpc.QuotaFailure",
                    "violations": [
                        {
                            "quotaMetric": (
                                "generativelanguage.googleapis.com/generate_content_free_tier_requests"
                            ),
                            "quotaId": "GenerateRequestsPerMinutePerProjectPerModel-FreeTier",
                            "quotaDimensions": {"location": "global", "model": "fake"},
                            "quotaValue": "10",
                        }
                    ],
                },
                {
                    "@type": "type.googleapis.com/google.rpc.Help",
                    "links": [
                        {
                            "description": "Learn more about Gemini API quotas",
                            "url": "https://ai.google.dev/gemini-api/docs/rate-limits",
                        }
                    ],
                },
                {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": delay},
            ]
        message = text or DEFAULT_MESSAGES.get(status, status).format(delay=delay)
        # No Retry-After header: the real Gemini API does not send one.
        self._err(h, code, message, status, details)

    def _generate(self, h: BaseHTTPRequestHandler, model: str, body: dict[str, Any]) -> None:
        gc = self._validate_generate(body)
        if not self.json_mode and _get(gc, "responseMimeType") == "application/json":
            raise _BadRequest(f"JSON mode is not enabled for models/{model}", violation=False)
        if self.latency:
            time.sleep(self.latency)
        if self._inject_fault(h):
            return
        if self.garbage:
            return self._send(
                h, 200, b"<html><body>upstream connect error</body></html>", "text/html; charset=UTF-8"
            )
        user = "".join(_texts(_get(body, "contents")))
        try:
            directives = parse_directives(user)
        except DirectiveError as exc:
            return self._err(h, 400, f"fake: {exc}", "INVALID_ARGUMENT")
        fault = directives.fault if self._attempt_fails(directives, model + "\n" + user) else None
        if fault in DIRECTIVE_STATUSES:
            code, status = DIRECTIVE_STATUSES[fault]
            if fault == "401":
                return self._refuse_key(h)
            delay = f"{directives.retry_after}s"
            return self._fault(h, code, status, delay)
        if fault == "slow":
            time.sleep(self.timeout_sleep)
        self._send(h, 200, self._answer(model, body, directives, fault))

    def _attempt_fails(self, directives: Directives, key: str) -> bool:
        """Whether this attempt of a request fails (``[[fake:500*2]]``: its first two)."""
        if directives.count is None:
            return True
        with self._lock:
            n = self._attempts[key] = self._attempts.get(key, 0) + 1
        return n <= directives.count

    def _count_tokens(self, h: BaseHTTPRequestHandler, body: dict[str, Any]) -> None:
        _check_fields(body, COUNT_TOKENS_TOP_LEVEL, "")
        if "generateContentRequest" in body or "generate_content_request" in body:
            req = _get(body, "generateContentRequest")
            self._validate_generate(req, "generateContentRequest")
            text = "".join(_texts(_get(req, "contents"))) + "".join(_texts(_get(req, "systemInstruction")))
        else:
            self._validate_contents(_get(body, "contents") or [], "contents")
            text = "".join(_texts(_get(body, "contents")))
        n = approx_tokens(text)
        self._send(h, 200, {"totalTokens": n, "promptTokensDetails": [{"modality": "TEXT", "tokenCount": n}]})

    # -- Batch Mode --------------------------------------------------------
    def _batch_create(self, h: BaseHTTPRequestHandler, model: str, body: dict[str, Any]) -> None:
        _check_fields(body, BATCH_TOP_LEVEL, "")
        batch = body.get("batch") or {}
        _check_fields(batch, BATCH, "batch")
        ic = _get(batch, "inputConfig") or {}
        _check_fields(ic, INPUT_CONFIG, "batch.inputConfig")
        if _get(ic, "fileName"):
            raise _BadRequest("File input is not supported by this fake.", violation=False)
        reqs = (ic.get("requests") or {}).get("requests") or []
        if not reqs:
            raise _BadRequest("* batch.input_config: requests must not be empty\n", violation=False)
        for i, r in enumerate(reqs):
            _check_fields(r, {"request", "metadata"}, f"batch.inputConfig.requests.requests[{i}]")
            gc = self._validate_generate(
                r.get("request") or {}, f"batch.inputConfig.requests.requests[{i}].request"
            )
            if not self.json_mode and _get(gc, "responseMimeType") == "application/json":
                raise _BadRequest(f"JSON mode is not enabled for models/{model}", violation=False)
        bid = uuid.uuid4().hex[:24]
        now = time.time()
        job = {
            "id": bid,
            "model": model,
            "requests": reqs,
            "polls": 0,
            "state": "BATCH_STATE_PENDING",
            "displayName": _get(batch, "displayName") or "",
            "createTime": now,
            "updateTime": now,
        }
        with self._lock:
            self.batches[bid] = job
        self._send(h, 200, self._batch_operation(job))

    def _batch_operation(self, job: dict[str, Any]) -> dict[str, Any]:
        meta: dict[str, Any] = {
            "@type": "type.googleapis.com/google.ai.generativelanguage.v1main.GenerateContentBatch",
            "model": f"models/{job['model']}",
            "displayName": job["displayName"],
            "createTime": _rfc3339(job["createTime"]),
            "updateTime": _rfc3339(job["updateTime"]),
            "batchStats": {"requestCount": str(len(job["requests"]))},
            "state": job["state"],
            "name": f"batches/{job['id']}",
        }
        op: dict[str, Any] = {"name": f"batches/{job['id']}", "metadata": meta}
        if job["state"] == "BATCH_STATE_SUCCEEDED":
            inlined = [self._batch_answer(job["model"], r) for r in job["requests"]]
            output = {"inlinedResponses": {"inlinedResponses": inlined}}
            meta["output"] = output
            meta["endTime"] = meta["updateTime"]
            meta["batchStats"].update({"successfulRequestCount": str(len(inlined))})
            op["done"] = True
            op["response"] = {
                "@type": "type.googleapis.com/google.ai.generativelanguage.v1main.GenerateContentBatchOutput",
                **output,
            }
        elif job["state"] in ("BATCH_STATE_CANCELLED", "BATCH_STATE_FAILED", "BATCH_STATE_EXPIRED"):
            op["done"] = True
        return op

    def _batch_answer(self, model: str, r: dict[str, Any]) -> dict[str, Any]:
        """One inlined response: the request's answer, or (``[[fake:500]]``, ``[[fake:429]]``,
        ...: the markers of a live call) its error, as Batch Mode gives a request's error."""
        body = r.get("request") or {}
        try:
            directives = parse_directives("".join(_texts(_get(body, "contents"))))
        except DirectiveError as exc:
            directives, item = Directives(), {"error": {"code": 400, "message": f"fake: {exc}"}}
        else:
            fault = directives.fault
            if fault in DIRECTIVE_STATUSES:
                code, status = DIRECTIVE_STATUSES[fault]
                item = {
                    "error": {
                        "code": code,
                        "message": DEFAULT_MESSAGES.get(status, status).format(delay="1s"),
                    }
                }
            else:
                item = {"response": self._answer(model, body, directives, fault)}
        if "metadata" in r:
            item["metadata"] = r["metadata"]
        return item

    def _batch(self, h: BaseHTTPRequestHandler, method: str, bid: str, verb: str | None) -> None:
        with self._lock:
            job = self.batches.get(bid)
        if job is None:
            return self._err(h, 404, f"Batch batches/{bid} not found.", "NOT_FOUND")
        if method == "GET" and verb is None:
            with self._lock:
                if job["state"] in ("BATCH_STATE_PENDING", "BATCH_STATE_RUNNING"):
                    job["polls"] += 1
                    job["state"] = (
                        "BATCH_STATE_SUCCEEDED"
                        if job["polls"] >= self.batch_polls_to_finish
                        else "BATCH_STATE_RUNNING"
                    )
                    job["updateTime"] = time.time()
            return self._send(h, 200, self._batch_operation(job))
        if method == "POST" and verb == "cancel":
            with self._lock:
                if job["state"] in ("BATCH_STATE_PENDING", "BATCH_STATE_RUNNING"):
                    job["state"] = "BATCH_STATE_CANCELLED"
                    job["updateTime"] = time.time()
            return self._send(h, 200, {})
        if method == "DELETE" and verb is None:
            with self._lock:
                self.batches.pop(bid, None)
            return self._send(h, 200, {})
        return self._err(h, 404, f"Method not found: {method} batches/{bid}:{verb}", "NOT_FOUND")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m judgeq.testing.fake_gemini",
        description="Fake Gemini Developer API server for judgeq tests and benchmarks.",
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 = a free port (default)")
    parser.add_argument("--latency", type=float, default=0.0, help="seconds per generateContent")
    parser.add_argument("--api-key", default="k", help="expected x-goog-api-key (or ?key=)")
    parser.add_argument("--models", default=None, help="comma-separated known models")
    parser.add_argument("--retry-delay", default="30s", help="RetryInfo.retryDelay on injected 429s")
    parser.add_argument(
        "--batch-polls", type=int, default=2, help="batches.get polls before a batch succeeds"
    )
    args = parser.parse_args(argv)

    models = [m.strip() for m in args.models.split(",") if m.strip()] if args.models else None
    kwargs: dict[str, Any] = {} if models is None else {"models": models}
    fake = FakeGeminiAPI(
        api_keys=(args.api_key,),
        latency=args.latency,
        retry_delay=args.retry_delay,
        batch_polls_to_finish=args.batch_polls,
        **kwargs,
    )
    return serve_until_signalled(fake, args.port, args.host)


if __name__ == "__main__":
    sys.exit(main())

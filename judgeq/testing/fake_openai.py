"""A stand-in OpenAI-compatible Chat Completions server on loopback, for tests, benchmarks and
trying ``--judge openai:MODEL`` offline: the real ``openai`` SDK talks to it.

    with FakeChatAPI(api_key="k") as fake:
        client = openai.OpenAI(api_key="k", base_url=fake.base_url + "/v1")

What it serves, as the OpenAI API documents it (and as compatible servers differ from it):

* ``POST /v1/chat/completions``: a verdict for the request. ``response_format``
  ``{"type": "json_schema", ...}`` is answered with JSON fitting the schema when
  ``structured`` is on, else refused with a 400 (as servers without structured output do);
  ``{"type": "json_object"}`` likewise with ``json_mode``; no response format gets the same JSON
  as free text. ``max_completion_tokens`` (or the older ``max_tokens``) bounds the answer: past
  it the text is cut and ``finish_reason`` is ``length``. ``usage`` has ``prompt_tokens``,
  ``completion_tokens`` and ``prompt_tokens_details.cached_tokens``.
* ``GET /v1/models`` (the list) and ``GET /v1/models/{id}`` (404 for an unknown model, or for
  every model with ``model_endpoint`` off: vLLM lists models but does not serve one).
* Rate limits (``rpm``: requests a minute, a token bucket): beyond it a 429 with
  ``retry-after``; with ``limit_headers`` every answer carries ``x-ratelimit-limit-requests``,
  ``x-ratelimit-remaining-requests`` and ``x-ratelimit-reset-requests``.
* The fault markers of the Anthropic stand-in (:func:`judgeq.testing.fake_anthropic.parse_directives`)
  in a user message: ``[[fake:429]]``, ``[[fake:500*2]]``, ``[[fake:401]]``, ``[[fake:400]]``,
  ``[[fake:garbage]]``, ``[[fake:truncated]]``, ``[[fake:refusal]]`` (the ``refusal`` field),
  ``[[fake:slow]]``, ``[[fake:score=3]]``, ``[[fake:verdict=B]]``; and ``[[fake:quota]]``, a
  429 ``insufficient_quota`` (an account out of credit), ``[[fake:404]]``.
"""

from __future__ import annotations

import hashlib
import json
import math
import socketserver
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

from judgeq.testing.fake_anthropic import DirectiveError, Directives, generate_from_schema, parse_directives

__all__ = ["FakeChatAPI"]

_QUOTA_RE = "[[fake:quota]]"
_NOT_FOUND_RE = "[[fake:404]]"
GARBAGE = "I think this is pretty good overall!!"
TRUNCATED = '{"reasoning": "The answer is", "sco'
REFUSAL = "I can't help with evaluating this content."
DEFAULT_SCHEMA = {
    "type": "object",
    "properties": {
        "reasoning": {"type": "string"},
        "score": {"type": "integer", "description": "from 1 to 10"},
    },
}


def _tokens(text: str) -> int:
    return math.ceil(len(text) / 4)


def _error(status: int, message: str, kind: str, code: str | None = None) -> tuple[int, dict[str, Any]]:
    return status, {"error": {"message": message, "type": kind, "param": None, "code": code}}


class FakeChatAPI:
    """The stand-in server (see the module docstring); ``start()`` or use it as a context."""

    def __init__(
        self,
        *,
        api_key: str | None = "test-key",
        models: tuple[str, ...] | None = None,
        structured: bool = True,
        json_mode: bool = True,
        model_endpoint: bool = True,
        latency: float = 0.0,
        rpm: int | None = None,
        limit_headers: bool = True,
        timeout_sleep: float = 5.0,
        seed: str = "",
    ) -> None:
        self.api_key, self.models, self.structured, self.json_mode = api_key, models, structured, json_mode
        self.model_endpoint, self.latency, self.rpm, self.limit_headers = (
            model_endpoint,
            latency,
            rpm,
            limit_headers,
        )
        self.timeout_sleep, self.seed = timeout_sleep, seed
        self._lock = threading.Lock()
        self._attempts: dict[str, int] = {}
        self._level = float(rpm or 0) / 60.0
        self._at = time.monotonic()
        self.requests: list[dict[str, Any]] = []
        self.by_status: dict[int, int] = {}
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    # -- life --------------------------------------------------------------------------
    def start(self, port: int = 0, host: str = "127.0.0.1") -> FakeChatAPI:
        self._server = _Server((host, port), self)
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.shutdown()
            server.server_close()

    def __enter__(self) -> FakeChatAPI:
        return self.start() if self._server is None else self

    def __exit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    @property
    def base_url(self) -> str:
        """The server's root; the OpenAI SDK's ``base_url`` is this plus ``/v1``."""
        assert self._server is not None, "not started"
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    @property
    def request_count(self) -> int:
        with self._lock:
            return len(self.requests)

    # -- requests ------------------------------------------------------------------------
    def handle(
        self, method: str, path: str, headers: Any, raw: bytes
    ) -> tuple[int, dict[str, Any], dict[str, str]]:
        path = path.split("?", 1)[0].rstrip("/")
        if self.api_key is not None and headers.get("Authorization") != f"Bearer {self.api_key}":
            return (
                *_error(401, "Incorrect API key provided.", "invalid_request_error", "invalid_api_key"),
                {},
            )
        if method == "GET" and path == "/v1/models":
            names = self.models or ("gpt-test",)
            return (
                200,
                {"object": "list", "data": [{"id": m, "object": "model", "owned_by": "fake"} for m in names]},
                {},
            )
        if method == "GET" and path.startswith("/v1/models/"):
            model = path.removeprefix("/v1/models/")
            if not self.model_endpoint or (self.models is not None and model not in self.models):
                return (
                    *_error(
                        404,
                        f"The model `{model}` does not exist.",
                        "invalid_request_error",
                        "model_not_found",
                    ),
                    {},
                )
            return 200, {"id": model, "object": "model", "owned_by": "fake"}, {}
        if method == "POST" and path == "/v1/chat/completions":
            try:
                body = json.loads(raw)
            except ValueError:
                return (*_error(400, "invalid JSON body", "invalid_request_error"), {})
            with self._lock:
                self.requests.append(body)
            status, payload, extra = self._complete(body)
            with self._lock:
                self.by_status[status] = self.by_status.get(status, 0) + 1
            return status, payload, extra
        return (*_error(404, f"Not found: {method} {path}", "invalid_request_error"), {})

    def _limit(self) -> tuple[float, dict[str, str]]:
        """Seconds to wait for a request (0: admitted, taken) and the rate-limit headers."""
        if not self.rpm:
            return 0.0, {}
        with self._lock:
            now = time.monotonic()
            cap = max(1.0, self.rpm / 60.0)
            self._level = min(cap, self._level + (now - self._at) * self.rpm / 60.0)
            self._at = now
            wait = 0.0 if self._level >= 1.0 else (1.0 - self._level) * 60.0 / self.rpm
            if wait == 0.0:
                self._level -= 1.0
            headers = {
                "x-ratelimit-limit-requests": str(self.rpm),
                "x-ratelimit-remaining-requests": str(max(0, int(self._level))),
                "x-ratelimit-reset-requests": f"{60.0 / self.rpm:.3f}s",
            }
        return wait, headers if self.limit_headers else {}

    def _attempt_fails(self, directives: Directives, key: str) -> bool:
        if directives.count is None:
            return True
        digest = hashlib.sha256(key.encode()).hexdigest()
        with self._lock:
            n = self._attempts[digest] = self._attempts.get(digest, 0) + 1
        return n <= directives.count

    def _complete(self, body: dict[str, Any]) -> tuple[int, dict[str, Any], dict[str, str]]:
        model = body.get("model")
        messages = body.get("messages")
        if not isinstance(model, str) or not isinstance(messages, list) or not messages:
            return (*_error(400, "model and messages are required", "invalid_request_error"), {})
        if self.models is not None and model not in self.models:
            return (
                *_error(
                    404, f"The model `{model}` does not exist.", "invalid_request_error", "model_not_found"
                ),
                {},
            )
        user = "\n".join(
            str(m.get("content")) for m in messages if isinstance(m, dict) and m.get("role") == "user"
        )
        fmt = body.get("response_format") or {}
        kind = fmt.get("type") if isinstance(fmt, dict) else None
        if kind == "json_schema" and not self.structured:
            return (
                *_error(
                    400,
                    "response_format 'json_schema' is not supported by this server",
                    "invalid_request_error",
                ),
                {},
            )
        if kind == "json_object" and not self.json_mode:
            return (
                *_error(
                    400,
                    "response_format 'json_object' is not supported by this server",
                    "invalid_request_error",
                ),
                {},
            )
        if _QUOTA_RE in user:
            return (
                *_error(429, "You exceeded your current quota.", "insufficient_quota", "insufficient_quota"),
                {},
            )
        if _NOT_FOUND_RE in user:
            return (
                *_error(
                    404, f"The model `{model}` does not exist.", "invalid_request_error", "model_not_found"
                ),
                {},
            )
        try:
            directives = parse_directives(user.replace(_QUOTA_RE, "").replace(_NOT_FOUND_RE, ""))
        except DirectiveError as exc:
            return (*_error(400, f"fake: {exc}", "invalid_request_error"), {})
        fault = (
            directives.fault if directives.fault is None or self._attempt_fails(directives, user) else None
        )
        if fault == "429":
            return (
                *_error(429, "Rate limit reached (fake).", "requests", "rate_limit_exceeded"),
                {"retry-after": directives.retry_after},
            )
        wait, headers = self._limit()
        if wait > 0:
            limited = _error(
                429, "Rate limit reached for requests (fake).", "requests", "rate_limit_exceeded"
            )
            return (*limited, {**headers, "retry-after": str(max(1, math.ceil(wait)))})
        if fault in ("400", "401", "500", "529"):
            status = {"400": 400, "401": 401, "500": 500, "529": 503}[fault]
            kinds = {
                400: "invalid_request_error",
                401: "invalid_request_error",
                500: "server_error",
                503: "server_error",
            }
            return (*_error(status, f"fake {fault}", kinds[status]), headers)
        if self.latency:
            time.sleep(self.latency)
        if fault == "slow":
            time.sleep(self.timeout_sleep)
        limit = body.get("max_completion_tokens") or body.get("max_tokens") or 4096
        finish, refusal = "stop", None
        if fault == "garbage":
            text: str | None = GARBAGE
        elif fault == "truncated":
            text, finish = TRUNCATED, "length"
        elif fault == "refusal":
            text, refusal = None, REFUSAL
        else:
            schema = DEFAULT_SCHEMA
            if kind == "json_schema":
                schema = (fmt.get("json_schema") or {}).get("schema") or DEFAULT_SCHEMA
            value = generate_from_schema(
                schema, user, seed=self.seed, score=directives.score, verdict=directives.verdict
            )
            text = json.dumps(value)
            if _tokens(text) > limit:
                text, finish = text[: limit * 4], "length"
        prompt = _tokens(json.dumps(messages))
        payload = {
            "id": f"chatcmpl-{uuid.uuid4().hex[:24]}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": text, "refusal": refusal},
                    "finish_reason": finish,
                    "logprobs": None,
                }
            ],
            "usage": {
                "prompt_tokens": prompt,
                "completion_tokens": _tokens(text or refusal or ""),
                "total_tokens": prompt + _tokens(text or refusal or ""),
                "prompt_tokens_details": {"cached_tokens": 0},
            },
        }
        return 200, payload, headers


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], fake: FakeChatAPI) -> None:
        self.fake = fake
        super().__init__(address, _Handler)

    def server_bind(self) -> None:  # no reverse DNS lookup (HTTPServer's getfqdn can stall)
        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = str(self.server_address[0]), int(self.server_address[1])


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self._reply("GET")

    def do_POST(self) -> None:
        self._reply("POST")

    def _reply(self, method: str) -> None:
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        try:
            status, payload, headers = self.server.fake.handle(method, self.path, self.headers, raw)
        except Exception as exc:  # a bug in the stand-in must not hang its client
            status, payload = _error(500, f"fake server error: {exc!r}", "server_error")
            headers = {}
        body = json.dumps(payload).encode()
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.send_header("x-request-id", f"req_{uuid.uuid4().hex[:16]}")
            for name, value in headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(body)
        except OSError:
            self.close_connection = True

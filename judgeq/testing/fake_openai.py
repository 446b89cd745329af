"""A stand-in OpenAI-compatible Chat Completions server on loopback, for tests, benchmarks and
trying ``--judge openai:MODEL`` offline: the real ``openai`` SDK talks to it.

    with FakeChatAPI(api_key="k") as fake:
        client = openai.OpenAI(api_key="k", base_url=fake.base_url + "/v1")

What it serves, as the OpenAI API documents it (and as compatible servers differ from it):

* ``POST /v1/chat/completions``: a verdict for the request. ``response_format``
  ``{"type": "json_schema", ...}`` is answered with JSON fitting the schema when
  ``structured`` is on, else refused with a 400 (as servers without structured output do); a
  ``json_schema`` without a valid ``name`` or ``schema``, or with ``strict: true`` and an object
  not closed (``additionalProperties: false``) or not requiring every property, is refused with
  the API's 400 (:func:`response_format_problem`), never answered;
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
* The Batch API: ``POST /v1/files`` (multipart, ``purpose=batch``), ``GET /v1/files/{id}/content``,
  ``DELETE /v1/files/{id}``; ``POST /v1/batches`` (``input_file_id``, ``endpoint``
  ``/v1/chat/completions``, ``completion_window`` ``24h``), ``GET /v1/batches/{id}``,
  ``POST /v1/batches/{id}/cancel``. The input file is validated as the API documents it (each
  line JSON with a unique ``custom_id``, ``method`` POST, ``url`` the batch's endpoint, one model
  for the whole file, at most 50,000 lines): a file that fails is a batch ``failed`` with its
  ``errors``. A batch is processed ``batch_latency`` seconds after its creation (or when the test
  calls :meth:`FakeChatAPI.finish_batches`), each line answered as ``/v1/chat/completions`` would
  (no rate limit, no latency); ``[[fake:batch=expire]]`` makes a line expire (``batch_expired``
  in the error file, the batch ``expired``), a canceled batch puts its lines there as
  ``batch_cancelled``. Answers go to the output file with their ``status_code``, errors
  (any status but 200) to the error file, as the API does; ``batch_request_count`` counts the
  lines of the batches created. With ``enqueued_token_limit``, a batch whose prompt tokens and
  those of the batches in progress pass it fails with ``token_limit_exceeded`` (no line).
"""

from __future__ import annotations

import contextlib
import email.parser
import email.policy
import hashlib
import json
import math
import re
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


_SCHEMA_NAME = re.compile(r"[a-zA-Z0-9_-]{1,64}")


def response_format_problem(spec: Any) -> str | None:
    """Why Chat Completions refuses a ``json_schema`` response format, as the API documents it
    (None: accepted): ``json_schema`` needs a ``name`` (``^[a-zA-Z0-9_-]{1,64}$``) and a
    ``schema`` object; with ``strict: true`` every object sets ``additionalProperties: false``
    and lists every one of its properties in ``required``."""
    if not isinstance(spec, dict):
        return "Missing required parameter: 'response_format.json_schema'."
    name = spec.get("name")
    if not isinstance(name, str) or not _SCHEMA_NAME.fullmatch(name):
        return (
            "Invalid 'response_format.json_schema.name': expected a string of up to 64 letters, "
            "digits, _ or -."
        )
    schema = spec.get("schema")
    if not isinstance(schema, dict):
        return "Invalid 'response_format.json_schema.schema': expected an object."
    if spec.get("strict") is True:
        return _strict_problem(schema, name, ())
    return None


def _strict_problem(node: Any, name: str, where: tuple[str, ...]) -> str | None:
    if not isinstance(node, dict):
        return None
    context = f"In context=({', '.join(repr(w) for w in where)}{',' if len(where) == 1 else ''})"
    if node.get("type") == "object":
        if node.get("additionalProperties") is not False:
            return (
                f"Invalid schema for response_format '{name}': {context}, 'additionalProperties' is "
                "required to be supplied and to be false."
            )
        props = node.get("properties") or {}
        missing = [k for k in props if k not in (node.get("required") or [])]
        if missing:
            return (
                f"Invalid schema for response_format '{name}': {context}, 'required' is required to be "
                f"supplied and to be an array including every key in properties. Missing '{missing[0]}'."
            )
        for key, sub in props.items():
            found = _strict_problem(sub, name, (*where, "properties", key))
            if found:
                return found
    if node.get("type") == "array":
        return _strict_problem(node.get("items"), name, (*where, "items"))
    for i, sub in enumerate(node.get("anyOf") or []):
        found = _strict_problem(sub, name, (*where, "anyOf", str(i)))
        if found:
            return found
    return None


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
        batch_latency: float = 0.5,
        enqueued_token_limit: int | None = None,
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
        self.batch_latency = batch_latency
        self.enqueued_token_limit = enqueued_token_limit
        """Prompt tokens the batches in progress may hold together (OpenAI's per-model enqueued
        token limit): a batch past it fails with ``token_limit_exceeded``."""
        self._files: dict[str, tuple[str, bytes]] = {}
        """file id -> (purpose, content)."""
        self._batches: dict[str, dict[str, Any]] = {}
        """batch id -> the Batch object, and its private ``_lines`` and ``_wake``."""
        self.batch_request_count = 0

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
        if path.startswith(("/v1/files", "/v1/batches")):
            return self._batch_api(method, path, headers, raw)
        return (*_error(404, f"Not found: {method} {path}", "invalid_request_error"), {})

    # -- the Batch API -------------------------------------------------------------------
    def batches(self) -> dict[str, str]:
        """``{batch id: status}`` of the batches created, oldest first."""
        with self._lock:
            return {b["id"]: b["status"] for b in self._batches.values()}

    def finish_batches(self) -> int:
        """Process every batch not yet processed now, whatever its latency; how many."""
        with self._lock:
            pending = [b for b in self._batches.values() if b["status"] in ("validating", "in_progress")]
            for batch in pending:
                batch["_wake"].set()
        return len(pending)

    def _batch_api(self, method: str, path: str, headers: Any, raw: bytes) -> tuple[int, Any, dict[str, str]]:
        parts = path.split("/")[2:]  # files | batches, then id, then action
        if parts == ["files"] and method == "POST":
            return self._upload(headers.get("Content-Type") or "", raw)
        if parts[0] == "files" and len(parts) >= 2:
            with self._lock:
                found = self._files.get(parts[1])
            if found is None:
                return (*_error(404, f"No such File object: {parts[1]}", "invalid_request_error"), {})
            if method == "GET" and parts[2:] == ["content"]:
                return 200, found[1], {"Content-Type": "application/octet-stream"}
            if method == "DELETE" and len(parts) == 2:
                with self._lock:
                    self._files.pop(parts[1], None)
                return 200, {"id": parts[1], "object": "file", "deleted": True}, {}
        if parts == ["batches"] and method == "POST":
            try:
                body = json.loads(raw)
            except ValueError:
                return (*_error(400, "invalid JSON body", "invalid_request_error"), {})
            return self._create_batch(body)
        if parts[0] == "batches" and len(parts) >= 2:
            with self._lock:
                batch = self._batches.get(parts[1])
                if batch is None:
                    return (
                        *_error(404, f"No batch found with id '{parts[1]}'.", "invalid_request_error"),
                        {},
                    )
                if method == "GET" and len(parts) == 2:
                    return 200, _public(batch), {}
                if method == "POST" and parts[2:] == ["cancel"]:
                    if batch["status"] not in ("validating", "in_progress", "finalizing"):
                        return (
                            *_error(
                                409,
                                f"Cannot cancel a batch with status '{batch['status']}'.",
                                "invalid_request_error",
                            ),
                            {},
                        )
                    batch["status"], batch["cancelling_at"] = "cancelling", int(time.time())
                    batch["_wake"].set()
                    return 200, _public(batch), {}
        return (*_error(404, f"Not found: {method} {path}", "invalid_request_error"), {})

    def _upload(self, content_type: str, raw: bytes) -> tuple[int, Any, dict[str, str]]:
        head = f"Content-Type: {content_type}\r\nMIME-Version: 1.0\r\n\r\n".encode()
        message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(head + raw)
        fields: dict[str, tuple[str | None, bytes]] = {}
        if message.is_multipart():
            for part in message.iter_parts():
                name = part.get_param("name", header="content-disposition")
                payload = part.get_payload(decode=True)
                if isinstance(name, str) and isinstance(payload, bytes):
                    fields[name] = (part.get_filename(), payload)
        if "file" not in fields or "purpose" not in fields:
            return (*_error(400, "'file' and 'purpose' are required", "invalid_request_error"), {})
        purpose = fields["purpose"][1].decode()
        file_id = f"file-{uuid.uuid4().hex[:24]}"
        with self._lock:
            self._files[file_id] = (purpose, fields["file"][1])
        return 200, _file_object(file_id, fields["file"][0] or "upload", purpose, len(fields["file"][1])), {}

    def _create_batch(self, body: dict[str, Any]) -> tuple[int, Any, dict[str, str]]:
        endpoint, window, file_id = (
            body.get("endpoint"),
            body.get("completion_window"),
            body.get("input_file_id"),
        )
        if endpoint not in ("/v1/chat/completions", "/v1/responses", "/v1/embeddings", "/v1/completions"):
            return (*_error(400, f"Invalid endpoint: {endpoint!r}", "invalid_request_error"), {})
        if window != "24h":
            return (*_error(400, "completion_window must be '24h'", "invalid_request_error"), {})
        with self._lock:
            found = self._files.get(str(file_id))
        if found is None:
            return (*_error(404, f"No such File object: {file_id}", "invalid_request_error"), {})
        if found[0] != "batch":
            return (*_error(400, "The input file must have purpose 'batch'.", "invalid_request_error"), {})
        lines, errors = _validate_batch_file(found[1], str(endpoint))
        if not errors and self.enqueued_token_limit is not None:
            tokens = sum(_tokens(json.dumps(line["body"].get("messages"))) for line in lines)
            with self._lock:
                held = sum(
                    _tokens(json.dumps(x["body"].get("messages")))
                    for b in self._batches.values()
                    if b["status"] in ("validating", "in_progress", "finalizing")
                    for x in b["_lines"]
                )
            if held + tokens > self.enqueued_token_limit:
                model = lines[0]["body"].get("model")
                errors = [
                    {
                        "code": "token_limit_exceeded",
                        "message": f"Enqueued token limit reached for {model} in organization org-fake. "
                        f"Limit: {self.enqueued_token_limit:,} enqueued tokens. Please try again once "
                        "some in_progress batches have been completed.",
                        "param": None,
                        "line": None,
                    }
                ]
        now = int(time.time())
        batch: dict[str, Any] = {
            "id": f"batch_{uuid.uuid4().hex[:24]}",
            "object": "batch",
            "endpoint": endpoint,
            "errors": {"object": "list", "data": errors} if errors else None,
            "input_file_id": file_id,
            "completion_window": "24h",
            "status": "failed" if errors else "validating",
            "output_file_id": None,
            "error_file_id": None,
            "created_at": now,
            "in_progress_at": None,
            "expires_at": now + 86_400,
            "failed_at": now if errors else None,
            "completed_at": None,
            "cancelling_at": None,
            "cancelled_at": None,
            "expired_at": None,
            "request_counts": {"total": 0 if errors else len(lines), "completed": 0, "failed": 0},
            "metadata": body.get("metadata"),
            "_lines": lines,
            "_wake": threading.Event(),
        }
        with self._lock:
            self._batches[batch["id"]] = batch
            if not errors:
                self.batch_request_count += len(lines)
                batch["status"] = "in_progress"
                batch["in_progress_at"] = now
        if not errors:
            threading.Thread(target=self._process_batch, args=(batch,), daemon=True).start()
        return 200, _public(batch), {}

    def _process_batch(self, batch: dict[str, Any]) -> None:
        batch["_wake"].wait(self.batch_latency)
        with self._lock:
            canceled = batch["status"] == "cancelling"
        out: list[str] = []
        err: list[str] = []
        expired = completed = 0
        for line in batch["_lines"]:
            cid, body = line["custom_id"], line["body"]
            rid = f"batch_req_{uuid.uuid4().hex[:24]}"
            code = "batch_cancelled" if canceled else None
            if code is None:
                with contextlib.suppress(DirectiveError):
                    user = "\n".join(
                        str(m.get("content")) for m in body.get("messages") or [] if isinstance(m, dict)
                    )
                    if (
                        parse_directives(user.replace(_QUOTA_RE, "").replace(_NOT_FOUND_RE, "")).batch
                        == "expire"
                    ):
                        code = "batch_expired"
            if code is not None:
                expired += code == "batch_expired"
                message = {
                    "batch_expired": "This request could not be executed before the window expired.",
                    "batch_cancelled": "This request was not executed because the batch was cancelled.",
                }[code]
                err.append(
                    json.dumps(
                        {
                            "id": rid,
                            "custom_id": cid,
                            "response": None,
                            "error": {"code": code, "message": message},
                        }
                    )
                )
                continue
            try:
                status, payload, _ = self._complete(body, live=False)
            except Exception as exc:  # a bug in the stand-in: an error line, as a 500
                status, payload = _error(500, f"fake server error: {exc!r}", "server_error")
            record = {
                "id": rid,
                "custom_id": cid,
                "response": {"status_code": status, "request_id": rid, "body": payload},
                "error": None,
            }
            (out if status == 200 else err).append(json.dumps(record))
            completed += status == 200
        with self._lock:
            for name, rows in (("output_file_id", out), ("error_file_id", err)):
                if rows:
                    file_id = f"file-{uuid.uuid4().hex[:24]}"
                    self._files[file_id] = ("batch_output", ("\n".join(rows) + "\n").encode())
                    batch[name] = file_id
            now = int(time.time())
            batch["request_counts"] = {
                "total": len(batch["_lines"]),
                "completed": completed,
                "failed": len(err),
            }
            if canceled:
                batch["status"], batch["cancelled_at"] = "cancelled", now
            elif expired:
                batch["status"], batch["expired_at"] = "expired", now
            else:
                batch["status"], batch["completed_at"] = "completed", now

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

    def _complete(
        self, body: dict[str, Any], *, live: bool = True
    ) -> tuple[int, dict[str, Any], dict[str, str]]:
        """The answer to one Chat Completions request (``live``: under the rate limit and the
        latency; a batch's lines are neither)."""
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
        if kind == "json_schema":
            problem = response_format_problem(fmt.get("json_schema"))
            if problem:
                return (*_error(400, problem, "invalid_request_error"), {})
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
        wait, headers = self._limit() if live else (0.0, {})
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
        if self.latency and live:
            time.sleep(self.latency)
        if fault == "slow" and live:
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


def _public(batch: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in batch.items() if not k.startswith("_")}


def _file_object(file_id: str, name: str, purpose: str, size: int) -> dict[str, Any]:
    return {
        "id": file_id,
        "object": "file",
        "bytes": size,
        "created_at": int(time.time()),
        "filename": name,
        "purpose": purpose,
        "status": "processed",
    }


MAX_BATCH_LINES = 50_000


def _validate_batch_file(content: bytes, endpoint: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The lines of a batch input file, and the errors that fail the batch (as the API lists them)."""
    lines: list[dict[str, Any]] = []
    errors: list[dict[str, Any]] = []
    seen: set[str] = set()
    models: set[str] = set()

    def fail(n: int, code: str, message: str, param: str | None = None) -> None:
        errors.append({"code": code, "message": message, "param": param, "line": n})

    for n, text in enumerate(content.decode(errors="replace").splitlines(), 1):
        if not text.strip():
            continue
        try:
            line = json.loads(text)
        except ValueError:
            fail(n, "invalid_json_line", "This line is not parseable as valid JSON.")
            continue
        if not isinstance(line, dict) or not isinstance(line.get("custom_id"), str):
            fail(n, "missing_required_parameter", "custom_id is required", "custom_id")
            continue
        if line["custom_id"] in seen:
            fail(
                n,
                "duplicate_custom_id",
                "The custom_id for this request is a duplicate of another request.",
                "custom_id",
            )
        seen.add(line["custom_id"])
        if line.get("method") != "POST":
            fail(n, "invalid_method", "The method must be POST.", "method")
        if line.get("url") != endpoint:
            fail(
                n,
                "mismatched_endpoint",
                f"The URL provided for this request does not match the batch endpoint {endpoint}.",
                "url",
            )
        body = line.get("body")
        if not isinstance(body, dict):
            fail(n, "missing_required_parameter", "body is required", "body")
            continue
        models.add(str(body.get("model")))
        lines.append(line)
    if len(models) > 1:
        fail(0, "mismatched_model", "All requests in a batch must use the same model.", "body.model")
    if len(lines) > MAX_BATCH_LINES:
        fail(0, "too_many_requests", f"A batch may hold at most {MAX_BATCH_LINES:,} requests.")
    if not lines and not errors:
        fail(0, "empty_file", "The input file is empty.")
    return lines, errors[:100]


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

    def do_DELETE(self) -> None:
        self._reply("DELETE")

    def _reply(self, method: str) -> None:
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        try:
            status, payload, headers = self.server.fake.handle(method, self.path, self.headers, raw)
        except Exception as exc:  # a bug in the stand-in must not hang its client
            status, payload = _error(500, f"fake server error: {exc!r}", "server_error")
            headers = {}
        body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        kind = headers.pop("Content-Type", "application/json")
        try:
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("x-request-id", f"req_{uuid.uuid4().hex[:16]}")
            for name, value in headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(body)
        except OSError:
            self.close_connection = True

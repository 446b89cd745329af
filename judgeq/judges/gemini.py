"""Google's Gemini API judge, through Google's own SDK (``google-genai``; it lives only here).

``gemini:MODEL`` calls the Gemini Developer API with ``GEMINI_API_KEY`` (or ``GOOGLE_API_KEY``,
which the SDK prefers when both are set), or Vertex AI when ``GOOGLE_GENAI_USE_VERTEXAI`` is
set (its project and location from ``GOOGLE_CLOUD_PROJECT`` / ``GOOGLE_CLOUD_LOCATION``, its
credential the application default credentials): the SDK reads them, judgeq never does more
than say whether one is set. ``GOOGLE_GEMINI_BASE_URL`` points the SDK at another server (a
gateway, the stand-in of :mod:`judgeq.testing.fake_gemini`).

What the SDK (3.6) does by default and this adapter changes: it makes one attempt (judgeq's
retry loop owns retries and the per-job deadline: nothing to turn off), has no timeout (each
call is given the attempt's), calls API version ``v1`` (pinned to ``v1beta``, where Batch Mode
and structured output's JSON Schema live) and follows continuation tokens on its own (off: one
attempt is one request). Its transport's timeouts and connection errors reach the caller
unwrapped (``httpx2``), a 200 that is not JSON as a ``JSONDecodeError``: each is translated.

The verdict is asked for as structured output (``responseJsonSchema``, the rubric's JSON
Schema as it is); thinking is off where a model allows it (Flash, Flash-Lite) and held to its
smallest budget where it does not (2.5 Pro), its tokens counted as output (Google bills them
so). Google sends no rate-limit headers and no ``retry-after``: a 429 ``RESOURCE_EXHAUSTED``
says how long to wait in its ``RetryInfo`` detail, which is the retry-after given to the
shared budget.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from judgeq.errors import JudgeAPIError, JudgeAuthError, JudgeError, JudgeTimeout
from judgeq.grading.request import JudgeRequest
from judgeq.judges.base import Formats, JudgeBase, JudgeReply, endpoint_of, server_of
from judgeq.judges.batches import BatchInfo, BatchItem, BatchJudge
from judgeq.judges.providers import JudgeSetup, LazyModule, Provider
from judgeq.judges.statuses import StatusRules, error_for
from judgeq.ratelimit.headers import parse_duration

if TYPE_CHECKING:
    from google import genai
    from google.genai import errors as genai_errors
    from google.genai import types as genai_types

    from judgeq.settings import Settings
else:  # imported by the first judge built, not by the provider's facts
    genai = LazyModule("google.genai")
    genai_errors = LazyModule("google.genai.errors")
    genai_types = LazyModule("google.genai.types")

__all__ = ["GEMINI_STATUSES", "PROVIDERS", "GeminiJudge", "GeminiProvider", "translate_error"]

API_VERSION = "v1beta"
DEFAULT_BASE_URL = "https://generativelanguage.googleapis.com"
KEY_VARIABLES = ("GOOGLE_API_KEY", "GEMINI_API_KEY")
"""The variables the SDK reads a key from, in its order (the first set wins)."""
VERTEX_VARIABLE = "GOOGLE_GENAI_USE_VERTEXAI"
NO_KEY = "no Gemini API key: set GEMINI_API_KEY (or GOOGLE_API_KEY)"
FORMATS = ("json_schema", "text")
"""The verdict's formats, best first (:class:`~judgeq.judges.base.Formats`): structured output
(``response_mime_type`` JSON with ``response_json_schema``), then the request's own words alone
(a model without JSON mode: Google answers 400 "JSON mode is not enabled for models/...")."""
FORMAT_WORDS = ("json mode is not enabled",)
"""What a 400 says when the model refuses JSON output itself (a complaint about the schema's
content is not a refusal: it stays the job's null)."""
PRO_MIN_THINKING = 128
"""Gemini 2.5 Pro cannot stop thinking; the smallest budget it takes."""

GEMINI_STATUSES = StatusRules(
    overloaded=frozenset({503}),
    auth_codes=frozenset({"API_KEY_INVALID", "API_KEY_SERVICE_BLOCKED"}),
    timeouts=frozenset({504}),
)
"""Google's APIs: a refused key is a 400 with the reason ``API_KEY_INVALID`` (a missing one a
403); 503 ``UNAVAILABLE`` is "the model is overloaded"; 504 ``DEADLINE_EXCEEDED`` the server's
own timeout."""

FINISH = {
    "STOP": "end_turn",
    "MAX_TOKENS": "max_tokens",
    "SAFETY": "refusal",
    "RECITATION": "refusal",
    "PROHIBITED_CONTENT": "refusal",
    "BLOCKLIST": "refusal",
    "SPII": "refusal",
}
"""Gemini's finish reasons in the verdict parser's words (others are passed on as they are)."""


def _vertex() -> bool:
    return os.environ.get(VERTEX_VARIABLE, "").strip().lower() in ("1", "true", "yes")


def _key() -> str | None:
    """The key the SDK would send (``GOOGLE_API_KEY`` first), None for none or a blank one."""
    for name in KEY_VARIABLES:
        value = (os.environ.get(name) or "").strip()
        if value:
            return value
    return None


def _details(exc: Any) -> list[dict[str, Any]]:
    """The ``google.rpc`` details of an API error's body."""
    body = exc.details if isinstance(getattr(exc, "details", None), dict) else {}
    error = body.get("error") if isinstance(body.get("error"), dict) else {}
    details = error.get("details") if isinstance(error, dict) else None
    return [d for d in details if isinstance(d, dict)] if isinstance(details, list) else []


def _retry_delay(details: list[dict[str, Any]]) -> float | None:
    """``RetryInfo.retryDelay`` (a protobuf duration, ``"30s"``, ``"45.8s"``) in seconds."""
    for detail in details:
        if str(detail.get("@type", "")).endswith("google.rpc.RetryInfo"):
            return parse_duration(str(detail.get("retryDelay", "")))
    return None


def _reason(details: list[dict[str, Any]]) -> str:
    """``ErrorInfo.reason`` (``API_KEY_INVALID``), "" when the body gives none."""
    for detail in details:
        if str(detail.get("@type", "")).endswith("google.rpc.ErrorInfo"):
            return str(detail.get("reason") or "")
    return ""


def translate_error(exc: Exception) -> JudgeError:
    """Map an SDK (or its transport's) exception onto judgeq's exception tree."""
    import httpx2

    if isinstance(exc, httpx2.TimeoutException):
        return JudgeTimeout("the judge did not answer within the attempt timeout")
    if isinstance(exc, httpx2.TransportError):
        return JudgeAPIError(f"connection to the judge failed: {type(exc).__name__}")
    if isinstance(exc, genai_errors.APIError):
        details = _details(exc)
        status = f"{exc.status}: " if exc.status else ""
        message = f"{type(exc).__name__}: {status}{str(exc.message or '')[:300]}"
        return error_for(
            int(exc.code or 500),
            message,
            code=_reason(details),
            retry_after=_retry_delay(details),
            rules=GEMINI_STATUSES,
        )
    if isinstance(exc, json.JSONDecodeError):
        return JudgeAPIError("the judge's answer is not JSON (check the server's URL)")
    if isinstance(exc, ValueError) and "API key" in str(exc):
        return JudgeAuthError(NO_KEY)
    return JudgeAPIError(f"unexpected judge failure: {type(exc).__name__}")


def _http(timeout: float | None = None) -> genai_types.HttpOptionsDict:
    """A call's HTTP options: the Developer API's version (Vertex AI keeps the SDK's own), and
    the attempt's timeout (the SDK's is in ms)."""
    options: genai_types.HttpOptionsDict = {} if _vertex() else {"api_version": API_VERSION}
    if timeout is not None:
        options["timeout"] = max(1, round(timeout * 1000))
    return options


def _base_url() -> str:
    """The server the SDK calls: its variable's (``GOOGLE_GEMINI_BASE_URL``, Vertex AI's
    ``GOOGLE_VERTEX_BASE_URL``), else the API's own."""
    if _vertex():
        location = os.environ.get("GOOGLE_CLOUD_LOCATION") or "global"
        host = (
            "aiplatform.googleapis.com" if location == "global" else f"{location}-aiplatform.googleapis.com"
        )
        return os.environ.get("GOOGLE_VERTEX_BASE_URL") or f"https://{host}"
    return os.environ.get("GOOGLE_GEMINI_BASE_URL") or DEFAULT_BASE_URL


def thinking_budget(model: str) -> int:
    """No thinking where the model allows it, else its smallest budget (2.5 Pro)."""
    return PRO_MIN_THINKING if "pro" in model.split("/")[-1] else 0


class GeminiJudge(JudgeBase):
    """A :class:`~judgeq.Judge` backed by ``genai.Client().models.generate_content``."""

    provider = "gemini"

    def __init__(self, model: str, *, client: genai.Client | None = None) -> None:
        self.model = model
        self._formats = Formats(FORMATS, FORMAT_WORDS, f"gemini judge {model}")
        self._server = _base_url()  # the SDK reads it once, when its client is built
        self._client: genai.Client | None = client
        if client is None and (_vertex() or _key() is not None):  # a blank key is none
            try:
                # kept: the SDK closes its HTTP client when a Client is collected
                # (vertexai given, not left to the SDK's reading of GOOGLE_GENAI_USE_VERTEXAI: only
                # then does it take GOOGLE_VERTEX_BASE_URL, google-genai 3.6 client.py)
                self._client = genai.Client(
                    vertexai=True if _vertex() else None,
                    api_key=None if _vertex() else _key(),
                    http_options=_http(),
                )
            except Exception:  # Vertex AI without application default credentials (google.auth)
                self._client = None

    @property
    def has_credentials(self) -> bool:
        return self._client is not None

    @property
    def endpoint(self) -> str | None:
        """The API's host (and port), never a credential: provenance in the report."""
        return endpoint_of(self._server)

    @property
    def cache_identity(self) -> str:
        """Provider, model and server (its host and path, never a credential)."""
        return f"{self.provider}:{self.model}@{server_of(self._server)}"

    @property
    def response_format(self) -> str:
        """How the verdict is asked for now: structured output (a response schema), or the
        request's words alone after the server refused it (:data:`FORMATS`)."""
        return self._formats.current

    def config(
        self, request: JudgeRequest, timeout: float | None, shape: str | None = None
    ) -> genai_types.GenerateContentConfigDict:
        """The ``GenerateContentConfig`` of a request (as the SDK's keyword names), in ``shape``
        (default: the format in use)."""
        budget = thinking_budget(self.model)
        config: genai_types.GenerateContentConfigDict = {
            "system_instruction": "\n\n".join(request.system),
            # thinking tokens are output tokens: the budget comes on top of the verdict's
            "max_output_tokens": request.max_tokens + budget,
            "thinking_config": {"thinking_budget": budget},
            "automatic_continuation": False,
        }
        if (shape or self.response_format) == "json_schema":
            config["response_mime_type"] = "application/json"
            config["response_json_schema"] = request.output_schema
        if timeout is not None:
            config["http_options"] = _http(timeout)
        return config

    def complete(self, request: JudgeRequest, *, timeout: float) -> JudgeReply:
        if self._client is None:
            raise JudgeAuthError(NO_KEY)
        while True:
            shape = self._formats.current
            try:
                response = self._client.models.generate_content(
                    model=self.model, contents=request.user, config=self.config(request, timeout, shape)
                )
                break
            except Exception as exc:  # the SDK's errors, its transport's, a body that is not JSON
                error = translate_error(exc)
                if not self._formats.fall_back(shape, error):  # else: refused, the next format
                    raise error from None
        return reply_from_response(response, shape)

    # -- Batch Mode as the batch lane (judgeq.judges.batches.BatchJudge) -----------------------
    def as_batch_judge(self) -> BatchJudge | None:
        return self

    batch_label = "Gemini batch"
    batch_max_bytes: int | None = 19_000_000
    """Batch Mode takes inlined requests of up to 20 MB in all (a file beyond: not used)."""

    def _batches(self) -> Any:
        if self._client is None:
            raise JudgeAuthError(NO_KEY)
        return self._client.batches

    def _sdk(self, call: Any, *args: Any, **kwargs: Any) -> Any:
        """Call a Batch Mode method of the SDK, its errors translated."""
        try:
            return call(*args, config={"http_options": _http(BATCH_TIMEOUT)}, **kwargs)
        except Exception as exc:
            raise translate_error(exc) from None

    def batch_params(self, request: JudgeRequest) -> dict[str, Any]:
        """One inlined request of a batch: the live call's request (no timeout: a batch's)."""
        config = dict(self.config(request, None))
        config.pop("automatic_continuation", None)  # (the SDK's own loop: not a request field)
        return {"contents": request.user, "config": config}

    def batch_create(self, requests: list[tuple[str, dict[str, Any]]]) -> BatchInfo:
        """One Batch Mode job of inlined requests, each keyed by its custom id (``metadata``)."""
        src = [{**params, "metadata": {"key": cid}} for cid, params in requests]
        return _batch_info(self._sdk(self._batches().create, model=self.model, src=src))

    def batch_retrieve(self, batch_id: str) -> BatchInfo:
        return _batch_info(self._sdk(self._batches().get, name=batch_id))

    def batch_cancel(self, batch_id: str) -> BatchInfo:
        self._sdk(self._batches().cancel, name=batch_id)
        return self.batch_retrieve(batch_id)

    def batch_results(self, batch_id: str) -> Iterator[BatchItem]:
        """The answers of an ended job by custom id: a response is a reply, an error its null
        (by its status code, as a live call's); a job that expired or was canceled before its
        requests were answered gives each the error that stands for that."""
        job = self._sdk(self._batches().get, name=batch_id)
        state = _state(job)
        dest = getattr(job, "dest", None)
        answers = (getattr(dest, "inlined_responses", None) or []) if dest is not None else []
        if not answers and state in ("JOB_STATE_EXPIRED", "JOB_STATE_CANCELLED", "JOB_STATE_FAILED"):
            return  # (the lane gives every request without a result its job's reason)
        for answer in answers:
            cid = str((getattr(answer, "metadata", None) or {}).get("key", ""))
            error = getattr(answer, "error", None)
            if getattr(answer, "response", None) is not None and error is None:
                yield BatchItem(cid, reply=reply_from_response(answer.response, self.response_format))
            else:
                code = int(getattr(error, "code", 0) or 500)
                message = f"{self.batch_label}: {str(getattr(error, 'message', '') or 'no message')[:300]}"
                yield BatchItem(cid, error=error_for(code, message, rules=GEMINI_STATUSES))

    def check(self, *, timeout: float = 30.0) -> None:
        """Prove the key and the model (the model's record: no tokens); raises JudgeError."""
        if self._client is None:
            raise JudgeAuthError(NO_KEY)
        try:
            self._client.models.get(model=self.model, config={"http_options": _http(timeout)})
        except Exception as exc:
            raise translate_error(exc) from None


BATCH_TIMEOUT = 600.0
"""Seconds for one Batch Mode call (creating a job uploads its inlined requests)."""
BATCH_STATES = {
    "JOB_STATE_QUEUED": "in_progress",
    "JOB_STATE_PENDING": "in_progress",
    "JOB_STATE_RUNNING": "in_progress",
    "JOB_STATE_PAUSED": "in_progress",
    "JOB_STATE_UPDATING": "in_progress",
    "JOB_STATE_CANCELLING": "canceling",
    "JOB_STATE_SUCCEEDED": "ended",
    "JOB_STATE_FAILED": "ended",
    "JOB_STATE_CANCELLED": "ended",
    "JOB_STATE_EXPIRED": "ended",
}
"""Batch Mode's job states in the batch lane's words."""


def _state(job: Any) -> str:
    state = getattr(job, "state", None)
    return str(getattr(state, "value", state) or "")


def _batch_info(job: Any) -> BatchInfo:
    """A Batch Mode job in the lane's words; a failed job's reason given to each of its jobs."""
    state = _state(job)
    error = getattr(job, "error", None)
    failed = None
    if state in ("JOB_STATE_FAILED", "JOB_STATE_EXPIRED", "JOB_STATE_CANCELLED"):
        # (Batch Mode gives back no request of a job that ended so: each is an api_error null
        # naming why)
        failed = (
            f"{state.removeprefix('JOB_STATE_').lower()}: {getattr(error, 'message', None) or 'no answers'}"
        )
    return BatchInfo(str(job.name), BATCH_STATES.get(state, "in_progress"), {}, error=failed)


def reply_from_response(response: Any, response_format: str = "json_schema") -> JudgeReply:
    """A ``GenerateContentResponse`` as a :class:`JudgeReply`: its text (thoughts left out),
    finish reason, usage (cached prompt tokens apart; thoughts as output) and model version."""
    candidates = getattr(response, "candidates", None) or []
    finish = getattr(candidates[0], "finish_reason", None) if candidates else None
    name = str(getattr(finish, "name", finish) or "") or None
    usage = getattr(response, "usage_metadata", None)

    def count(field: str) -> int:
        return int(getattr(usage, field, 0) or 0) if usage is not None else 0

    prompt, cached = count("prompt_token_count"), count("cached_content_token_count")
    return JudgeReply(
        text=response.text or "",
        stop_reason=FINISH.get(name or "", name),
        input_tokens=max(0, prompt - cached),
        output_tokens=count("candidates_token_count") + count("thoughts_token_count"),
        cache_read_input_tokens=cached,
        limit_input_tokens=prompt,  # Google's token quotas count the whole prompt
        model=getattr(response, "model_version", None),
        response_format=response_format,
    )


class GeminiProvider(Provider):
    """Google's Gemini, through ``google-genai``: the Developer API with a key, or Vertex AI."""

    name = "gemini"
    family = "google"
    model_prefixes = ("gemini", "gemma")
    key_variable = "GEMINI_API_KEY"
    key_name = "a Gemini API key"
    served_by_key = True
    serves_text = "any Gemini model"
    serve_needs = "GEMINI_API_KEY set (or Vertex AI's application default credentials)"
    plural = "Gemini judges"
    batch_api = "Gemini's Batch Mode"
    lane_name = "Batch Mode lane"
    batch_one_model = True

    def build(self, model: str, setup: JudgeSetup) -> GeminiJudge:
        return GeminiJudge(model)

    def has_credentials(self, settings: Settings) -> bool:
        """A key (``GOOGLE_API_KEY`` or ``GEMINI_API_KEY``, not blank), or Vertex AI chosen
        (its application default credentials are resolved by the SDK at the first call)."""
        return _key() is not None or _vertex()

    def budget_secret(self, settings: Settings) -> str | None:
        """The key, or the Vertex AI project (its quotas are the project's), and the server."""
        where = os.environ.get("GOOGLE_GEMINI_BASE_URL", "")
        if _vertex() and _key() is None:
            return "vertex:" + os.environ.get("GOOGLE_CLOUD_PROJECT", "") + "@" + where
        return (_key() or "") + "@" + where


PROVIDERS = (GeminiProvider(),)

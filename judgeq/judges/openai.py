"""The OpenAI judge (``--judge openai:MODEL``): Chat Completions through the official ``openai``
SDK, which reads ``OPENAI_API_KEY``, ``OPENAI_BASE_URL``, ``OPENAI_ORG_ID`` and
``OPENAI_PROJECT_ID`` itself.

The verdict is asked for as structured output (a JSON schema response format); a server that
refuses that shape (400) is asked once with JSON mode, then with free text, and the shape that
worked is kept for this judge (every later call of the process uses it); the verdict parser
reads all three. ``max_completion_tokens`` (not ``max_tokens``) and no sampling parameters, so
reasoning models work.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from judgeq.errors import (
    ConfigError,
    JudgeAPIError,
    JudgeAuthError,
    JudgeError,
    JudgeInvalidRequest,
    JudgeModelNotFound,
    JudgeTimeout,
)
from judgeq.grading.request import JudgeRequest
from judgeq.judges.base import (
    Formats,
    JudgeBase,
    JudgeReply,
    endpoint_of,
    retry_after_seconds,
    served_model,
    server_of,
)
from judgeq.judges.batches import BatchInfo, BatchItem, BatchJudge, batch_item_error
from judgeq.judges.providers import JudgeSetup, LazyModule, Provider
from judgeq.judges.statuses import StatusRules, error_for

if TYPE_CHECKING:
    import openai

    from judgeq.settings import Settings
else:
    openai = LazyModule("openai")  # imported by the first judge built, not by the provider's facts

__all__ = [
    "COMPATIBLE_KEY",
    "FORMATS",
    "LIMIT_HEADERS",
    "NO_KEY",
    "OPENAI_STATUSES",
    "OpenAICompatibleJudge",
    "OpenAIJudge",
    "split_endpoint",
    "translate_error",
    "url_allowed",
]

NO_KEY = "no OpenAI API key: set OPENAI_API_KEY"
FORMATS = ("json_schema", "json_object", "text")
"""The response formats tried, in order (see the module docstring)."""
FORMAT_WORDS = ("response_format", "json_schema", "json_object")
"""What a server's 400 (or 422) names when it refuses the response format (:class:`Formats`)."""
LIMIT_HEADERS = ("x-ratelimit-",)
"""Where OpenAI's API states its limits (https://platform.openai.com/docs/guides/rate-limits), as
many servers that speak it do (Groq, gateways: :mod:`judgeq.ratelimit.headers` reads their
windows)."""
RATE_HEADERS = (*LIMIT_HEADERS, "retry-after")
BATCH_TIMEOUT = 600.0
"""Seconds for one Batch API call (uploading a batch's input file: up to 200 MB)."""
BATCH_ENDPOINT = "/v1/chat/completions"
BATCH_STATES = {
    "validating": "in_progress",
    "in_progress": "in_progress",
    "finalizing": "in_progress",
    "cancelling": "canceling",
    "completed": "ended",
    "expired": "ended",
    "cancelled": "ended",
    "failed": "ended",
}
"""The Batch API's states in the batch lane's words (``in_progress``, ``canceling``, ``ended``)."""
BATCH_ITEM_ERRORS = {"batch_expired": "expired", "batch_cancelled": "canceled"}
BATCH_RETRYABLE = frozenset({"token_limit_exceeded", "request_limit_exceeded", "rate_limit_exceeded"})
"""Codes of a failed batch that say "not now" (the organisation's enqueued-token limit for the
model, a limit on batches): its jobs are sent again later."""
OPENAI_STATUSES = StatusRules(
    overloaded=frozenset({503, 529}), billing_codes=frozenset({"insufficient_quota"})
)
"""What OpenAI's API (and the servers that speak it) says its own way (:mod:`.statuses`): 503
when the engine is overloaded; a spent quota is a 429 with code ``insufficient_quota``."""


def _message(exc: openai.APIStatusError) -> str:
    body = exc.body if isinstance(exc.body, dict) else {}
    error = body.get("error", body) if isinstance(body, dict) else {}
    text = error.get("message") if isinstance(error, dict) else None
    return f"{type(exc).__name__}: {text or exc.message}"[:500]


def _code(exc: openai.APIStatusError) -> str:
    body = exc.body if isinstance(exc.body, dict) else {}
    error = body.get("error", body) if isinstance(body, dict) else {}
    return str(error.get("code") or error.get("type") or "") if isinstance(error, dict) else ""


def rate_limit_headers(headers: Any) -> dict[str, str]:
    """The answer's rate-limit headers (``x-ratelimit-*``, ``retry-after``)."""
    return {k.lower(): v for k, v in headers.items() if k.lower().startswith(RATE_HEADERS)}


def translate_error(exc: Exception) -> JudgeError:
    """Map an SDK exception onto judgeq's exception tree (the null reasons)."""
    if isinstance(exc, openai.APITimeoutError):
        return JudgeTimeout("the judge did not answer within the attempt timeout")
    if isinstance(exc, openai.APIConnectionError):
        return JudgeAPIError(f"connection to the judge failed: {type(exc).__name__}")
    if isinstance(exc, openai.APIStatusError):
        headers = exc.response.headers
        retry_after = retry_after_seconds(headers)
        error = error_for(
            exc.status_code, _message(exc), code=_code(exc), retry_after=retry_after, rules=OPENAI_STATUSES
        )
        error.headers = rate_limit_headers(headers)
        return error
    if isinstance(exc, openai.OpenAIError):
        return (
            JudgeAuthError(NO_KEY) if "api_key" in str(exc) else JudgeAPIError(f"{type(exc).__name__}: {exc}")
        )
    return JudgeAPIError(f"unexpected judge failure: {type(exc).__name__}")


class OpenAIJudge(JudgeBase):
    """A :class:`~judgeq.Judge` backed by ``openai.OpenAI().chat.completions.create``."""

    provider = "openai"

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        client: openai.OpenAI | None = None,
    ) -> None:
        self.model = model
        self._base_url = base_url
        self.wire_model = model
        """The model name sent to the server (an OpenAI-compatible judge's ``model`` also names
        the server)."""
        self._client: openai.OpenAI | None
        try:
            self._client = client or openai.OpenAI(api_key=api_key, base_url=base_url, max_retries=0)
        except openai.OpenAIError:  # no key: the SDK refuses to build a client
            self._client = None
        if self._client is not None and client is None and not str(self._client.api_key or "").strip():
            self._client = None
        self._formats = Formats(FORMATS, FORMAT_WORDS, f"{self.provider} judge")

    @property
    def has_credentials(self) -> bool:
        return self._client is not None

    @property
    def cache_identity(self) -> str:
        """What names this judge in the reply cache: provider, model and server (its host and
        path, never a credential)."""
        # without a credential (a dry run on a machine with no key) the server the SDK would call
        url = (
            self._client.base_url
            if self._client is not None
            else self._base_url or os.environ.get("OPENAI_BASE_URL", "https://api.openai.com/v1")
        )
        return f"{self.provider}:{self.wire_model}@{server_of(url)}"

    @property
    def endpoint(self) -> str | None:
        """The server's host (and port), never a credential: provenance in the report."""
        return endpoint_of(self._client.base_url) if self._client is not None else None

    @property
    def response_format(self) -> str:
        """The response format in use (``json_schema``, ``json_object`` or ``text``)."""
        return self._formats.current

    def _kwargs(self, request: JudgeRequest, shape: str) -> dict[str, Any]:
        messages = [
            {"role": "system", "content": "\n\n".join(request.system)},
            {"role": "user", "content": request.user},
        ]
        kwargs: dict[str, Any] = {
            "model": self.wire_model,
            "messages": messages,
            "max_completion_tokens": request.max_tokens,
        }
        if shape == "json_schema":
            kwargs["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": "verdict", "schema": request.output_schema, "strict": False},
            }
        elif shape == "json_object":
            kwargs["response_format"] = {"type": "json_object"}
        return kwargs

    def complete(self, request: JudgeRequest, *, timeout: float) -> JudgeReply:
        if self._client is None:
            raise JudgeAuthError(NO_KEY)
        while True:
            shape = self._formats.current
            try:
                raw = self._client.chat.completions.with_raw_response.create(
                    **self._kwargs(request, shape), timeout=timeout
                )
            except (openai.OpenAIError, OSError) as exc:
                error = translate_error(exc)
                if self._formats.fall_back(shape, error):  # the server refused the format: the next
                    continue
                raise error from None
            try:
                completion = raw.parse()
            except (openai.OpenAIError, ValueError) as exc:
                raise JudgeAPIError(f"the judge's answer is not a chat completion: {exc}") from None
            if not hasattr(completion, "choices"):  # an HTML page, a wrong URL's 200
                raise JudgeInvalidRequest(
                    f"{self.provider} judge: the server answered something that is not a chat "
                    "completion (check the URL: it usually ends in /v1)"
                )
            reply = self._reply(completion, rate_limit_headers(raw.headers), shape)
            reply.model = served_model(reply.model, raw.headers)  # a gateway names the real model
            return reply

    def _reply(self, completion: Any, headers: dict[str, str], response_format: str) -> JudgeReply:
        choice = completion.choices[0] if completion.choices else None
        message = choice.message if choice is not None else None
        refusal = getattr(message, "refusal", None)
        text = (message.content if message is not None else None) or refusal or ""
        finish = choice.finish_reason if choice is not None else None
        stop = (
            "refusal"
            if refusal
            else {"length": "max_tokens", "content_filter": "refusal"}.get(finish or "", finish)
        )
        usage = completion.usage
        details = getattr(usage, "prompt_tokens_details", None) if usage is not None else None
        cached = int(getattr(details, "cached_tokens", 0) or 0)
        return JudgeReply(
            text=text,
            stop_reason=stop,
            input_tokens=max(0, int(usage.prompt_tokens) - cached) if usage is not None else 0,
            output_tokens=int(usage.completion_tokens) if usage is not None else 0,
            cache_read_input_tokens=cached,
            # OpenAI counts cached prompt tokens against its TPM limit (FAQ of
            # https://platform.openai.com/docs/guides/prompt-caching); an OpenAI-compatible
            # server is unknown: counting them too errs towards pacing slower (Groq does not
            # count them: https://console.groq.com/docs/rate-limits), never towards its 429s
            limit_input_tokens=int(usage.prompt_tokens) if usage is not None else None,
            model=completion.model,
            headers=headers,
            response_format=response_format,
        )

    # -- the batch lane over the Batch API (judgeq.judges.batches.BatchJudge) ---------------
    def as_batch_judge(self) -> BatchJudge | None:
        return self

    batch_label = "OpenAI batch"
    batch_max_requests: int | None = 50_000
    """The Batch API's limit of requests per input file."""
    batch_max_bytes: int | None = 190_000_000
    """The Batch API takes input files of up to 200 MB; the lane counts a little less for each
    line's envelope than this adapter writes, so it is given less."""

    def _sdk(self, call: Any, *args: Any, **kwargs: Any) -> Any:
        """Call the SDK, translating its errors into judgeq's tree."""
        if self._client is None:
            raise JudgeAuthError(NO_KEY)
        try:
            return call(*args, timeout=BATCH_TIMEOUT, **kwargs)
        except (openai.OpenAIError, OSError) as exc:
            raise translate_error(exc) from None

    def batch_params(self, request: JudgeRequest) -> dict[str, Any]:
        """A Chat Completions body in the response format this judge uses (the Batch API takes
        no fallback: a server that refuses the format errs each request, as a null)."""
        return self._kwargs(request, self.response_format)

    def batch_create(self, requests: list[tuple[str, dict[str, Any]]]) -> BatchInfo:
        """Upload the requests as one JSONL input file (``purpose=batch``) and create a batch of
        it on ``/v1/chat/completions`` with the 24 h window; the file is deleted again when the
        batch cannot be created."""
        lines = (
            json.dumps(
                {"custom_id": cid, "method": "POST", "url": BATCH_ENDPOINT, "body": body},
                ensure_ascii=False,
                separators=(",", ":"),
            )
            for cid, body in requests
        )
        data = ("\n".join(lines) + "\n").encode()
        upload = self._sdk(
            self._files().create, file=("judgeq-batch.jsonl", data, "application/jsonl"), purpose="batch"
        )
        try:
            batch = self._sdk(
                self._batches().create,
                input_file_id=upload.id,
                endpoint=BATCH_ENDPOINT,
                completion_window="24h",
                metadata={"created_by": "judgeq"},
            )
        except JudgeError:
            with contextlib.suppress(JudgeError):
                self._sdk(self._files().delete, upload.id)
            raise
        return _batch_info(batch)

    def batch_retrieve(self, batch_id: str) -> BatchInfo:
        return _batch_info(self._sdk(self._batches().retrieve, batch_id))

    def batch_cancel(self, batch_id: str) -> BatchInfo:
        return _batch_info(self._sdk(self._batches().cancel, batch_id))

    def batch_results(self, batch_id: str) -> Iterator[BatchItem]:
        """The results of an ended batch: its output file (answers, with their HTTP status) and
        its error file (requests that expired, were canceled or failed), streamed line by line.
        Once both are read, the batch's input file (the jobs' texts) is deleted from the account."""
        batch = self._sdk(self._batches().retrieve, batch_id)
        completed = int(getattr(batch.request_counts, "completed", 0) or 0) if batch.request_counts else 0
        if completed and not batch.output_file_id:
            # answers were paid for: never nulls for a file not yet there; the next poll reads again
            raise JudgeAPIError(f"{self.batch_label} {batch_id}: {completed} answers but no output file yet")
        answers = 0
        for file_id in (batch.output_file_id, batch.error_file_id):
            if file_id:
                for item in self._result_lines(file_id):
                    answers += item.reply is not None
                    yield item
        if answers < completed:  # a cut stream: what was read is stored (once); read again
            raise JudgeAPIError(f"{self.batch_label} {batch_id}: {answers} of {completed} answers read")
        with contextlib.suppress(JudgeError):
            self._sdk(self._files().delete, batch.input_file_id)

    def _result_lines(self, file_id: str) -> Iterator[BatchItem]:
        try:
            with self._files().with_streaming_response.content(file_id, timeout=BATCH_TIMEOUT) as answer:
                for line in answer.iter_lines():
                    if line.strip():
                        item = self._result_item(line)
                        if item is not None:
                            yield item
        except JudgeError:
            raise
        except (openai.OpenAIError, OSError) as exc:
            raise translate_error(exc) from None
        except Exception as exc:  # the HTTP client's own errors mid-stream (httpx2)
            raise JudgeAPIError(f"reading {self.batch_label} results: {type(exc).__name__}") from None

    def _result_item(self, line: str) -> BatchItem | None:
        """One line of a result file as a :class:`BatchItem` (None: not a result line)."""
        try:
            record = json.loads(line)
        except ValueError:
            return None
        cid = record.get("custom_id") if isinstance(record, dict) else None
        if not isinstance(cid, str):
            return None
        error = record.get("error")
        if isinstance(error, dict) and error:
            code = str(error.get("code") or "")
            kind = BATCH_ITEM_ERRORS.get(code, "errored")
            detail = f"{code}: {error.get('message') or ''}".strip(": ")
            if code == "request_timeout":
                return BatchItem(
                    cid, error=JudgeTimeout(f"timed out in the {self.batch_label}: {detail}"[:500])
                )
            return BatchItem(cid, error=batch_item_error(kind, detail, self.batch_label))
        response = record.get("response") if isinstance(record.get("response"), dict) else {}
        status = int(response.get("status_code") or 0)
        body = response.get("body")
        if status == 200 and isinstance(body, dict):
            try:
                completion = openai.types.chat.ChatCompletion.model_validate(body)
            except ValueError as exc:
                why = f"the answer in the {self.batch_label} is not a chat completion: {exc}"[:300]
                return BatchItem(cid, error=JudgeAPIError(why))
            return BatchItem(cid, reply=self._reply(completion, {}, self.response_format))
        failure = body.get("error", body) if isinstance(body, dict) else {}
        failure = failure if isinstance(failure, dict) else {}
        msg = f"HTTP {status} in the {self.batch_label}: {failure.get('message') or 'no message'}"[:500]
        code = str(failure.get("code") or "")
        return BatchItem(cid, error=error_for(status or 500, msg, code=code, rules=OPENAI_STATUSES))

    def _files(self) -> Any:
        if self._client is None:
            raise JudgeAuthError(NO_KEY)
        return self._client.files

    def _batches(self) -> Any:
        if self._client is None:
            raise JudgeAuthError(NO_KEY)
        return self._client.batches

    def check(self, *, timeout: float = 30.0) -> None:
        """Prove the key and the model; raises JudgeError. The model's own record first; a
        server that does not serve it (404/405: vLLM lists its models but serves no single
        one) is asked for the list, and a model not in a list it gave is unknown."""
        if self._client is None:
            raise JudgeAuthError(NO_KEY)
        try:
            record = self._client.models.retrieve(self.wire_model, timeout=timeout)
            if not hasattr(record, "id"):  # an HTML page, a wrong URL's 200
                raise JudgeInvalidRequest(
                    f"{self.provider} judge: {self._client.base_url} does not serve the OpenAI API "
                    "(check the URL: it usually ends in /v1)"
                )
            return
        except openai.APIStatusError as exc:
            # 404/405: no single model's record served (vLLM); 403: a key allowed to call the
            # model but not to read model records (a restricted key): the list may tell
            if exc.status_code not in (403, 404, 405):
                raise translate_error(exc) from None
        except (openai.OpenAIError, OSError) as exc:
            raise translate_error(exc) from None
        try:
            listed = [m.id for m in self._client.models.list(timeout=timeout)]
        except openai.APIStatusError as exc:
            if exc.status_code in (403, 404, 405):
                return  # no models endpoint at all (or not readable by this key): the first calls tell
            raise translate_error(exc) from None
        except (openai.OpenAIError, OSError) as exc:
            raise translate_error(exc) from None
        if listed and self.wire_model not in listed:
            raise JudgeModelNotFound(
                f"the server does not serve model {self.wire_model!r} (it serves: {', '.join(listed[:10])})"
            )


def _batch_info(batch: Any) -> BatchInfo:
    counts = batch.request_counts
    names = ("total", "completed", "failed")
    error = None
    if batch.status == "failed":
        found = (batch.errors.data or []) if batch.errors is not None else []
        parts = [
            f"{e.code or 'error'}: {e.message or ''}" + (f" (line {e.line})" if e.line else "") for e in found
        ]
        error = "; ".join(parts)[:500] or "the Batch API refused the batch's input file"
        retryable = any(e.code in BATCH_RETRYABLE for e in found)
    else:
        retryable = False
    return BatchInfo(
        batch.id,
        BATCH_STATES.get(batch.status, "in_progress"),
        {n: int(getattr(counts, n, 0) or 0) for n in names} if counts is not None else {},
        error=error,
        retryable=retryable,
    )


COMPATIBLE_KEY = "OPENAI_COMPATIBLE_API_KEY"
"""The key sent to an OpenAI-compatible server, when it needs one (LiteLLM, OpenRouter, a
gateway). Never ``OPENAI_API_KEY``: an OpenAI key is not sent to another server."""


def split_endpoint(spec: str) -> tuple[str, str]:
    """``MODEL@URL`` as (model, URL); raises ValueError with what is wrong."""
    model, sep, url = spec.partition("@")
    model, url = model.strip(), url.strip().rstrip("/")
    if not sep or not model or not url:
        raise ValueError("give the model and the server: openai-compatible:MODEL@http://HOST:PORT/v1")
    scheme, _, rest = url.partition("://")
    if scheme not in ("http", "https") or not rest:
        raise ValueError(f"{url!r} is not an http(s) URL")
    if "@" in rest.split("/", 1)[0]:
        raise ValueError("the URL holds credentials: give the key in OPENAI_COMPATIBLE_API_KEY instead")
    if any(c.isspace() for c in model + url):
        raise ValueError("white space in the model or the URL")
    return model, url


class OpenAICompatibleJudge(OpenAIJudge):
    """A judge on any server speaking the Chat Completions API (vLLM, SGLang, TGI, Ollama, LM
    Studio, a LiteLLM proxy, OpenRouter): ``model`` is ``MODEL@URL``; the key is
    :data:`COMPATIBLE_KEY` when the server needs one. What the server supports (structured
    output, JSON mode) is found by asking, as for OpenAI: never assumed."""

    provider = "openai-compatible"

    def as_batch_judge(self) -> BatchJudge | None:
        return None  # a server's Chat Completions: no Batch API (the methods are OpenAI's)

    def __init__(
        self, model: str, *, allowed: Sequence[str] = (), client: openai.OpenAI | None = None
    ) -> None:
        wire, url = split_endpoint(model)
        if client is None and not url_allowed(url, allowed):
            # a run's spec (in Redis) names the server: a machine calls, and sends its key to,
            # only the servers its operator allowed
            raise ConfigError(
                f"judge openai-compatible:{model}: set JUDGEQ_JUDGE_URLS={url} on every machine "
                "that runs this judge (judges call only the servers named there)"
            )
        key = (os.environ.get(COMPATIBLE_KEY) or "").strip() or "no-key"  # the SDK needs one
        super().__init__(model, api_key=key, base_url=url, client=client)
        self.wire_model = wire


def url_allowed(url: str, allowed: Sequence[str]) -> bool:
    """Whether ``url`` is one of the servers ``allowed`` names (``JUDGEQ_JUDGE_URLS``: each a
    URL prefix on a path boundary, e.g. ``http://gpu-1:8000`` allows ``http://gpu-1:8000/v1``)."""
    norm = url.rstrip("/").lower()
    for prefix in allowed:
        p = prefix.strip().rstrip("/").lower()
        if p and (norm == p or norm.startswith(p + "/")):
            return True
    return False


class OpenAIProvider(Provider):
    """OpenAI's API (Chat Completions, the Batch API), with ``OPENAI_API_KEY`` and
    ``OPENAI_BASE_URL`` as its SDK reads them."""

    name = "openai"
    limit_headers = LIMIT_HEADERS
    family = "openai"
    model_prefixes = ("gpt-", "gpt4", "chatgpt", "o1", "o3", "o4", "davinci", "text-davinci")
    key_variable = "OPENAI_API_KEY"
    key_name = "an OpenAI API key"
    serves_text = "any OpenAI model"
    served_by_key = True
    serve_needs = "OPENAI_API_KEY set"
    batch_api = "OpenAI's Batch API"
    lane_name = "Batch API lane"
    batch_one_model = True
    plural = "OpenAI judges"

    def parse_model(self, model: str) -> str:
        if not model.strip() or any(c.isspace() for c in model.strip()):
            raise ValueError("give the OpenAI model, e.g. openai:gpt-4.1-mini")
        return model.strip()

    def build(self, model: str, setup: JudgeSetup) -> OpenAIJudge:
        return OpenAIJudge(model)  # the SDK reads OPENAI_API_KEY / OPENAI_BASE_URL itself

    def has_credentials(self, settings: Settings) -> bool:
        return OpenAIJudge("any").has_credentials

    def budget_secret(self, settings: Settings) -> str | None:
        """The key and the server (``OPENAI_BASE_URL``): one key on two servers is two limits."""
        return os.environ.get("OPENAI_API_KEY", "") + "@" + os.environ.get("OPENAI_BASE_URL", "")


class OpenAICompatibleProvider(Provider):
    """Any server speaking the Chat Completions API, named in the model (``MODEL@URL``), called
    only where ``JUDGEQ_JUDGE_URLS`` allows it, with :data:`COMPATIBLE_KEY` when it needs a key."""

    name = "openai-compatible"
    limit_headers = LIMIT_HEADERS
    spec_form = "openai-compatible:MODEL@URL"
    key_variable = COMPATIBLE_KEY
    key_name = "a key for the server"
    serves_text = "the OpenAI-compatible servers of JUDGEQ_JUDGE_URLS"
    serve_needs = "JUDGEQ_JUDGE_URLS naming the run's server"
    plural = "OpenAI-compatible servers"

    def parse_model(self, model: str) -> str:
        split_endpoint(model)
        return model.strip()

    def build(self, model: str, setup: JudgeSetup) -> OpenAICompatibleJudge:
        return OpenAICompatibleJudge(model, allowed=setup.urls)

    def check_setup(self, model: str, setup: JudgeSetup) -> None:
        self.build(model, setup)  # refuses a server JUDGEQ_JUDGE_URLS does not allow

    def can_serve(self, settings: Settings, model: str) -> bool:
        try:
            return url_allowed(split_endpoint(model)[1], settings.judge_url_list())
        except ValueError:
            return False

    def serves_any(self, settings: Settings) -> bool:
        return bool(settings.judge_url_list())

    def budget_secret(self, settings: Settings) -> str | None:
        return os.environ.get(COMPATIBLE_KEY, "")

    def key_present(self, settings: Settings) -> bool:
        return bool(os.environ.get(COMPATIBLE_KEY, "").strip())


PROVIDERS = (OpenAIProvider(), OpenAICompatibleProvider())

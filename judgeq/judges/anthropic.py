"""The Anthropic Messages API judge (the SDK lives only here, at the edge).

The client is built once per process with ``max_retries=0``: judgeq's own retry loop
(:func:`judgeq.call_with_retries`) owns retries, so the per-job deadline holds.  SDK
exceptions are translated into judgeq's :class:`~judgeq.JudgeError` tree here.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from judgeq.errors import (
    JudgeAPIError,
    JudgeAuthError,
    JudgeError,
    JudgeInvalidRequest,
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
    import anthropic

    from judgeq.settings import Settings
else:
    anthropic = LazyModule("anthropic")  # imported by the first judge built, not by the provider's facts

__all__ = [
    "ANTHROPIC_STATUSES",
    "BATCH_TIMEOUT",
    "DEFAULT_MODEL",
    "FORMATS",
    "FORMAT_WORDS",
    "LIMIT_HEADERS",
    "NO_KEY",
    "PROVIDERS",
    "AnthropicJudge",
    "AnthropicProvider",
    "BedrockJudge",
    "BedrockProvider",
    "VertexJudge",
    "VertexProvider",
    "messages_kwargs",
    "rate_limit_headers",
    "reply_from_message",
    "translate_error",
]

NO_KEY = "no Anthropic API key: set ANTHROPIC_API_KEY"
DEFAULT_MODEL = "claude-sonnet-4-5"
"""The model of ``--judge anthropic`` (and of the default judge when a key is set)."""
ANTHROPIC_STATUSES = StatusRules(overloaded=frozenset({529}), billing_phrases=("credit balance",))
"""What Anthropic's Messages API says its own way (:mod:`.statuses`): 529 ``overloaded_error``;
a spent credit balance is a 400 saying so. Claude on Bedrock and Vertex AI answers through the
same SDK errors."""


FORMATS = ("json_schema", "text")
"""The verdict's formats, best first (:class:`~judgeq.judges.base.Formats`): structured output
(``output_config.format``), then the request's own words alone (a model or a cloud's region
that refuses ``output_config``: Claude on Vertex AI has answered Haiku 4.5's with
"output_config: Extra inputs are not permitted")."""
FORMAT_WORDS = (
    "output_config: extra inputs are not permitted",
    "output_format: extra inputs are not permitted",
    "does not support structured output",
    "structured outputs are not supported",
)
"""What a 400 says when the server refuses structured output itself (a complaint about the
schema's content, ``output_config.format.schema...: property 'minimum' is not supported``, is
not a refusal: it stays the job's null)."""


def messages_kwargs(request: JudgeRequest, model: str, shape: str = "json_schema") -> dict[str, Any]:
    """The keyword arguments of ``client.messages.create`` for ``request`` (the Messages API's
    wire format: the rubric's system blocks with a cache breakpoint after the last, the verdict
    as structured output unless ``shape`` is ``text``)."""
    blocks: list[dict[str, Any]] = [{"type": "text", "text": t} for t in request.system]
    blocks[-1]["cache_control"] = {"type": "ephemeral"}
    kwargs: dict[str, Any] = {
        "model": model,
        "max_tokens": request.max_tokens,
        "system": blocks,
        "messages": [{"role": "user", "content": request.user}],
    }
    if shape == "json_schema":
        kwargs["output_config"] = {"format": {"type": "json_schema", "schema": request.output_schema}}
    return kwargs


def _has_credentials(client: anthropic.Anthropic) -> bool:
    """A usable credential on an SDK client: a key or token that is not blank, or a
    credentials provider (a profile, workload identity federation)."""
    for secret in (client.api_key, client.auth_token):
        if isinstance(secret, str) and secret.strip():
            return True
    return getattr(client, "credentials", None) is not None


LIMIT_HEADERS = ("anthropic-ratelimit-",)
"""Where Anthropic's API states its limits (https://docs.anthropic.com/en/api/rate-limits)."""


def rate_limit_headers(headers: Any) -> dict[str, str]:
    """The ``anthropic-ratelimit-*`` headers of an answer (for the shared budget)."""
    return {k.lower(): v for k, v in headers.items() if k.lower().startswith(LIMIT_HEADERS)}


def _message(exc: anthropic.APIError) -> str:
    body = exc.body
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        detail = body["error"].get("message")
        if detail:
            return f"{type(exc).__name__}: {str(detail)[:300]}"
    return f"{type(exc).__name__}: {str(exc.message)[:300]}"


def translate_error(exc: Exception) -> JudgeError:
    """Map an SDK exception onto judgeq's exception tree."""
    if isinstance(exc, anthropic.APITimeoutError):
        return JudgeTimeout("the judge did not answer within the attempt timeout")
    if isinstance(exc, anthropic.APIConnectionError):
        return JudgeAPIError(f"connection to the judge failed: {type(exc).__name__}")
    if isinstance(exc, anthropic.APIStatusError):
        headers = exc.response.headers
        retry_after = retry_after_seconds(headers)
        error = error_for(exc.status_code, _message(exc), retry_after=retry_after, rules=ANTHROPIC_STATUSES)
        error.headers = rate_limit_headers(headers)
        return error
    if isinstance(exc, anthropic.CredentialsError):
        return JudgeAuthError(NO_KEY)
    return JudgeAPIError(f"unexpected judge failure: {type(exc).__name__}")


BATCH_TIMEOUT = 600.0
"""Seconds for one Message Batches API call (creating a batch uploads up to 256 MB)."""


def reply_from_message(
    message: Any, headers: dict[str, str], response_format: str = "json_schema"
) -> JudgeReply:
    """A :class:`~judgeq.JudgeReply` from an SDK ``Message``."""
    texts: list[str] = []
    tool_input: dict[str, Any] | None = None
    for block in message.content:
        if block.type == "text":
            texts.append(block.text)
        elif block.type == "tool_use" and isinstance(block.input, dict) and tool_input is None:
            tool_input = block.input
    usage = message.usage
    return JudgeReply(
        text="".join(texts),
        tool_input=tool_input,
        stop_reason=message.stop_reason,
        input_tokens=usage.input_tokens or 0,
        output_tokens=usage.output_tokens or 0,
        cache_read_input_tokens=getattr(usage, "cache_read_input_tokens", None) or 0,
        cache_creation_input_tokens=getattr(usage, "cache_creation_input_tokens", None) or 0,
        model=message.model,
        headers=headers,
        response_format=response_format,
    )


def _batch_info(batch: Any) -> BatchInfo:
    counts = batch.request_counts
    names = ("processing", "succeeded", "errored", "canceled", "expired")
    return BatchInfo(batch.id, batch.processing_status, {n: int(getattr(counts, n, 0) or 0) for n in names})


class AnthropicJudge(JudgeBase):
    """A :class:`~judgeq.Judge` backed by ``anthropic.Anthropic().messages.create``."""

    provider = "anthropic"

    _formats: Formats

    @property
    def response_format(self) -> str:
        """How the verdict is asked for now: structured output (``output_config``), or the
        request's words alone after the server refused it (:data:`FORMATS`)."""
        return self._formats.current

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        client: anthropic.Anthropic | None = None,
    ) -> None:
        self.model = model
        self._base_url = base_url
        self._formats = Formats(FORMATS, FORMAT_WORDS, f"{self.provider} judge {model}")
        # api_key/base_url None: the SDK reads ANTHROPIC_API_KEY / ANTHROPIC_BASE_URL. Without
        # credentials the judge still builds: every call is then an auth_error null (the
        # producer's preflight reports it once, before anything is enqueued).
        self._client: anthropic.Anthropic | None
        try:
            self._client = client or anthropic.Anthropic(api_key=api_key, base_url=base_url, max_retries=0)
        except (anthropic.CredentialsError, TypeError):
            self._client = None
        if self._client is not None and client is None and not _has_credentials(self._client):
            # the SDK (2.x) builds a client with no credential, or with a blank one read from
            # ANTHROPIC_API_KEY: its every request would fail with a TypeError or a bad header
            self._client = None

    @property
    def endpoint(self) -> str | None:
        """The API's host (and port), never a credential: provenance in the report."""
        return endpoint_of(self._client.base_url) if self._client is not None else None

    @property
    def cache_identity(self) -> str:
        """What names this judge in the reply cache: provider, model and server (its host and
        path, never a credential): a stand-in's verdicts are never served for the real API."""
        # without a credential (a dry run on a machine with no key) the server the SDK would call
        url = (
            self._client.base_url
            if self._client is not None
            else self._base_url or os.environ.get("ANTHROPIC_BASE_URL", "https://api.anthropic.com")
        )
        return f"{self.provider}:{self.model}@{server_of(url)}"

    @property
    def has_credentials(self) -> bool:
        """Whether the SDK found a credential (a key, a token or a credentials provider)."""
        return self._client is not None

    no_key = NO_KEY
    """What a call without a credential says."""

    def _call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        """Call ``client.messages.<method>``, translating SDK errors into judgeq's tree."""
        if self._client is None:
            raise JudgeAuthError(self.no_key)
        try:
            target: Any = self._client.messages
            for part in method.split("."):
                target = getattr(target, part)
            return target(*args, **kwargs)
        except (anthropic.AnthropicError, OSError) as exc:
            raise translate_error(exc) from None
        except TypeError as exc:  # the SDK's "Could not resolve authentication method"
            if "authentication" not in str(exc):
                raise
            raise JudgeAuthError(NO_KEY) from None

    def complete(self, request: JudgeRequest, *, timeout: float) -> JudgeReply:
        while True:
            shape = self._formats.current
            try:
                raw = self._call(
                    "with_raw_response.create", **messages_kwargs(request, self.model, shape), timeout=timeout
                )
                break
            except JudgeError as error:
                if not self._formats.fall_back(shape, error):  # else: refused, the next format
                    raise
        reply = reply_from_message(raw.parse(), rate_limit_headers(raw.headers), shape)
        reply.model = served_model(reply.model, raw.headers)  # a gateway names the real model
        return reply

    # -- the Message Batches lane (judgeq.judges.batches.BatchJudge) ------------------------------
    def as_batch_judge(self) -> BatchJudge | None:
        return self

    def batch_params(self, request: JudgeRequest) -> dict[str, Any]:
        """One request of a batch, in the format in use (a batch does not fall back: a refused
        format is each request's null)."""
        return messages_kwargs(request, self.model, self.response_format)

    def batch_create(self, requests: list[tuple[str, dict[str, Any]]]) -> BatchInfo:
        items = [{"custom_id": cid, "params": params} for cid, params in requests]
        return _batch_info(self._call("batches.create", requests=items, timeout=BATCH_TIMEOUT))

    def batch_retrieve(self, batch_id: str) -> BatchInfo:
        return _batch_info(self._call("batches.retrieve", batch_id, timeout=BATCH_TIMEOUT))

    def batch_cancel(self, batch_id: str) -> BatchInfo:
        return _batch_info(self._call("batches.cancel", batch_id, timeout=BATCH_TIMEOUT))

    def batch_results(self, batch_id: str) -> Iterator[BatchItem]:
        """The results of an ended batch, streamed line by line."""
        lines = self._call("batches.results", batch_id, timeout=BATCH_TIMEOUT)
        try:
            for line in lines:
                result = line.result
                if result.type == "succeeded":
                    yield BatchItem(
                        line.custom_id, reply=reply_from_message(result.message, {}, self.response_format)
                    )
                else:
                    detail = ""
                    if result.type == "errored":
                        err = result.error.error
                        detail = f"{getattr(err, 'type', 'error')}: {getattr(err, 'message', '')}"
                    yield BatchItem(line.custom_id, error=batch_item_error(result.type, detail))
        except (anthropic.AnthropicError, OSError) as exc:
            raise translate_error(exc) from None

    def ping(self, *, timeout: float = 30.0) -> None:
        """One tiny Messages call (a token or two) that proves the key and the model; raises
        JudgeError. For endpoints that serve Messages but not the Models API (a gateway)."""
        self._call(
            "create",
            model=self.model,
            max_tokens=1,
            messages=[{"role": "user", "content": "ping"}],
            timeout=timeout,
        )

    def check(self, *, timeout: float = 30.0) -> None:
        """Prove the key and the model; raises JudgeError. The Models API first (no token
        spent); when it does not know the model (404) or is not served (405: a gateway that
        serves only Messages), one Messages call of a token (:meth:`ping`) settles it."""
        if self._client is None:
            raise JudgeAuthError(NO_KEY)
        if not self._models_api_knows(timeout):
            self.ping(timeout=timeout)

    def _models_api_knows(self, timeout: float) -> bool:
        """True when the Models API knows the model, False when it cannot tell (404, 405)."""
        assert self._client is not None
        try:
            self._client.models.retrieve(self.model, timeout=timeout)
        except anthropic.APIStatusError as exc:
            if exc.status_code in (404, 405):
                return False
            raise translate_error(exc) from None
        except (anthropic.AnthropicError, OSError) as exc:
            raise translate_error(exc) from None
        return True

    def count_tokens(self, request: JudgeRequest, *, timeout: float = 30.0) -> int:
        kwargs = messages_kwargs(request, self.model, self.response_format)
        kwargs.pop("max_tokens")
        return int(self._call("count_tokens", **kwargs, timeout=timeout).input_tokens)


class AnthropicProvider(Provider):
    """Anthropic's Messages API, with the key of ``ANTHROPIC_API_KEY`` (or what else the SDK
    resolves: a token, a profile)."""

    name = "anthropic"
    limit_headers = LIMIT_HEADERS
    family = "anthropic"
    model_prefixes = ("claude",)
    key_variable = "ANTHROPIC_API_KEY"
    key_name = "an Anthropic API key"
    serves_text = "any Anthropic model"
    served_by_key = True
    serve_needs = "ANTHROPIC_API_KEY set"
    batch_api = "Anthropic's Message Batches API"
    lane_name = "Message Batches lane"
    plural = "Anthropic judges"
    default_model = DEFAULT_MODEL

    def build(self, model: str, setup: JudgeSetup) -> AnthropicJudge:
        return AnthropicJudge(model, api_key=setup.api_key, base_url=setup.base_url)

    def token_counter(self, model: str, setup: JudgeSetup) -> Callable[[JudgeRequest], int] | None:
        """Anthropic's token counting API (``messages.count_tokens``), with a key given."""
        return self.build(model, setup).count_tokens if setup.api_key is not None else None

    def has_credentials(self, settings: Settings) -> bool:
        """``ANTHROPIC_API_KEY`` (a blank one is none), or what else the SDK resolves."""
        key = settings.anthropic_api_key.get_secret_value() if settings.anthropic_api_key else None
        if key is None and os.environ.get("ANTHROPIC_API_KEY") is not None:
            return False  # set but blank: no key (the SDK would send it as it is)
        if key:
            return True
        judge = AnthropicJudge(DEFAULT_MODEL, api_key=key, base_url=settings.anthropic_base_url)
        return judge.has_credentials

    def budget_secret(self, settings: Settings) -> str | None:
        return settings.anthropic_api_key.get_secret_value() if settings.anthropic_api_key else None


class _CloudJudge(AnthropicJudge):
    """Claude through a cloud's own client in the Anthropic SDK (its credentials, region and
    model ids): the same Messages requests and replies; no Models API (the preflight is one
    tiny Messages call), no Message Batches, no token counting (the SDK's clients refuse them)."""

    server_variable = ""
    """The SDK's variable for another server (a stand-in, a proxy)."""

    def as_batch_judge(self) -> BatchJudge | None:
        return None  # the clouds' clients have no Message Batches (the methods are the adapter's)

    def __init__(self, model: str, *, client: Any = None) -> None:
        self.model = model
        self._base_url = None
        self._formats = Formats(FORMATS, FORMAT_WORDS, f"{self.provider} judge {model}")
        try:
            self._client = client or self._build()
        except Exception:  # no region, no project, no credential: every call says so
            self._client = None

    def _build(self) -> Any:
        raise NotImplementedError

    @property
    def cache_identity(self) -> str:
        url = self._client.base_url if self._client is not None else os.environ.get(self.server_variable, "")
        return f"{self.provider}:{self.model}@{server_of(url)}"

    def _call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        try:
            return super()._call(method, *args, **kwargs)
        except JudgeError:
            raise
        except Exception as exc:  # the cloud's own credential chain (botocore, google-auth) failed
            raise JudgeAuthError(f"{self.no_key} ({type(exc).__name__})") from None

    def check(self, *, timeout: float = 30.0) -> None:
        if self._client is None:
            raise JudgeAuthError(self.no_key)
        self.ping(timeout=timeout)

    def count_tokens(self, request: JudgeRequest, *, timeout: float = 30.0) -> int:
        raise JudgeInvalidRequest(f"{self.provider}: token counting is not offered there")


VERTEX_TOKEN = "ANTHROPIC_VERTEX_ACCESS_TOKEN"
"""judgeq's variable for a Vertex AI access token given as is (the SDK's ``access_token``);
without it the SDK's own chain: the application default credentials."""


class BedrockJudge(_CloudJudge):
    """Claude on Amazon Bedrock (``anthropic.AnthropicBedrock``): AWS credentials as boto3
    finds them (keys, a profile, a role) or a Bedrock API key (``AWS_BEARER_TOKEN_BEDROCK``),
    the region of ``AWS_REGION``; model ids as Bedrock names them
    (``anthropic.claude-sonnet-4-5-20250929-v1:0``, an inference profile ``us.anthropic...``)."""

    provider = "bedrock"
    no_key = (
        "no AWS credentials or region for Bedrock: set AWS_REGION and AWS_ACCESS_KEY_ID with "
        "AWS_SECRET_ACCESS_KEY (or a profile, a role, AWS_BEARER_TOKEN_BEDROCK)"
    )
    server_variable = "ANTHROPIC_BEDROCK_BASE_URL"

    def _build(self) -> Any:
        return anthropic.AnthropicBedrock(max_retries=0)


class VertexJudge(_CloudJudge):
    """Claude on Google Vertex AI (``anthropic.AnthropicVertex``): the application default
    credentials, ``ANTHROPIC_VERTEX_PROJECT_ID`` and ``CLOUD_ML_REGION``; model ids as Vertex
    names them (``claude-sonnet-4-5@20250929``)."""

    provider = "vertex"
    no_key = (
        "no Vertex AI project, region or credentials: set ANTHROPIC_VERTEX_PROJECT_ID, "
        "CLOUD_ML_REGION and application default credentials"
    )
    server_variable = "ANTHROPIC_VERTEX_BASE_URL"

    def _build(self) -> Any:
        # an access token given as is (gcloud auth print-access-token), else the SDK's chain
        token = (os.environ.get(VERTEX_TOKEN) or "").strip() or None
        return anthropic.AnthropicVertex(max_retries=0, access_token=token)


def _aws_credentials() -> bool:
    """Whether AWS credentials are named here without a request: keys, a Bedrock API key, a
    profile, a web identity or container role, or a credentials/config file."""
    named = ("AWS_ACCESS_KEY_ID", "AWS_BEARER_TOKEN_BEDROCK", "AWS_PROFILE", "AWS_WEB_IDENTITY_TOKEN_FILE",
             "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_CONTAINER_CREDENTIALS_FULL_URI")  # fmt: skip
    if any((os.environ.get(v) or "").strip() for v in named):
        return True
    home = os.path.expanduser("~/.aws")
    return os.path.exists(os.path.join(home, "credentials")) or os.path.exists(os.path.join(home, "config"))


class BedrockProvider(Provider):
    """Claude on Amazon Bedrock through the Anthropic SDK's Bedrock client."""

    name = "bedrock"
    family = "anthropic"
    key_variable = "AWS_ACCESS_KEY_ID"
    key_name = "AWS credentials and a region (AWS_REGION)"
    serves_text = "Claude on Amazon Bedrock"
    serve_needs = "AWS credentials and AWS_REGION"
    plural = "Bedrock judges"

    def build(self, model: str, setup: JudgeSetup) -> BedrockJudge:
        return BedrockJudge(model)

    def has_credentials(self, settings: Settings) -> bool:
        region = (os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "").strip()
        return bool(region) and _aws_credentials()

    def budget_secret(self, settings: Settings) -> str | None:
        """The account's key (or profile) and the region: Bedrock's quotas are per account and region."""
        who = (
            os.environ.get("AWS_ACCESS_KEY_ID")
            or os.environ.get("AWS_BEARER_TOKEN_BEDROCK")
            or os.environ.get("AWS_PROFILE", "")
        )
        where = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION", "")
        return f"{who}@{where}@{os.environ.get('ANTHROPIC_BEDROCK_BASE_URL', '')}"


class VertexProvider(Provider):
    """Claude on Google Vertex AI through the Anthropic SDK's Vertex client."""

    name = "vertex"
    family = "anthropic"
    key_variable = "ANTHROPIC_VERTEX_PROJECT_ID"
    key_name = "a Vertex AI project, region (CLOUD_ML_REGION) and application default credentials"
    serves_text = "Claude on Google Vertex AI"
    serve_needs = "ANTHROPIC_VERTEX_PROJECT_ID, CLOUD_ML_REGION and application default credentials"
    plural = "Vertex AI judges"

    def build(self, model: str, setup: JudgeSetup) -> VertexJudge:
        return VertexJudge(model)

    def has_credentials(self, settings: Settings) -> bool:
        adc = os.environ.get("GOOGLE_APPLICATION_CREDENTIALS") or os.path.expanduser(
            "~/.config/gcloud/application_default_credentials.json"
        )
        needed = ("ANTHROPIC_VERTEX_PROJECT_ID", "CLOUD_ML_REGION")
        token = bool((os.environ.get(VERTEX_TOKEN) or "").strip())
        return all((os.environ.get(v) or "").strip() for v in needed) and (token or os.path.exists(adc))

    def budget_secret(self, settings: Settings) -> str | None:
        """The project and the region: Vertex AI's quotas are per project and region."""
        project, region = (
            os.environ.get("ANTHROPIC_VERTEX_PROJECT_ID", ""),
            os.environ.get("CLOUD_ML_REGION", ""),
        )
        return f"{project}@{region}@{os.environ.get('ANTHROPIC_VERTEX_BASE_URL', '')}"


PROVIDERS = (AnthropicProvider(), BedrockProvider(), VertexProvider())

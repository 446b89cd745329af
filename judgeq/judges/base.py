"""The judge seam: a :class:`Judge` turns a :class:`JudgeRequest` into a :class:`JudgeReply`.

Implementations live in :mod:`judgeq.judges` (the Anthropic SDK adapter, the lexical judge)
and in the tests (scripted doubles).  A judge raises only :class:`~judgeq.JudgeError`
subclasses; :func:`call_with_retries` owns the retry policy and the per-job deadline, so it
holds for every judge and every worker pool.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable
from urllib.parse import urlsplit

from judgeq.errors import JudgeError, JudgeInvalidRequest, JudgeRateLimited, JudgeTimeout
from judgeq.grading.request import JudgeRequest
from judgeq.judges.reply import JudgeReply

if TYPE_CHECKING:
    from judgeq.judges.batches import BatchJudge

from judgeq.ratelimit import (
    Budget,
    PausedPastDeadline,
    Share,
    Usage,
    estimate_input_tokens,
    wait_for_budget,
)
from judgeq.ratelimit.headers import fmt_duration, retry_after
from judgeq.settings import default
from judgeq.telemetry import BudgetWaited, JudgeCall, current_job, emit, observed

log = logging.getLogger("judgeq.judge")

__all__ = [
    "Adopted",
    "CallOutcome",
    "Formats",
    "Gate",
    "Judge",
    "JudgeBase",
    "JudgeReply",
    "RetryPolicy",
    "adopt",
    "cache_identity",
    "call_with_retries",
    "endpoint_of",
    "provider_of",
    "retry_after_seconds",
    "served_model",
    "server_of",
]


def retry_after_seconds(headers: Any) -> float | None:
    """A server's ``retry-after-ms`` / ``retry-after`` (seconds or an HTTP-date) from an HTTP
    answer's headers, in seconds; None when absent or unreadable; not capped (see
    :func:`judgeq.ratelimit.headers.retry_after`). Every provider's adapter reads it here."""
    return retry_after(headers)


class Formats:
    """The formats a judge asks for its verdict in, best first (structured output, then looser
    ones: the request's own words ask for the JSON verdict in every one), and the one in use.

    A server that refuses the one in use (an ``invalid_request``, not a missing model, whose
    message says so in one of :attr:`words`: words that name a refusal of the format, not a
    complaint about the schema's content, which stays the job's null) moves the judge to the
    next, for all its later calls (the server or model cannot do it), said once in the log; the
    last has no fallback (its refusal is the job's null). Every provider's adapter falls back
    through this, each with its own chain and words (data); thread-safe (a worker's threads
    share a judge). A fallback is one more request within the attempt, once per process."""

    def __init__(self, chain: tuple[str, ...], words: tuple[str, ...], name: str = "judge") -> None:
        self.chain = chain
        self.words = tuple(w.lower() for w in words)
        self.name = name
        self._at = 0
        self._lock = threading.Lock()

    @property
    def current(self) -> str:
        """The format asked for now."""
        return self.chain[self._at]

    def fall_back(self, asked: str, error: JudgeError) -> bool:
        """After ``error`` answered a request in ``asked``: True (and the judge moved past
        ``asked``) when it is the server refusing that format and a looser one remains; False
        for any other error, and for a refusal of the last format."""
        if type(error) is not JudgeInvalidRequest or not any(w in str(error).lower() for w in self.words):
            return False
        at = self.chain.index(asked)
        if at + 1 >= len(self.chain):
            return False
        with self._lock:  # (a racing caller may have moved it already: the furthest move holds)
            moved = self._at < at + 1
            self._at = max(self._at, at + 1)
        if moved:
            log.warning(
                "%s: the server refused the verdict as %s (%s); asking for it as %s from now on",
                self.name,
                asked,
                str(error)[:200],
                self.chain[at + 1],
            )
        return True


def _split(url: Any) -> tuple[str, str] | None:
    """``(host[:port], path)`` of a URL (an ``httpx.URL`` or a string; a bare host too), lower-case
    host, no credential; None when its port is not a number."""
    text = str(url or "").strip()
    try:
        parts = urlsplit(text if "://" in text else "//" + text)
        host, port = parts.hostname or "", parts.port
    except ValueError:
        return None
    host = f"[{host}]" if ":" in host else host
    return (f"{host}:{port}" if port else host), parts.path.rstrip("/")


def endpoint_of(url: Any) -> str | None:
    """``host[:port]`` of a judge's base URL (an ``httpx.URL`` or a string), with no
    credential, path or query: where a judge's calls went, as the report names it (None for no
    host, or a port that is not a number: no endpoint rather than a guess)."""
    split = _split(url)
    return split[0] if split is not None and split[0] else None


SERVED_MODEL_HEADERS = ("x-litellm-model-name",)
"""Headers in which a gateway names the model that really answered (LiteLLM's, where the body
names the route's alias). OpenRouter names it in the body's ``model``, as the APIs do."""


def served_model(model: str | None, headers: Any) -> str | None:
    """The model that answered a call: the one a gateway names in its headers, else the one
    the answer's body names."""
    for name in SERVED_MODEL_HEADERS:
        value = headers.get(name) if headers is not None else None
        if isinstance(value, str) and value.strip():
            return value.strip()
    return model


def server_of(url: Any) -> str:
    """``host[:port]/path`` of a judge's base URL, with no scheme, credential, query or trailing
    slash: which server a judge's replies came from, as the reply cache names it (two paths on
    one host can be two servers: a gateway's routes). Empty for no URL."""
    split = _split(url)
    if split is None:  # a port that is not a number: the text less any credential and query
        return str(url).split("://", 1)[-1].rpartition("@")[2].split("?", 1)[0].rstrip("/")
    return split[0] + split[1]


def cache_identity(judge: Judge) -> str:
    """What names ``judge`` in the reply cache (:attr:`JudgeBase.cache_identity`): its provider,
    the server it calls and the model as it calls it; its provider and model for a judge that
    names no server (a test double). Never a credential."""
    return adopt(judge).cache_identity


@runtime_checkable
class Judge(Protocol):
    """Anything that can grade one rendered request: the contract a custom judge (``python:``,
    ``plugin:``) is written to. judgeq uses every judge as a :class:`JudgeBase` (:func:`adopt`)."""

    provider: str
    model: str

    def complete(self, request: JudgeRequest, *, timeout: float) -> JudgeReply:
        """One attempt, bounded by ``timeout`` seconds; raises JudgeError subclasses."""
        ...


class JudgeBase:
    """A judge as judgeq uses it: every member the pipeline asks of a judge, with the answer of
    a judge that says nothing more. The providers' adapters are JudgeBases; a judge written to
    the :class:`Judge` contract alone is made one by :func:`adopt`, the one place a judge's
    optional members are looked for."""

    provider: str = "custom"
    model: str = ""
    batch_label: str = "Message Batch"
    """What its batches are called in logs and reasons (a batch judge's)."""
    batch_max_requests: int | None = None
    """Its batch API's limit on requests in one batch (None: the lane's own)."""
    batch_max_bytes: int | None = None
    """Its batch API's limit on one batch's size (None: the lane's own)."""
    can_check: bool = True
    """Whether :meth:`check` asks the judge anything (False: a judge that cannot tell whether it
    is up without grading; its first calls tell)."""

    @property
    def endpoint(self) -> str | None:
        """The host (and port) its calls go to, never a credential (None: it names none)."""
        return None

    @property
    def response_format(self) -> str | None:
        """How the verdict is asked for when a reply does not say (provenance; None: unsaid)."""
        return None

    @property
    def cache_identity(self) -> str:
        """What names it in the reply cache: provider, model and, for a judge calling a
        server, that server (never a credential)."""
        return f"{self.provider}:{self.model}"

    @property
    def has_credentials(self) -> bool:
        """Whether it holds a credential (no request)."""
        return True

    def check(self, *, timeout: float = 30.0) -> None:
        """Its preflight (its key and model, no tokens or one); raises JudgeError."""

    def as_batch_judge(self) -> BatchJudge | None:
        """Itself as a :class:`~judgeq.judges.batches.BatchJudge` when it takes batches through
        its provider's batch API (:attr:`Provider.batch_api`), else None: what the batch lane
        asks, never the methods a class happens to inherit (a cloud's Claude client, an
        OpenAI-compatible server have the batch methods of the adapter they extend, and no
        batch API)."""
        return None

    def complete(self, request: JudgeRequest, *, timeout: float) -> JudgeReply:
        """One attempt, bounded by ``timeout`` seconds; raises JudgeError subclasses."""
        raise NotImplementedError


class Adopted(JudgeBase):
    """A judge written to the :class:`Judge` contract (custom code, a test double) as a
    :class:`JudgeBase`: the members it offers are its own, the others JudgeBase's; the rest of
    what it has (a batch API) is reached through it."""

    def __init__(self, inner: Judge, provider: str | None = None, model: str | None = None) -> None:
        self.inner = inner
        # (a judge that names no provider is "custom", as metrics name it)
        self.provider = provider or str(getattr(inner, "provider", "") or "custom")
        self.model = model if model is not None else str(getattr(inner, "model", ""))
        for name in ("batch_label", "batch_max_requests", "batch_max_bytes"):
            own = getattr(inner, name, None)
            if own is not None:
                setattr(self, name, own)
        shape = getattr(inner, "response_format", None)
        self._format = shape if isinstance(shape, str) else None
        self._check = getattr(inner, "check", None)
        self.can_check = callable(self._check)

    def __getattr__(self, name: str) -> Any:
        """What else it has (a batch API's methods)."""
        if name == "inner":  # (not set yet)
            raise AttributeError(name)
        return getattr(self.inner, name)

    @property
    def response_format(self) -> str | None:
        return self._format

    @property
    def endpoint(self) -> str | None:
        own = getattr(self.inner, "endpoint", None)
        return own if isinstance(own, str) and own else None

    @property
    def cache_identity(self) -> str:
        own = getattr(self.inner, "cache_identity", None)
        return own if isinstance(own, str) and own else f"{self.provider}:{self.model}"

    @property
    def has_credentials(self) -> bool:
        own = getattr(self.inner, "has_credentials", True)
        return bool(own)

    def check(self, *, timeout: float = 30.0) -> None:
        if callable(self._check):
            self._check(timeout=timeout)

    def as_batch_judge(self) -> BatchJudge | None:
        from judgeq.judges.batches import BatchJudge

        return self if isinstance(self.inner, BatchJudge) else None

    def complete(self, request: JudgeRequest, *, timeout: float) -> JudgeReply:
        return self.inner.complete(request, timeout=timeout)


def adopt(judge: Judge) -> JudgeBase:
    """``judge`` as a :class:`JudgeBase` (itself when it is one)."""
    return judge if isinstance(judge, JudgeBase) else Adopted(judge)


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Per-attempt timeout, per-job deadline over all attempts, and backoff.

    429/529/5xx/timeouts are retried with exponential backoff and full jitter (at least
    half the step), or after the judge's ``retry-after`` when it sent one, as long as the
    next attempt can start before the deadline. The null reason of a job that never got an
    answer is the judge's last error, except that a final attempt cut short by the deadline
    and timing out does not replace an earlier error.
    """

    timeout: float = default("judge_timeout")
    deadline: float = default("judge_deadline")
    base_delay: float = 0.5
    max_delay: float = 30.0
    max_attempts: int = 10
    min_attempt_time: float = 0.05
    max_rate_limited: int = default("max_rate_limited")
    """With a budget, a 429 is not an attempt: the job waits the server's ``retry-after`` (not
    counted against the deadline; the budget decides whether every caller pauses too) and asks
    again, up to this many refused calls in all; then it ends ``rate_limited``."""


@dataclass(slots=True)
class CallOutcome:
    """The reply (or the final error) and what it took."""

    reply: JudgeReply | None
    error: JudgeError | None
    attempts: int
    elapsed: float
    errors: list[str] = field(default_factory=list)
    failing: float = 0.0
    """Seconds from the end of its first failed attempt to the end of the call (0: it answered
    at once): how long the judge kept failing it (another job answered meanwhile: the judge was
    up, the failure is the job's own)."""
    own_refusal: bool = False
    """Its last 429 was judged its own by the budget (others were served meanwhile), not
    congestion."""


def provider_of(judge: Judge) -> str:
    """A judge's provider as metrics and logs name it (``custom`` for a judge that names none)."""
    return adopt(judge).provider


def _emit_call(judge: Judge, outcome: str, seconds: float, reply: JudgeReply | None = None) -> None:
    job = current_job()
    emit(
        JudgeCall(
            provider_of(judge),
            judge.model,
            outcome,
            seconds,
            reply.input_tokens + reply.cache_creation_input_tokens if reply else 0,
            reply.output_tokens if reply else 0,
            reply.cache_read_input_tokens if reply else 0,
            run_id=job[0] if job else None,
            index=job[1] if job else None,
        )
    )


def _backoff(policy: RetryPolicy, attempt: int, rng: random.Random) -> float:
    step = min(policy.max_delay, policy.base_delay * 2.0 ** (attempt - 1))
    return float(step * (0.5 + rng.random() / 2))


class Gate(Protocol):
    """A bound on the calls in flight at once (a process's ``threading.Semaphore``)."""

    def acquire(self, blocking: bool = True, timeout: float | None = None) -> bool: ...
    def release(self) -> None: ...


def call_with_retries(
    judge: Judge,
    request: JudgeRequest,
    policy: RetryPolicy,
    *,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    rng: random.Random | None = None,
    budget: Budget | None = None,
    share: Share | None = None,
    gate: Gate | None = None,
) -> CallOutcome:
    """Call ``judge`` until it answers, fails for good, or the deadline runs out. Never raises
    a JudgeError: the final error is returned in the outcome.

    With a ``gate``, each attempt first takes one of its places (held for the attempt only,
    not while backing off). With a ``budget``, each attempt then waits for its reservation
    (one request, the estimated input tokens, ``max_tokens`` output tokens; a ``share`` of the
    judge's limits for the run), reconciled with the usage the judge reports afterwards, and a
    429 is reported to it (see :attr:`RetryPolicy.max_rate_limited`). Neither wait counts
    against the deadline (waiting for a place or for budget never makes a job time out)."""
    rng = rng or random.Random()
    start = clock()
    end = start + policy.deadline
    attempts = 0
    refusals = 0  # 429s under a budget: not attempts
    previous_epoch = -1  # the epoch of this job's last 429 ...
    refused_at = start  # ... when it came ...
    own_epoch = -1  # ... the epoch it was judged refused for itself in (-1: it was not) ...
    first_epoch = -1  # ... or of its first refusal, when that was its last
    lent = 0  # requests its refusals were charged (given back if one is judged its own)
    errors: list[str] = []
    last: JudgeError | None = None
    reserve = Usage(estimate_input_tokens(request.size_chars()), request.max_tokens)
    first_failed: float | None = None
    while attempts - refusals < policy.max_attempts:
        epoch = 0
        held = reserve  # what the grant took from the budget (nothing when it was free)
        free = False
        if gate is not None:
            before = clock()
            gate.acquire()
            end += clock() - before
        try:
            if budget is not None:
                left = end - clock()
                try:
                    waited, grant = wait_for_budget(
                        budget,
                        reserve,
                        share,
                        sleep=sleep,
                        longest_pause=left,
                        own_epoch=own_epoch,
                        first_epoch=first_epoch,
                    )
                except PausedPastDeadline as paused:
                    last = JudgeRateLimited(
                        f"the judge's server asked every caller to wait {fmt_duration(paused.pause)} "
                        f"more (its retry-after on a congestion): longer than the {fmt_duration(left)} "
                        f"left of this job's {policy.deadline:g}s deadline"
                    )
                    errors.append(last.reason)
                    break
                epoch, free = grant.epoch, grant.free
                if free:
                    held = Usage(0, 0)
                end += waited
                if waited > 0 and observed():
                    emit(BudgetWaited(provider_of(judge), judge.model, waited))
            remaining = end - clock()
            if remaining < policy.min_attempt_time:
                if budget is not None:  # granted but never sent: give it back (a free grant took none)
                    budget.settle(held, Usage(0, 0), ok=False, epoch=epoch, share=share)
                break
            attempts += 1
            cut_short = remaining < policy.timeout
            sent = clock()
            try:
                reply = judge.complete(request, timeout=min(policy.timeout, remaining))
            except JudgeError as failed:
                exc = failed
                if observed():
                    _emit_call(judge, exc.reason, clock() - sent)
                if budget is not None:
                    budget.observe(exc.headers)
                    if not isinstance(exc, JudgeRateLimited):  # the input may have been read
                        budget.settle(
                            held,
                            Usage(reserve.input_tokens, 0),
                            ok=False,
                            epoch=epoch,
                            share=share,
                            free=free,
                        )
            else:
                if observed():
                    _emit_call(judge, "ok", clock() - sent, reply)
                if budget is not None:
                    budget.observe(reply.headers)
                    used = Usage(
                        reply.input_tokens + reply.cache_creation_input_tokens
                        if reply.limit_input_tokens is None
                        else reply.limit_input_tokens,
                        reply.output_tokens,
                    )
                    budget.settle(
                        held, used, ok=True, epoch=epoch, share=share, free=free, first=attempts == 1
                    )
                return CallOutcome(reply, None, attempts, clock() - start, errors)
        finally:
            if gate is not None:
                gate.release()
        errors.append(exc.reason)
        if first_failed is None:
            first_failed = clock()
        if budget is not None and isinstance(exc, JudgeRateLimited):
            refusals += 1
            refusal = budget.refused(
                held,
                exc.retry_after,
                epoch=epoch,
                nth=refusals,
                previous_epoch=previous_epoch,
                since=clock() - refused_at,
                share=share,
                free=free,
                lent=lent,
            )
            previous_epoch, refused_at = epoch, clock()
            lent = 0 if refusal.own else lent + 1
            # its next call may go free (Budget.acquire) when no congestion came since
            own_epoch = epoch if refusal.own else -1
            first_epoch = epoch if refusals == 1 else -1
            last = exc
            if refusals >= policy.max_rate_limited:
                break
            # this job waits the server's word (at most max_delay: a longer wait for everyone is
            # the budget's pause); whether every caller waits is the budget's call
            delay = exc.retry_after if exc.retry_after is not None else _backoff(policy, refusals, rng)
            delay = min(delay, policy.max_delay)
            sleep(delay)
            end += delay
            continue
        # An attempt the deadline cut short and that then timed out says nothing about
        # the judge: the job's reason stays what the judge said before (e.g. 500 -> api_error).
        if not (isinstance(exc, JudgeTimeout) and cut_short and last is not None):
            last = exc
        if not exc.retryable:
            break
        delay = exc.retry_after if exc.retry_after is not None else _backoff(policy, attempts, rng)
        if clock() + delay + policy.min_attempt_time > end:
            break
        sleep(delay)
    if last is None:
        last = JudgeTimeout(f"deadline of {policy.deadline:g}s ran out before an attempt")
    now = clock()
    failing = now - first_failed if first_failed is not None else 0.0
    own = isinstance(last, JudgeRateLimited) and own_epoch >= 0
    return CallOutcome(None, last, attempts, now - start, errors, failing, own)

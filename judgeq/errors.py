"""The judgeq exception tree.

Callers catch at the level they need::

    JudgeqError                      anything judgeq raises on purpose
    ├── ConfigError                  bad settings, judge spec, flag or environment variable
    ├── RubricError                  a rubric cannot be found, parsed or validated
    ├── JobsFileError                a jobs file is unreadable or has invalid lines
    │                                (``BatchError``: its earlier name, an alias)
    ├── StoreError                   the result store / broker cannot be reached
    └── JudgeError                   one judge call failed (``reason`` is the null reason)
        ├── JudgeTimeout             the attempt or the job deadline ran out        -> timeout
        ├── JudgeRateLimited         HTTP 429                                         -> rate_limited
        ├── JudgeOverloaded          HTTP 529                                         -> overloaded
        ├── JudgeAPIError            HTTP 5xx, connection errors                      -> api_error
        ├── JudgeAuthError           HTTP 401/403: bad key or no access               -> auth_error *
        ├── JudgeBillingError        HTTP 402, or "credit balance is too low"         -> billing_error *
        ├── JudgeCanceled            the request was canceled before it was judged    -> canceled
        └── JudgeInvalidRequest      HTTP 400/413/422: the request is wrong           -> invalid_request
            └── JudgeModelNotFound   HTTP 404: the judge model does not exist for you -> model_not_found *

``*``: a **systemic** failure (``JudgeError.systemic``): it says nothing about the job, so it
never becomes a job's null at once; a run whose calls fail this way N times in a row pauses
(``JUDGEQ_SYSTEMIC_FAILURES``) until ``judgeq resume``.

Whether any other failure is the job's own depends on the judge answering others: a job whose
calls ran out of attempts (:data:`UNAVAILABLE_REASONS`) while the judge answered no one is
held and the run waits for the judge (the run goes on by itself once it answers), and an
``invalid_request`` that every call gets (a gateway refusing a key with 400) counts toward the
pause like a refused key (:func:`judgeq.pipeline.stages.hold_kind`).

Errors raised to the user carry one line of text (``str(err)``) that names the file,
line and field where one applies; the CLI prints that line and exits non-zero, never a
traceback.  SDK exceptions are translated at the judge adapter, so retry and null-reason
policy depends on these types only.
"""

from __future__ import annotations

__all__ = [
    "NULL_REASONS",
    "SYSTEMIC_REASONS",
    "UNAVAILABLE_REASONS",
    "BatchError",
    "ConfigError",
    "JobsFileError",
    "JudgeAPIError",
    "JudgeAuthError",
    "JudgeBillingError",
    "JudgeCanceled",
    "JudgeError",
    "JudgeInvalidRequest",
    "JudgeModelNotFound",
    "JudgeOverloaded",
    "JudgeRateLimited",
    "JudgeTimeout",
    "JudgeqError",
    "RubricError",
    "RunPaused",
    "StoreError",
]


class JudgeqError(Exception):
    """Base class of every error judgeq raises on purpose."""


class ConfigError(JudgeqError):
    """Invalid settings, judge spec, CLI flag or environment variable."""


class RubricError(JudgeqError):
    """A rubric cannot be resolved, parsed or validated."""


class JobsFileError(JudgeqError):
    """A jobs file is unreadable or holds invalid lines (``errors``: one line per problem)."""

    def __init__(self, message: str, errors: list[str] | None = None) -> None:
        super().__init__(message)
        self.errors: list[str] = errors or []


BatchError = JobsFileError
"""The earlier name of :class:`JobsFileError` (kept: code catching it goes on working)."""


class StoreError(JudgeqError):
    """The result store or the broker cannot be reached."""


class RunPaused(JudgeqError):
    """A run paused for something a person must do (its cost cap reached, its key refused):
    what waits for it stops waiting and says why, with exit code :attr:`exit_code`."""

    exit_code = 3

    def __init__(self, message: str, run_id: str = "", reason: str = "") -> None:
        super().__init__(message)
        self.run_id, self.reason = run_id, reason


class JudgeError(JudgeqError):
    """One judge call failed; ``reason`` is the null reason recorded for the job."""

    reason: str = "api_error"
    retryable: bool = False
    systemic: bool = False

    def __init__(
        self, message: str, *, retry_after: float | None = None, headers: dict[str, str] | None = None
    ) -> None:
        super().__init__(message)
        self.retry_after = retry_after
        self.headers: dict[str, str] = headers or {}
        """The answer's rate-limit headers (``anthropic-ratelimit-*``), when there was one."""


class JudgeTimeout(JudgeError):
    """The attempt timed out, or the job's deadline ran out."""

    reason = "timeout"
    retryable = True


class JudgeRateLimited(JudgeError):
    """The judge answered 429."""

    reason = "rate_limited"
    retryable = True


class JudgeOverloaded(JudgeError):
    """The judge answered 529 (overloaded)."""

    reason = "overloaded"
    retryable = True


class JudgeAPIError(JudgeError):
    """A 5xx answer or a connection failure."""

    reason = "api_error"
    retryable = True


class JudgeAuthError(JudgeError):
    """The key was refused (401/403)."""

    reason = "auth_error"
    systemic = True


class JudgeBillingError(JudgeError):
    """The account cannot pay for calls (402, or a credit balance too low)."""

    reason = "billing_error"
    systemic = True


class JudgeCanceled(JudgeError):
    """The request was canceled before the judge answered it (a canceled Message Batch, or
    ``judgeq cancel``)."""

    reason = "canceled"


class JudgeInvalidRequest(JudgeError):
    """The judge rejected the request itself (400/413/422)."""

    reason = "invalid_request"


class JudgeModelNotFound(JudgeInvalidRequest):
    """The judge model does not exist, or this key may not use it (404)."""

    reason = "model_not_found"
    systemic = True


NULL_REASONS: tuple[str, ...] = (
    "timeout",
    "rate_limited",
    "overloaded",
    "api_error",
    "auth_error",
    "billing_error",
    "model_not_found",
    "invalid_request",
    "parse_error",
    "refusal",
    "internal_error",
    "lost",
    "canceled",
    "no_majority",
)
"""Every reason a job's grade can be null. ``internal_error``: an unexpected exception while
grading (a bug; the message is in ``raw``). ``lost``: the job never produced a result (set by
``judgeq finalize``, or by the reducer for a result that vanished). ``canceled``: the job was
canceled before the judge answered it (its Message Batch was canceled, or the run was). ``auth_error``,
``billing_error`` and ``model_not_found`` are systemic (:data:`SYSTEMIC_REASONS`): a job ends
with one only after its retries, when the run did not pause."""

SYSTEMIC_REASONS: frozenset[str] = frozenset({"auth_error", "billing_error", "model_not_found"})
"""Null reasons that say the judge set-up is broken, not the job (see the tree above)."""

UNAVAILABLE_REASONS: frozenset[str] = frozenset({"timeout", "rate_limited", "overloaded", "api_error"})
"""Null reasons that say the judge did not answer (after every attempt): the job's own null when
the judge answered other jobs meanwhile, else the judge is unavailable to everyone (an outage,
a 429 storm past the deadline) and the job is held while the run waits for it."""

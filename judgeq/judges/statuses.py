"""What an HTTP error status from a judge's API means, stated once for every provider.

A judge's error becomes a null reason (:data:`judgeq.errors.NULL_REASONS`) through one mapping,
:func:`error_for`; where providers differ, the difference is data (:class:`StatusRules`), not a
second copy of the mapping:

======================  ==========================================
status                  judgeq error (its null reason)
======================  ==========================================
a billing error code    JudgeBillingError (``billing_error``)
a refused-key code      JudgeAuthError (``auth_error``)
429                     JudgeRateLimited (``rate_limited``)
401, 403                JudgeAuthError (``auth_error``)
402, a billing phrase   JudgeBillingError (``billing_error``)
404                     JudgeModelNotFound (``model_not_found``)
408, a timeout status   JudgeTimeout (``timeout``)
an overloaded status    JudgeOverloaded (``overloaded``)
other 5xx, 409          JudgeAPIError (``api_error``)
any other 4xx           JudgeInvalidRequest (``invalid_request``)
======================  ==========================================

Each provider's rules live in its module (``ANTHROPIC_STATUSES`` in :mod:`.anthropic`,
``OPENAI_STATUSES`` in :mod:`.openai`, ``GEMINI_STATUSES`` in :mod:`.gemini`). The first row that
holds wins. Rate limits, overloads and server errors carry the server's
``retry-after``; which errors are retried and which pause the run is the errors' own
(:mod:`judgeq.errors`), not this mapping's.
"""

from __future__ import annotations

from dataclasses import dataclass

from judgeq.errors import (
    JudgeAPIError,
    JudgeAuthError,
    JudgeBillingError,
    JudgeError,
    JudgeInvalidRequest,
    JudgeModelNotFound,
    JudgeOverloaded,
    JudgeRateLimited,
    JudgeTimeout,
)

__all__ = ["StatusRules", "error_for"]


@dataclass(frozen=True, slots=True)
class StatusRules:
    """Where a provider's API says something its own way."""

    overloaded: frozenset[int] = frozenset({529})
    """Statuses meaning the service is overloaded (not this request's fault; retried)."""
    billing_codes: frozenset[str] = frozenset()
    """Error codes meaning the account is out of credit, whatever the status."""
    billing_phrases: tuple[str, ...] = ()
    """Words in a 400's message that mean the account is out of credit."""
    auth_codes: frozenset[str] = frozenset()
    """Error codes meaning the credential was refused, whatever the status (Google answers a
    bad key with 400 ``API_KEY_INVALID``)."""
    timeouts: frozenset[int] = frozenset()
    """Statuses beyond 408 meaning the server gave up waiting (Google's 504
    ``DEADLINE_EXCEEDED``)."""


def error_for(
    status: int,
    message: str,
    *,
    code: str = "",
    retry_after: float | None = None,
    rules: StatusRules = StatusRules(),
) -> JudgeError:
    """The judgeq error (its null reason) an HTTP ``status`` and the API's error ``code`` stand
    for under ``rules``: for live answers and for the lines of a batch's results alike."""
    if code and code in rules.billing_codes:
        return JudgeBillingError(message)
    if code and code in rules.auth_codes:
        return JudgeAuthError(message)
    if status == 429:
        return JudgeRateLimited(message, retry_after=retry_after)
    if status in (401, 403):
        return JudgeAuthError(message)
    if status == 402 or (status == 400 and any(p in message.lower() for p in rules.billing_phrases)):
        return JudgeBillingError(message)
    if status == 404:
        return JudgeModelNotFound(message)
    if status == 408 or status in rules.timeouts:
        return JudgeTimeout(message)
    if status in rules.overloaded:
        return JudgeOverloaded(message, retry_after=retry_after)
    if status >= 500 or status == 409:
        return JudgeAPIError(message, retry_after=retry_after)
    return JudgeInvalidRequest(message)

"""Reading a judge server's rate-limit headers: how long to wait (``retry-after``), the limits it
states, and when they reset. Pure: no Celery, Redis or SDK; ``headers`` is any mapping of
header names to values (a ``dict``, an ``httpx.Headers``), its names read case-insensitively.

**Waiting.** :func:`retry_after` reads ``retry-after-ms`` (milliseconds; OpenAI's SDK reads it
first too), then ``retry-after`` (RFC 9110 section 10.2.3,
https://www.rfc-editor.org/rfc/rfc9110#field.retry-after) in seconds or as an HTTP-date,
counted from the answer's own ``date`` header (so a skewed local clock does not matter) or,
without one, from the local clock. A date in the past is 0; nothing is capped (a server that
says an hour means an hour: what a caller does with a long wait is the caller's policy);
a negative, infinite or unreadable value is none.

**Which limits are per minute.** A limit is taken per minute only if nothing says its window is
longer:

* Anthropic (https://docs.anthropic.com/en/api/rate-limits, "Response headers"): its limits are
  requests, input tokens and output tokens *per minute* (RPM, ITPM, OTPM), stated in
  ``anthropic-ratelimit-{requests,input-tokens,output-tokens,tokens}-{limit,remaining}``; its
  ``-reset`` headers are the RFC 3339 time the limit is "fully replenished"
  (:func:`parse_reset` reads them). Taken per minute, as before.
* OpenAI (https://platform.openai.com/docs/guides/rate-limits, "Rate limits in headers"):
  ``x-ratelimit-{limit,remaining}-{requests,tokens}`` and ``x-ratelimit-reset-{requests,tokens}``,
  "the time until the rate limit ... resets to its initial state", as a Go duration (``1s``,
  ``6m0s``, ``20ms``). Its limits are per minute (RPM, TPM), but servers that copy these
  headers state other windows in them:
* Groq (https://console.groq.com/docs/rate-limits, "Rate limit headers"):
  ``x-ratelimit-limit-requests`` "always refers to Requests Per Day (RPD)" while
  ``x-ratelimit-limit-tokens`` is tokens per minute (TPM); its sample answer resets requests
  in ``2m59.56s`` and tokens in ``7.66s``.

  So the headers' names do not say the window; the reset does. A bucket that refills over a
  minute is back to its initial state within a minute of its last use, so a
  ``x-ratelimit-reset-{dim}`` over :data:`MINUTE` says that dimension's window is longer: it is
  not returned by :func:`server_limits` (neither its limit nor its remaining) but by
  :func:`long_window_limits`, with its reset, so a caller can stop until then when nothing
  remains. (OpenAI's documentation pairs its sample ``6m0s`` with a token limit: by this rule
  that limit is not taken per minute either; answers seen from OpenAI reset in milliseconds to
  seconds, as a per-minute bucket does.) The converse does not hold: a long-window limit far
  from used up resets within a minute (Groq's 14,400 requests a day refill one request in 6 s,
  so fewer than 10 used read ``<= 60s``), and nothing in the headers tells it from a per-minute
  one then.

A limit of 0 or less is no limit stated (Azure OpenAI has been seen answering
``x-ratelimit-limit-tokens: -1``); a negative remaining is none stated.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

__all__ = [
    "ANTHROPIC_PREFIX",
    "EPOCH_FROM",
    "HEADER_DIMENSIONS",
    "MINUTE",
    "OPENAI_DIMENSIONS",
    "OPENAI_PREFIX",
    "LongLimit",
    "fmt_duration",
    "long_window_limits",
    "parse_duration",
    "parse_reset",
    "retry_after",
    "server_limits",
]

MINUTE = 60.0
"""Seconds of the window a limit is taken per (see the module docstring)."""
HEADER_DIMENSIONS = ("requests", "input-tokens", "output-tokens", "tokens")
"""The limits the headers name: the policy's ``DIMENSIONS`` and ``COMBINED``
(:mod:`judgeq.ratelimit.policy`; kept equal by a test, not imported: the policy imports this)."""
OPENAI_DIMENSIONS = ("requests", "tokens")
"""The limits OpenAI-style headers name (``tokens``: input and output together)."""
ANTHROPIC_PREFIX = "anthropic-ratelimit-"
OPENAI_PREFIX = "x-ratelimit-"
EPOCH_FROM = 1e9
"""A reset given as a plain number this large (2001-09-09 as a Unix time, 31 years as a
duration) is read as a Unix time, not a duration: some servers send one."""

_PER_SECOND = {"h": 1 / 3600, "m": 1 / 60, "s": 1.0, "ms": 1e3, "us": 1e6, "µs": 1e6, "μs": 1e6, "ns": 1e9}
"""How many of each unit a second holds (dividing by it keeps ``20ms`` exactly 0.02)."""
_NUMBER = r"(?:\d+(?:\.\d*)?|\.\d+)"
_PART = re.compile(rf"({_NUMBER})(ms|us|µs|μs|ns|h|m|s)")
_DURATION = re.compile(rf"(?:{_NUMBER}(?:ms|us|µs|μs|ns|h|m|s))+")
_PLAIN = re.compile(rf"{_NUMBER}")


@dataclass(frozen=True, slots=True)
class LongLimit:
    """A limit stated over a window longer than a minute (Groq's requests a day)."""

    limit: int | None
    """The limit over its window; None: not stated."""
    remaining: int | None
    """What remains of it; None: not stated."""
    reset: float
    """Seconds until it is back to its initial state (over :data:`MINUTE`)."""

    @property
    def exhausted(self) -> bool:
        """Nothing remains: no call passes before :attr:`reset`."""
        return self.remaining is not None and self.remaining <= 0


def _lowered(headers: Mapping[str, str] | None) -> dict[str, str]:
    """The headers with lower-case names (a repeated header: its last value)."""
    return {str(k).lower(): str(v) for k, v in (headers or {}).items()}


def _non_negative(text: str) -> float | None:
    """A plain, finite, non-negative number; None otherwise (``inf``, ``nan``, ``-1``, ``1s``)."""
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) and value >= 0 else None


def _http_date(text: str) -> float | None:
    """An HTTP-date (IMF-fixdate and the two obsolete forms RFC 9110 makes readers accept) as a
    Unix time; one with no zone is UTC. None when unreadable."""
    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    return (when if when.tzinfo else when.replace(tzinfo=UTC)).timestamp()


def _rfc3339(text: str) -> float | None:
    """An RFC 3339 timestamp (``2026-01-01T00:00:30Z``) as a Unix time; one with no offset is
    UTC. None when unreadable (a bare date is no timestamp)."""
    if "T" not in text.upper():
        return None
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        return None
    return (when if when.tzinfo else when.replace(tzinfo=UTC)).timestamp()


def _now(lowered: Mapping[str, str], now: float | None) -> float:
    """``now``, else the answer's ``date`` header, else the local clock (Unix seconds)."""
    if now is not None:
        return now
    stated = _http_date(lowered["date"]) if "date" in lowered else None
    return stated if stated is not None else time.time()


def retry_after(headers: Mapping[str, str] | None, now: float | None = None) -> float | None:
    """Seconds the server asks to wait before the next call, or None when it asks nothing
    readable: ``retry-after-ms`` (milliseconds), else ``retry-after`` in seconds (a whole or
    decimal number) or as an HTTP-date, counted from ``now`` (Unix seconds; default: the
    answer's ``date`` header, else the local clock). A date in the past is 0; no upper bound;
    an unreadable or negative value is skipped (the next header is read)."""
    lowered = _lowered(headers)
    ms = _non_negative(lowered.get("retry-after-ms", "").strip())
    if ms is not None:
        return ms / 1000.0
    text = lowered.get("retry-after", "").strip()
    if not text:
        return None
    try:
        seconds = float(text)
    except ValueError:  # not a number: an HTTP-date, or nothing readable
        when = _http_date(text)
        return None if when is None else max(0.0, when - _now(lowered, now))
    return seconds if math.isfinite(seconds) and seconds >= 0 else None


def parse_duration(text: str | None) -> float | None:
    """Seconds in a duration as OpenAI-style reset headers write it (Go's format): ``1s``,
    ``6m0s``, ``20ms``, ``1m30s``, ``2m59.56s``, ``1h2m3s``, ``0.5s``, parts in any order and
    summed; or a plain number of seconds (``7.66``, ``0``). None for anything else (a sign, a
    space inside, an unknown unit, an empty value)."""
    if text is None:
        return None
    text = text.strip().lower()
    if not text:
        return None
    if _PLAIN.fullmatch(text):
        return _non_negative(text)
    if not _DURATION.fullmatch(text):
        return None
    total = sum(float(number) / _PER_SECOND[unit] for number, unit in _PART.findall(text))
    return total if math.isfinite(total) else None


def fmt_duration(seconds: float | None) -> str:
    """A duration as people read it: ``45s``, ``8m59s``, ``2h05m`` (whole seconds, down); ``?``
    for an unknown one."""
    if seconds is None:
        return "?"
    whole = int(seconds)
    h, rem = divmod(whole, 3600)
    m, s = divmod(rem, 60)
    return f"{h}h{m:02d}m" if h else (f"{m}m{s:02d}s" if m else f"{s}s")


def parse_reset(text: str | None, now: float | None = None) -> float | None:
    """Seconds until a rate limit resets, from any form a reset header takes: a duration
    (:func:`parse_duration`: OpenAI, Groq), an RFC 3339 timestamp (Anthropic's
    ``anthropic-ratelimit-*-reset``) or a Unix time (a plain number of at least
    :data:`EPOCH_FROM`), the last two counted from ``now`` (Unix seconds; default: the local
    clock) and 0 when past. None when unreadable."""
    if text is None or not text.strip():
        return None
    text = text.strip()
    clock = time.time() if now is None else now
    seconds = parse_duration(text)
    if seconds is not None and seconds >= EPOCH_FROM and _PLAIN.fullmatch(text):
        return max(0.0, seconds - clock)  # a Unix time
    if seconds is not None:
        return seconds
    when = _rfc3339(text)
    return None if when is None else max(0.0, when - clock)


def _count(value: str | None, *, positive: bool) -> int | None:
    """A header's count (``50``, ``30000.0``): a limit must be over 0, a remaining at least 0."""
    number = _non_negative(value.strip()) if value is not None else None
    if number is None or (positive and number < 1):
        return None
    return int(number)


def _reset_of(lowered: Mapping[str, str], dim: str, now: float | None) -> float | None:
    text = lowered.get(f"{OPENAI_PREFIX}reset-{dim}")
    return parse_reset(text, _now(lowered, now)) if text is not None else None


def _longer_than_a_minute(lowered: Mapping[str, str], dim: str) -> bool:
    """An OpenAI-style limit whose reset says its window is longer than a minute."""
    reset = _reset_of(lowered, dim, None)
    return reset is not None and reset > MINUTE


def server_limits(headers: Mapping[str, str] | None, what: str = "limit") -> dict[str, int]:
    """``{"requests": N, "input-tokens": N, "output-tokens": N, "tokens": N}`` of the per-minute
    limits the headers state: the ``limit`` (default) or ``remaining`` values. Anthropic's
    ``anthropic-ratelimit-{dim}-{what}``; else OpenAI's ``x-ratelimit-{what}-requests`` for
    requests and ``x-ratelimit-{what}-tokens`` for ``tokens`` (input and output together),
    unless its ``x-ratelimit-reset-{dim}`` is over a minute (a longer window: see
    :func:`long_window_limits` and the module docstring). An unreadable value, a limit under 1
    and a negative remaining are left out."""
    lowered = _lowered(headers)
    out: dict[str, int] = {}
    for dim in HEADER_DIMENSIONS:
        value = lowered.get(f"{ANTHROPIC_PREFIX}{dim}-{what}")
        if value is None and dim in OPENAI_DIMENSIONS and not _longer_than_a_minute(lowered, dim):
            value = lowered.get(f"{OPENAI_PREFIX}{what}-{dim}")
        count = _count(value, positive=what == "limit")
        if count is not None:
            out[dim] = count
    return out


def long_window_limits(headers: Mapping[str, str] | None, now: float | None = None) -> dict[str, LongLimit]:
    """``{dimension: LongLimit}`` of the OpenAI-style limits whose ``x-ratelimit-reset-{dim}``
    is over a minute (Groq's requests a day): their limit, remaining and seconds to reset (a
    timestamp counted from ``now``, default: the answer's ``date``, else the local clock). A
    caller stops until ``reset`` when one is :attr:`~LongLimit.exhausted`; these are never
    paced per minute (:func:`server_limits` leaves them out)."""
    lowered = _lowered(headers)
    out: dict[str, LongLimit] = {}
    for dim in OPENAI_DIMENSIONS:
        reset = _reset_of(lowered, dim, now)
        if reset is None or reset <= MINUTE:
            continue
        limit = _count(lowered.get(f"{OPENAI_PREFIX}limit-{dim}"), positive=True)
        remaining = _count(lowered.get(f"{OPENAI_PREFIX}remaining-{dim}"), positive=False)
        if limit is not None or remaining is not None:
            out[dim] = LongLimit(limit, remaining, reset)
    return out

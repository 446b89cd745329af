"""Secrets never reach what a person or a machine reads: :func:`redact` masks them in any text
(an error line, a log line, a report's note).

Two nets. By shape: a URL's credentials (``redis://:PASSWORD@host``, a malformed
``rediss//:PASSWORD@host``), ``Bearer``/``Basic`` tokens, ``api_key=X``-like pairs and provider
keys by their prefixes. By value: the secrets this process was given (:func:`known_secrets`:
every environment variable named like a key, token, secret or password, and the credentials of
every URL-valued one), wherever they appear and whatever shape the text around them has (an
SDK's error quoting a header, a URL an error message split).
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Mapping

__all__ = ["RedactingFilter", "known_secrets", "redact", "redact_logs", "url_credentials"]

_KEYS = re.compile(r"\b(sk-(?:ant-|proj-|or-)?|gsk_|AIza|xai-|hf_)[A-Za-z0-9_*\-]{6,}")
"""Provider keys by their prefixes (Anthropic, OpenAI, OpenRouter, Groq, Google, xAI, Hugging Face)."""
_SCHEMES = re.compile(
    r"(?i)\b(bearer)(\s*:?\s+)[A-Za-z0-9._~+/*=\-]{6,}"
    r"|\b(basic|token)(\s*:?\s+)(?=[A-Za-z._~+/*\-]*[0-9=])[A-Za-z0-9._~+/*=\-]{8,}"
)
"""``Authorization: Bearer X`` / ``Basic X`` / ``token X``: after ``basic`` or ``token`` only a
credential-like word (a digit or ``=`` in it), so "the output token limit" stays as written."""
_NAMED = re.compile(
    r"(?i)(?:\b|(?<=_))(x-api-key|api[_-]?key|secret|password|passwd|pwd)"
    r"([\"']?\s*[:=]\s*[\"']?)[^\s\"',;&]{4,}"
    r"|(?:\b|(?<=_))(key|token)(=)[^\s\"',;&]{4,}"
)
"""``api_key=X``, ``NAME_API_KEY=X``, ``"password": "X"``; ``key=X`` or ``token=X`` (a query
string; "key: accuracy" stays)."""
_URL_CREDENTIALS = re.compile(
    r"(//)(?![^/\s:@]*:(?:PASSWORD|\*\*\*)@)[^/\s:@]*:\S*?@(?=[^@\s/]*(?:[/\s\"'<>]|$))"
)
"""``redis://:PASSWORD@host``, ``https://user:PASSWORD@host``, ``rediss//:PASSWORD@host`` (a
scheme missing its colon); a password holding ``/`` or ``@`` too (up to the authority's last
``@``). The placeholder ``PASSWORD`` of an example stays, and so does a user name before a
password already masked (``user:***@``)."""

_SECRET_NAME = re.compile(r"(?i)(KEY|TOKEN|SECRET|PASSWORD|PASSWD|BASIC_AUTH|CREDENTIALS?)$")
"""An environment variable whose value is a secret by its name (``ANTHROPIC_API_KEY``,
``JUDGEQ_FLOWER_PASSWORD``, ``FLOWER_BASIC_AUTH``, ``REDIS_PASSWORD``)."""
_SHORTEST = 6
"""A value shorter than this, a number or a boolean is not masked by value (``1``, ``true``:
masking it would garble every line); its shape still is."""
_PLAIN = re.compile(r"(?i)[0-9.]+|true|false|none|null|yes|no|on|off")


def url_credentials(text: str) -> str:
    """The credentials of a URL-like ``text`` (everything between its scheme and the last ``@``
    of its authority, ``user:password``), or ``""``; read on the text, so a malformed URL
    (``rediss//:pw@host``, a password holding ``/`` or ``@``) has them too."""
    if "@" not in text:
        return ""
    rest = text.split("//", 1)[1] if "//" in text else text.split(":", 1)[-1]
    userinfo = rest.rpartition("@")[0]
    return userinfo if ":" in userinfo or "//" in text else ""


_cache: tuple[tuple[tuple[str, str], ...], tuple[str, ...]] | None = None


def known_secrets(environ: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """The secrets this process holds, longest first: values of variables named like secrets,
    the password (and the ``user:password``) of every URL-valued variable. Read from
    ``os.environ`` (cached while it is unchanged)."""
    global _cache
    env = os.environ if environ is None else environ
    items = tuple(env.items())  # (no sort: compared with the last call's on every log record)
    if environ is None and _cache is not None and _cache[0] == items:
        return _cache[1]
    found: set[str] = set()
    for name, value in items:
        value = value.strip()
        if not value:
            continue
        if _SECRET_NAME.search(name):
            found.add(value)
            if ":" in value and name.endswith("BASIC_AUTH"):  # user:password, comma-separated
                found.update(pair.partition(":")[2] for pair in value.split(","))
        creds = url_credentials(value) if "@" in value else ""
        if creds:
            found.add(creds)
            found.add(creds.partition(":")[2])
    kept = (s for s in found if len(s) >= _SHORTEST and not _PLAIN.fullmatch(s))
    out = tuple(sorted(kept, key=len, reverse=True))
    if environ is None:
        _cache = (items, out)
    return out


def redact(text: str, secrets: tuple[str, ...] | None = None) -> str:
    """``text`` with anything shaped like an API key, a token, a password or the credentials of
    a URL masked (the names kept: ``api_key=***``, ``Bearer ***``, ``redis://***@host``), and
    every secret this process holds (:func:`known_secrets`, or ``secrets``) masked wherever it
    appears."""
    for secret in known_secrets() if secrets is None else secrets:
        if secret in text:
            text = text.replace(secret, "***")
    text = _URL_CREDENTIALS.sub(r"\1***@", text)
    text = _SCHEMES.sub(_keep_name, text)
    text = _NAMED.sub(_keep_name, text)
    return _KEYS.sub(lambda m: f"{m.group(1)}***", text)


def _keep_name(m: re.Match[str]) -> str:
    """The name and separator of a matched ``name sep value`` (whichever alternative matched),
    the value masked."""
    name, sep = (g for g in m.groups() if g is not None)
    return f"{name}{sep}***"


class RedactingFilter(logging.Filter):
    """A handler filter that redacts each record (:func:`redact`) before any formatter sees it:
    its message (arguments merged in) and its traceback. Text logs get what JSON logs get."""

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, "_judgeq_redacted", False):
            return True
        record.msg, record.args = redact(record.getMessage()), None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact(record.exc_text)
        record._judgeq_redacted = True
        return True


def redact_logs(handlers: list[logging.Handler] | None = None) -> None:
    """Add :class:`RedactingFilter` to every root handler (or ``handlers``); idempotent."""
    for handler in handlers if handlers is not None else logging.getLogger().handlers:
        if not any(isinstance(f, RedactingFilter) for f in handler.filters):
            handler.addFilter(RedactingFilter())

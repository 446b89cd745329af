"""Structured logs (``JUDGEQ_LOG_FORMAT=json``): one JSON object per line, for log pipelines
(Loki, Elasticsearch, Cloud Logging). Every record keeps ``ts``, ``level``, ``logger`` and
``message``; the events of :mod:`judgeq.telemetry.events` add their fields, so every judge call
(run id, job index, judge, outcome, seconds, tokens), every stored job and every change of a
run's state (paused, resumed, finalized, canceled) is one line a query can select.

Never a secret or a job's text: events carry none, and every string is passed through
:func:`redact` (an API error that echoes a key, masked or not, is masked again)."""

from __future__ import annotations

import datetime as dt
import json
import logging
from typing import Any

from judgeq.telemetry.events import Event, JobStored, JudgeCall, RunChanged
from judgeq.telemetry.redact import redact

__all__ = ["EVENTS_LOGGER", "JsonFormatter", "log_event", "redact", "use_json_logs"]

EVENTS_LOGGER = "judgeq.events"


def _redacted(value: Any) -> Any:
    """``value`` with every string in it redacted (dicts and lists walked)."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {k: _redacted(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_redacted(v) for v in value]
    return value


class JsonFormatter(logging.Formatter):
    """A record as one JSON line: ``ts`` (UTC, ISO 8601), ``level``, ``logger``, ``message``,
    the event's fields (``event``, ``run_id``, ...) when it carries one, ``exc`` for an
    exception's traceback."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "ts": dt.datetime.fromtimestamp(record.created, dt.UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": redact(record.getMessage()),
        }
        fields = getattr(record, "judgeq", None)
        if isinstance(fields, dict):
            line.update({k: _redacted(v) for k, v in fields.items()})
        if record.exc_info:
            line["exc"] = redact(self.formatException(record.exc_info))
        return json.dumps(line, ensure_ascii=False, default=str)


def _fields(event: Event) -> tuple[str, dict[str, Any]] | None:
    if isinstance(event, JudgeCall):
        return (
            f"judge call {event.outcome} ({event.seconds:.3f} s)",
            {
                "event": "judge_call",
                "run_id": event.run_id,
                "index": event.index,
                "judge": f"{event.provider}:{event.model}",
                "outcome": event.outcome,
                "seconds": round(event.seconds, 4),
                "input_tokens": event.input_tokens,
                "output_tokens": event.output_tokens,
            },
        )
    if isinstance(event, JobStored):
        return (
            f"job {event.index} {event.status}" + (f" ({event.reason})" if event.reason else ""),
            {
                "event": "job_stored",
                "run_id": event.run_id,
                "index": event.index,
                "judge": event.judge,
                "outcome": event.reason or event.status,
                "seconds": round(event.seconds, 4),
                "cost_usd": round(sum(event.cost_usd.values()), 8),
                "batch": event.batch,
                "cached": event.cached,
            },
        )
    if isinstance(event, RunChanged):
        return (
            f"run {event.run_id} {event.state}" + (f": {event.reason}" if event.reason else ""),
            {"event": "run_state", "run_id": event.run_id, "state": event.state, "reason": event.reason},
        )
    return None


def log_event(event: Event) -> None:
    """An observer (:func:`judgeq.telemetry.add_observer`) that logs judge calls, stored jobs
    and run state changes to :data:`EVENTS_LOGGER` (INFO; state changes at WARNING)."""
    found = _fields(event)
    if found is None:
        return
    message, fields = found
    level = logging.WARNING if isinstance(event, RunChanged) else logging.INFO
    logging.getLogger(EVENTS_LOGGER).log(level, "%s", message, extra={"judgeq": fields})


def use_json_logs(handlers: list[logging.Handler] | None = None) -> None:
    """Format every root handler (or ``handlers``) as JSON lines and log the pipeline's events
    (:func:`log_event`); idempotent."""
    from judgeq.telemetry.events import add_observer

    targets = handlers if handlers is not None else logging.getLogger().handlers
    for handler in targets:
        if not isinstance(handler.formatter, JsonFormatter):
            handler.setFormatter(JsonFormatter())
    add_observer(log_event)

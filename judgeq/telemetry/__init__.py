"""Telemetry: events the pipeline emits (:mod:`.events`) and the JSON log lines made of them
(:mod:`.jsonlog`). Prometheus metrics are an edge's observer (``workers/metrics.py``)."""

from judgeq.telemetry.events import (
    BudgetWaited,
    CacheHit,
    Event,
    JobStored,
    JudgeCall,
    Observer,
    RunChanged,
    VerdictParsed,
    add_observer,
    current_job,
    emit,
    job_context,
    observed,
    observing,
    remove_observer,
)

__all__ = [
    "BudgetWaited",
    "CacheHit",
    "Event",
    "JobStored",
    "JudgeCall",
    "Observer",
    "RunChanged",
    "VerdictParsed",
    "add_observer",
    "current_job",
    "emit",
    "job_context",
    "observed",
    "observing",
    "remove_observer",
]

"""judgeq: distributed LLM-as-judge grading on Celery + Redis.

The package root is the pure core: rubrics, rendering, verdict parsing, scoring, metrics and
aggregation.  It imports no Celery, Redis or SDK (a test holds it to that); those live in
:mod:`judgeq.workers`, :mod:`judgeq.producer` and :mod:`judgeq.judges`.
"""

import typing as _typing

from judgeq.errors import (
    NULL_REASONS,
    SYSTEMIC_REASONS,
    BatchError,
    ConfigError,
    JudgeAPIError,
    JudgeAuthError,
    JudgeBillingError,
    JudgeCanceled,
    JudgeError,
    JudgeInvalidRequest,
    JudgeModelNotFound,
    JudgeOverloaded,
    JudgeqError,
    JudgeRateLimited,
    JudgeTimeout,
    RubricError,
    StoreError,
)
from judgeq.grading.job import GradingContext, grade_job, null_result
from judgeq.grading.request import JudgeRequest, output_schema, render_request, render_system, render_user
from judgeq.grading.result import Result
from judgeq.grading.safety import SAFETY_CATEGORIES, check_safety
from judgeq.grading.score import Score, apply_ceiling, score_verdict, weighted_overall
from judgeq.grading.verdict import ParsedVerdict, parse_verdict
from judgeq.jobs.models import Job, QuestionJob, ResponseJob
from judgeq.judges.base import CallOutcome, Judge, JudgeReply, RetryPolicy, call_with_retries
from judgeq.rubric.model import (
    Ceiling,
    CeilingRule,
    Chunk,
    Dimension,
    Golden,
    RetrievalConfig,
    Rubric,
    builtin_names,
    load_rubric,
    parse_rubric,
    parse_weights,
    weights_from_env,
)
from judgeq.settings import Settings, load_settings, mask_url
from judgeq.store.base import MemoryStore, Store
from judgeq.store.runfolder import Report, load_report

__all__ = [
    "NULL_REASONS",
    "SAFETY_CATEGORIES",
    "SYSTEMIC_REASONS",
    "BatchError",
    "CallOutcome",
    "Ceiling",
    "CeilingRule",
    "Chunk",
    "ConfigError",
    "Dimension",
    "Golden",
    "GradingContext",
    "Job",
    "Judge",
    "JudgeAPIError",
    "JudgeAuthError",
    "JudgeBillingError",
    "JudgeCanceled",
    "JudgeError",
    "JudgeInvalidRequest",
    "JudgeModelNotFound",
    "JudgeOverloaded",
    "JudgeRateLimited",
    "JudgeReply",
    "JudgeRequest",
    "JudgeTimeout",
    "JudgeqError",
    "MemoryStore",
    "ParsedVerdict",
    "QuestionJob",
    "Report",
    "ResponseJob",
    "Result",
    "RetrievalConfig",
    "RetryPolicy",
    "Rubric",
    "RubricError",
    "Score",
    "Settings",
    "Store",
    "StoreError",
    "apply_ceiling",
    "builtin_names",
    "call_with_retries",
    "check_safety",
    "grade",
    "grade_job",
    "load_report",
    "load_rubric",
    "load_settings",
    "mask_url",
    "null_result",
    "output_schema",
    "parse_rubric",
    "parse_verdict",
    "parse_weights",
    "render_request",
    "render_system",
    "render_user",
    "score_verdict",
    "submit",
    "wait",
    "weighted_overall",
    "weights_from_env",
]

if _typing.TYPE_CHECKING:
    from judgeq.producer.api import grade, submit, wait

_PRODUCER_API = frozenset({"grade", "submit", "wait"})


def __getattr__(name: str) -> _typing.Any:
    """``grade``, ``submit`` and ``wait`` run the producer (:mod:`judgeq.producer.api`): imported
    on first use, so ``import judgeq`` imports no Redis, Celery or SDK and the core never
    imports the producer."""
    if name in _PRODUCER_API:
        from judgeq.producer import api

        return getattr(api, name)
    raise AttributeError(f"module 'judgeq' has no attribute {name!r}")

"""judgeq: distributed LLM-as-judge grading on Celery + Redis.

The public API, and only it (as httpx does): :func:`grade`, :func:`submit`, :func:`wait`,
:func:`load_report` and :class:`Report`; the rubric, job and result models; the
:class:`Judge` protocol with what it takes and returns; the exception tree. Everything else
is reachable in its package (``judgeq.grading``, ``judgeq.store``, ...: the table in docs/index.md) but
not exported, so it may change between releases. ``import judgeq`` imports no Celery, Redis or
SDK (a test holds it to that).
"""

import typing as _typing

from judgeq.errors import (
    NULL_REASONS,
    BatchError,
    ConfigError,
    JobsFileError,
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
    RunPaused,
    StoreError,
)
from judgeq.grading.request import JudgeRequest
from judgeq.grading.result import Result
from judgeq.jobs.conversation import ConversationResult
from judgeq.jobs.kinds import read_result
from judgeq.jobs.models import Job, PairJob, QuestionJob, ResponseJob
from judgeq.jobs.pair import PairResult
from judgeq.jobs.question import QuestionResult
from judgeq.judges.base import Judge, JudgeReply
from judgeq.report.model import RunReport
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
)
from judgeq.store.runfolder import Report, load_report

__all__ = [
    "NULL_REASONS",
    "BatchError",
    "Ceiling",
    "CeilingRule",
    "Chunk",
    "ConfigError",
    "ConversationResult",
    "Dimension",
    "Golden",
    "Job",
    "JobsFileError",
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
    "PairJob",
    "PairResult",
    "QuestionJob",
    "QuestionResult",
    "Report",
    "ResponseJob",
    "Result",
    "RetrievalConfig",
    "Rubric",
    "RubricError",
    "RunPaused",
    "RunReport",
    "StoreError",
    "builtin_names",
    "grade",
    "load_report",
    "load_rubric",
    "parse_rubric",
    "read_result",
    "submit",
    "wait",
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

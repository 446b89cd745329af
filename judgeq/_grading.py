"""Grading one job: render -> judge (with retries) -> parse -> score -> :class:`Result`.

This is the only function a worker task calls; it never raises for a judge failure: the
result is ``null`` with its reason instead.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from ._budget import NO_LIMITS, Budget, Limits
from ._cache import ReplyCache, cache_key
from ._jobs import Job, QuestionJob
from ._judge import CallOutcome, Judge, RetryPolicy, call_with_retries
from ._render import DEFAULT_MAX_TOKENS, JudgeRequest, output_schema, render_system, render_user
from ._result import Result
from ._retrieval import first_relevant_rank, hits_at, total_score
from ._rubric import RetrievalConfig, Rubric
from ._scoring import score_verdict
from ._verdict import parse_verdict

NOTES_LIMIT = 4000


@dataclass(slots=True)
class GradingContext:
    """Everything that is the same for every job of a run; build it once per process."""

    rubric: Rubric
    judge: Judge
    policy: RetryPolicy = field(default_factory=RetryPolicy)
    max_tokens: int = DEFAULT_MAX_TOKENS
    safety_gate: bool | None = None
    safety_cap: float = 0.0
    retrieval: RetrievalConfig | None = None
    system: tuple[str, ...] = ()
    schema: dict[str, object] = field(default_factory=dict)
    budget: Budget | None = None
    limits: Limits = NO_LIMITS
    cache: ReplyCache | None = None

    def __post_init__(self) -> None:
        self.system = render_system(self.rubric)
        self.schema = output_schema(self.rubric)
        if self.retrieval is None:
            self.retrieval = self.rubric.retrieval or RetrievalConfig()

    def request_for(self, job: Job) -> JudgeRequest:
        fields = job.render_fields()
        return JudgeRequest(
            system=self.system,
            user=render_user(**fields),
            output_schema=self.schema,
            max_tokens=self.max_tokens,
            fields=fields,
        )


def grade_job(
    ctx: GradingContext,
    job: Job,
    index: int,
    *,
    sleep: Callable[[float], None] = time.sleep,
) -> Result:
    """Grade one job; a judge failure gives a ``null`` result with its reason."""
    rubric = ctx.rubric
    request = ctx.request_for(job)
    key = cache_key(ctx.judge.model, request, rubric) if ctx.cache is not None else None
    hit = ctx.cache.get(key) if ctx.cache is not None and key is not None else None
    if hit is not None:
        outcome = CallOutcome(hit, None, 0, 0.0)
    else:
        outcome = call_with_retries(
            ctx.judge, request, ctx.policy, sleep=sleep, budget=ctx.budget, limits=ctx.limits
        )
    base = {
        "job_id": job.id,
        "index": index,
        "kind": job.kind,
        "grading_latency_ms": round(outcome.elapsed * 1000, 1),
        "attempts": outcome.attempts,
        "rubric_name": rubric.name,
        "rubric_version": rubric.version,
        "judge_model": ctx.judge.model,
        "model": job.model,
        "cached": hit is not None,
    }
    if isinstance(job, QuestionJob):
        base.update(_question_fields(job, ctx.retrieval or RetrievalConfig()))
    reply = outcome.reply
    if reply is None:
        assert outcome.error is not None
        return _null(outcome.error.reason, str(outcome.error)[:RAW_NULL_LIMIT], base)
    base.update(
        input_tokens=reply.input_tokens,
        output_tokens=reply.output_tokens,
        cache_read_input_tokens=reply.cache_read_input_tokens,
        cache_creation_input_tokens=reply.cache_creation_input_tokens,
    )
    verdict = parse_verdict(
        rubric, text=reply.text, tool_input=reply.tool_input, stop_reason=reply.stop_reason
    )
    notes = verdict.notes[:NOTES_LIMIT] if verdict.notes else None
    if verdict.null_reason is not None:
        return _null(verdict.null_reason, verdict.raw, base, notes=notes, flags=verdict.flags)
    # The safety gate checks what a model said; retrieved documents are not checked.
    candidate = job.output if job.kind == "response" else None
    score = score_verdict(
        rubric,
        verdict,
        candidate=candidate,
        safety_gate=ctx.safety_gate,
        safety_cap=ctx.safety_cap,
    )
    if isinstance(job, QuestionJob):
        grade = llm_grade(score.overall, rubric)
        base["llm_grade"] = grade
        base["total_score"] = total_score(grade, base["rank"], ctx.retrieval or RetrievalConfig())
        base["llm_reasoning"] = notes
        base["key_facts_present"] = verdict.extra.get("key_facts_present")
        base["key_facts_missing"] = verdict.extra.get("key_facts_missing")
    if ctx.cache is not None and key is not None and hit is None:
        ctx.cache.put(key, reply)  # only graded replies are kept: a failure is asked again
    return Result(
        status="graded",
        scores=score.scores,
        overall=score.overall,
        passed=score.passed,
        flags=score.flags,
        safety_categories=score.safety_categories,
        notes=notes,
        **base,
    )


RAW_NULL_LIMIT = 500
"""Characters of an error message kept in a null's ``raw`` (a judge's reply keeps its own
limit, :data:`judgeq._verdict.RAW_LIMIT`)."""


def null_result(
    *,
    index: int,
    reason: str,
    why: str | None,
    rubric_name: str,
    rubric_version: str,
    judge_model: str,
    job: Job | None = None,
    job_id: str | None = None,
    retrieval: RetrievalConfig | None = None,
) -> Result:
    """The one way a null result is made, whatever the path (judge failure, unparseable
    verdict, internal error, lost, finalized, canceled).

    A null keeps its job's kind, id and model, so it counts in the denominators of its own
    section (``retrieval.questions``, ``by_model``): with ``job``, a question's retrieval
    fields (rank, hits: they need no judge) are filled in too; without it (the payload is
    gone) the null is a response-kind job named ``job_id`` with no model.
    """
    base: dict[str, object] = {
        "job_id": job.id if job is not None else (job_id or f"#{index}"),
        "index": index,
        "rubric_name": rubric_name,
        "rubric_version": rubric_version,
        "judge_model": judge_model,
    }
    if job is not None:
        base.update(kind=job.kind, model=job.model)
        if isinstance(job, QuestionJob):
            base.update(_question_fields(job, retrieval or RetrievalConfig()))
    return _null(reason, why[:RAW_NULL_LIMIT] if why else why, base)


def _null(reason: str, raw: str | None, base: dict[str, object], **extra: object) -> Result:
    return Result(status="null", null_reason=reason, raw=raw, **base, **extra)  # type: ignore[arg-type]


def llm_grade(overall: float, rubric: Rubric) -> int:
    """A question's grade on 1-10 whatever the rubric's scale (pass 10, fail 1; 1-5 mapped
    linearly), rounded half up (7.5 -> 8), so retrieval metrics mean the same for every rubric."""
    lo, hi = rubric.lo, rubric.hi
    on_ten = 1 + 9 * (min(max(overall, lo), hi) - lo) / (hi - lo) if (lo, hi) != (1, 10) else overall
    return max(1, min(10, math.floor(on_ten + 0.5)))


def _question_fields(job: QuestionJob, config: RetrievalConfig) -> dict[str, object]:
    doc_ids = [c.doc_id for c in job.retrieved]
    rank = first_relevant_rank(doc_ids, job.relevant)
    hits = hits_at(rank, sorted({*config.hit_k, 1, 5}))
    return {
        "question_id": job.id,
        "question": job.question,
        "expected_answer": job.expected_answer,
        "retrieved_doc_ids": doc_ids[:100],
        "needle_found": rank is not None,
        "rank": rank,
        "hit_at_1": hits["1"],
        "hit_at_5": hits["5"],
        "hit_at_k": {str(k): hits[str(k)] for k in config.hit_k},
        "latency_ms": job.latency_ms,
    }

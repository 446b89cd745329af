"""Grading one job: render -> judge (with retries) -> parse -> score -> :class:`Result`.

A job is one or more judge **calls** (:func:`job_calls`): one per judge of the run (a
council, ``--judge A --judge B``), and for a pair job one per order (A/B, then B/A, unless
``--no-swap``).  :func:`grade_job` makes them (a reply in the reply cache makes no call) and
:func:`combine` turns their outcomes into one result: a job is graded once and counted once,
whatever its number of calls.  It never raises for a judge failure: a failed call (after its
retries) makes the whole job ``null`` with that call's reason, and the remaining calls are not
made.

* a pair job's verdict per judge is the verdict of both orders when they agree; a verdict that
  flips with the order becomes a tie flagged ``position_inconsistent``.  ``overall`` is output
  A's score: 1 (A wins), 0.5 (tie), 0 (B wins); ``winner`` says ``a``, ``b`` or ``tie``;
* a council's ``overall`` is the mean of its judges' overall scores (per dimension likewise;
  pass-fail: the share of judges that said pass, passed when more than half did; pairs: the
  mean of A's scores, so ``winner`` is the majority); ``judge_scores`` keeps each judge's,
  and a spread above the run's ``disagreement`` threshold flags ``judges_disagree``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from judgeq.errors import JudgeError
from judgeq.grading.cascade import ABSTAINED, CascadeRecord, CascadeSpec, StageVerdict, confidence_of
from judgeq.grading.request import DEFAULT_MAX_TOKENS, JudgeRequest, output_schema, render_system, render_user
from judgeq.grading.result import Result
from judgeq.grading.verdict import parse_verdict
from judgeq.jobs.grade import NOTES_LIMIT, Graded, Jury, Scoring, Unit
from judgeq.jobs.kinds import kind_for, kind_of, make_result
from judgeq.jobs.models import JOB_MODELS, Job, infer_kind
from judgeq.judges.base import (
    CallOutcome,
    Gate,
    Judge,
    JudgeBase,
    JudgeReply,
    RetryPolicy,
    adopt,
    cache_identity,
    call_with_retries,
    provider_of,
)
from judgeq.judges.providers import is_offline
from judgeq.ratelimit import Budget, Share
from judgeq.rubric.model import RetrievalConfig, Rubric
from judgeq.runspec import RunSpec
from judgeq.store.reply_cache import ReplyCache, cache_key
from judgeq.telemetry import CacheHit, VerdictParsed, emit, job_context, observed

__all__ = [
    "NOTES_LIMIT",
    "RAW_NULL_LIMIT",
    "Call",
    "CallResult",
    "GradingContext",
    "call_count",
    "combine",
    "context_for",
    "default_disagreement",
    "grade_job",
    "job_calls",
    "job_fields",
    "null_result",
    "parse_job",
    "plan_calls",
]


@dataclass(frozen=True, slots=True)
class Call:
    """One judge call of a job: which judge of the run (0: the first ``--judge``), which
    request, and for a pair job whether the outputs are shown swapped (B first)."""

    tag: str
    judge: int
    request: JudgeRequest
    swapped: bool = False
    turn: int | None = None
    """A conversation graded turn by turn: the index of the assistant message this call grades."""

    @property
    def unit(self) -> Unit:
        """What of its job this call grades."""
        return Unit(self.swapped, self.turn)


@dataclass(slots=True)
class CallResult:
    """A call and its outcome: the reply (or the final error), its cache key and whether the
    reply came from the cache."""

    call: Call
    outcome: CallOutcome
    key: str | None = None
    cached: bool = False


@dataclass(slots=True)
class GradingContext:
    """Everything that is the same for every job of a run; build it once per process.

    ``judge``/``budget`` are the run's (first) judge; ``council`` the other judges of a
    council with their budgets."""

    rubric: Rubric
    judge: JudgeBase
    policy: RetryPolicy = field(default_factory=RetryPolicy)
    max_tokens: int = DEFAULT_MAX_TOKENS
    safety_gate: bool | None = None
    safety_cap: float = 0.0
    retrieval: RetrievalConfig | None = None
    system: tuple[str, ...] = ()
    schema: dict[str, object] = field(default_factory=dict)
    budget: Budget | None = None
    share: Share | None = None
    """The run's share of its judges' limits (``--share``)."""
    cache: ReplyCache | None = None
    council: tuple[tuple[JudgeBase, Budget | None], ...] = ()
    swap: bool = True
    disagreement: float | None = None
    jury: Jury | None = None
    """The council is a jury, with these rules (:class:`~judgeq.jobs.grade.Jury`)."""
    gate: Gate | None = None
    """This process's bound on judge calls in flight (a worker's ``JUDGEQ_CONCURRENCY``)."""
    cascade: CascadeSpec | None = None
    """The run's judges are a cascade (:mod:`judgeq.grading.cascade`): the first judge and the
    council, in order of cost."""
    stages: dict[int, GradingContext] = field(default_factory=dict, repr=False)
    """A cascade's stage contexts, each of one judge (:meth:`stage`)."""
    run_id: str | None = None
    """The run graded; a cached reply this run's own job paid for (its earlier delivery was
    killed after the reply was cached, before its result was stored) is that job's spend,
    not a cache hit."""

    def __post_init__(self) -> None:
        self.judge = adopt(self.judge)  # (a judge written to the Judge contract alone: a test's)
        self.council = tuple((adopt(j), b) for j, b in self.council)
        self.system = render_system(self.rubric)
        self.schema = output_schema(self.rubric)
        if self.retrieval is None:
            self.retrieval = self.rubric.retrieval or RetrievalConfig()
        if self.disagreement is None:
            self.disagreement = default_disagreement(self.rubric)

    @property
    def judges(self) -> list[tuple[JudgeBase, Budget | None]]:
        return [(self.judge, self.budget), *self.council]

    def stage(self, s: int) -> GradingContext:
        """The context of judge ``s`` alone (a cascade's stage ``s``: its verdicts are scored as
        that judge's alone would be)."""
        built = self.stages.get(s)
        if built is None:
            judge, budget = self.judges[s]
            built = self.stages[s] = replace(
                self, judge=judge, budget=budget, council=(), cascade=None, stages={}
            )
        return built

    @property
    def samples(self) -> int:
        """Calls per unit per judge: a cascade's samples, else one."""
        return self.cascade.samples if self.cascade is not None else 1

    def cache_key(self, request: JudgeRequest, judge: Judge | None = None) -> str | None:
        """The reply-cache key of ``request`` to ``judge`` (default: the first); None when this
        run has no cache."""
        if self.cache is None:
            return None
        # every judge's key names its provider, server and model: two servers of one model
        # name (a stand-in and the real API, two gateways) never share replies
        return cache_key(cache_identity(judge or self.judge), request, self.rubric)

    def paid_by(self, index: int) -> str | None:
        """The mark a reply to job ``index`` of this run carries in the reply cache."""
        return None if self.run_id is None else f"{self.run_id}:{index}"

    @property
    def scoring(self) -> Scoring:
        """What combining a job's verdicts needs of the run."""
        return Scoring(
            rubric=self.rubric,
            judges=len(self.judges),
            disagreement=self.disagreement or 0.0,
            safety_gate=self.safety_gate,
            safety_cap=self.safety_cap,
            retrieval=self.retrieval,
            jury=self.jury,
        )

    def cached_replies(self, job: Job) -> bool:
        """Whether the cache holds a reply to every call of ``job`` (it then needs no judge; a
        job a hard check settles has no call: it needs none, cache or not)."""
        if call_count(self, job) == 0:
            return True
        if self.cache is None:
            return False
        for call in job_calls(self, job):
            key = self.cache_key(call.request, self.judges[call.judge][0])
            if key is None or self.cache.get(key) is None:
                return False
        return True

    def request_for(self, job: Job, unit: Unit | None = None) -> JudgeRequest:
        """The judge's request for one unit of ``job`` (default: the whole job)."""
        fields = job.request_fields(unit or Unit(), self.rubric)
        return JudgeRequest(
            system=self.system,
            user=render_user(**fields),
            output_schema=self.schema,
            max_tokens=self.max_tokens,
            fields=fields,
        )


def context_for(
    spec: RunSpec,
    judge: JudgeBase,
    budget: Budget | None = None,
    cache: ReplyCache | None = None,
    council: tuple[tuple[JudgeBase, Budget | None], ...] = (),
    gate: Gate | None = None,
) -> GradingContext:
    """The grading context of ``spec``'s run; ``cache`` is used when the run allows it (not
    ``--no-cache``) and the judge is an LLM (the offline lexical judge is not worth caching)."""
    return GradingContext(
        run_id=spec.run_id,
        gate=gate,
        council=council,
        swap=spec.swap,
        disagreement=spec.disagreement,
        budget=budget,
        cache=cache if spec.cache and not is_offline(spec.judge_provider) else None,
        share=spec.budget_share(),
        rubric=spec.rubric,
        judge=judge,
        policy=spec.policy(),
        max_tokens=spec.max_tokens,
        safety_gate=spec.safety_gate,
        safety_cap=spec.safety_cap,
        retrieval=spec.retrieval,
        jury=spec.jury_rules(),
        cascade=spec.cascade,
    )


def default_disagreement(rubric: Rubric) -> float:
    """Judges disagree on a job when their scores spread more than this: 30% of the scale
    (3 points on 1-10), one step of pass-fail or of a pair verdict (pass vs fail, A vs B)."""
    if rubric.is_pass_fail or rubric.is_pairwise:
        return 0.5
    return round(0.3 * (rubric.hi - rubric.lo), 2)


def job_calls(ctx: GradingContext, job: Job) -> list[Call]:
    """The judge calls of ``job``: per judge, one per unit of the job (:meth:`Job.units`: the
    whole job, a pair's two orders, a conversation's turns; none for a job its checks settle)."""
    units = job.units(ctx.rubric, swap=ctx.swap)
    requests = [ctx.request_for(job, unit) for unit in units]
    calls: list[Call] = []
    for j in range(len(ctx.judges)):
        for k in range(ctx.samples):  # a cascade's samples: sample 0 is the request any run makes
            for unit, request in zip(units, requests, strict=True):
                sampled = replace(request, sample=k) if k else request
                calls.append(Call(str(len(calls)), j, sampled, unit.swapped, unit.turn))
    return calls


def grade_job(
    ctx: GradingContext,
    job: Job,
    index: int,
    *,
    sleep: Callable[[float], None] = time.sleep,
    planned: list[tuple[Call, str | None]] | None = None,
) -> Result:
    """Grade one job; a judge failure gives a ``null`` result with its reason. ``planned``:
    its calls with their cache keys, when the caller made them already (:func:`plan_calls`)."""
    if planned is None:
        planned = plan_calls(ctx, job)
    if ctx.cascade is not None:
        return _grade_cascade(ctx, ctx.cascade, job, index, planned, sleep)
    return combine(ctx, job, index, _make_calls(ctx, index, planned, sleep))


def _make_calls(
    ctx: GradingContext,
    index: int,
    planned: Sequence[tuple[Call, str | None]],
    sleep: Callable[[float], None],
) -> list[CallResult]:
    """Make ``planned`` calls in order (a reply in the reply cache makes no call), until one
    fails: the job is then null and the other calls would be paid for nothing."""
    results: list[CallResult] = []
    for call, key in planned:
        judge, budget = ctx.judges[call.judge]
        hit = ctx.cache.get(key) if ctx.cache is not None and key is not None else None
        if hit is not None:
            outcome = CallOutcome(hit, None, 0, 0.0)
            if observed():
                emit(CacheHit(provider_of(judge), judge.model))
        else:
            with job_context(ctx.run_id or "", index):
                outcome = call_with_retries(
                    judge,
                    call.request,
                    ctx.policy,
                    sleep=sleep,
                    budget=budget,
                    share=ctx.share,
                    gate=ctx.gate,
                )
        # a reply this very job paid for (a redelivery) is its own spend, not a saving
        own = hit is not None and hit.paid_by is not None and hit.paid_by == ctx.paid_by(index)
        results.append(CallResult(call, outcome, key, hit is not None and not own))
        if outcome.reply is None:
            break
    return results


def _grade_cascade(
    ctx: GradingContext,
    cascade: CascadeSpec,
    job: Job,
    index: int,
    planned: Sequence[tuple[Call, str | None]],
    sleep: Callable[[float], None],
) -> Result:
    """A cascade's job (:mod:`judgeq.grading.cascade`): each stage's judge grades it
    ``samples`` times, and the first stage confident enough keeps its first sample's verdict;
    a job no stage keeps is abstained. A failed call makes the job null with its reason, as in
    any run (an outage pauses, it never abstains); the replies already paid for are kept."""
    if not planned:  # its kind's rules settled it: no judge, no cascade
        return combine(ctx.stage(0), job, index, [])
    asked: list[CallResult] = []
    stages: list[StageVerdict] = []
    kept: tuple[int, Result] | None = None
    for s in range(len(ctx.judges)):
        results = _make_calls(ctx, index, [(c, k) for c, k in planned if c.judge == s], sleep)
        asked += results
        if any(r.outcome.reply is None for r in results):
            stage_ctx = ctx.stage(s)
            failed = combine(
                stage_ctx, job, index, [replace(r, call=replace(r.call, judge=0)) for r in results]
            )
            # (this stage's answered replies are kept by its combine: the earlier stages' here)
            _keep_answered(ctx, index, asked[: len(asked) - len(results)])
            failed._served = _served(ctx, asked)
            return failed
        samples = [
            combine(
                ctx.stage(s),
                job,
                index,
                [replace(r, call=replace(r.call, judge=0)) for r in results if r.call.request.sample == k],
            )
            for k in range(cascade.samples)
        ]
        verdicts = [r.verdict() for r in samples]
        confidence = confidence_of(verdicts)
        threshold = cascade.thresholds[s]
        first = [r.outcome.reply for r in results if r.call.request.sample == 0 and r.outcome.reply]
        stages.append(
            StageVerdict(
                judge=ctx.judges[s][0].model,
                verdict=verdicts[0],
                confidence=round(confidence, 4),
                threshold=threshold,
                input_tokens=sum(x.input_tokens for x in first),
                output_tokens=sum(x.output_tokens for x in first),
                cache_read_input_tokens=sum(x.cache_read_input_tokens for x in first),
                cache_creation_input_tokens=sum(x.cache_creation_input_tokens for x in first),
            )
        )
        if threshold is not None and verdicts[0] is not None and confidence >= threshold:
            kept = s, samples[0]
            break
    base = _base_fields(ctx, job, index, asked, batch=False)
    spend: dict[str, object] = {
        k: base[k]
        for k in (
            "grading_latency_ms",
            "attempts",
            "cached",
            "input_tokens",
            "output_tokens",
            "cache_read_input_tokens",
            "cache_creation_input_tokens",
            "judge_usage",
        )
        if k in base
    }
    if kept is not None:
        s, verdict = kept
        record = CascadeRecord(stage=s, stages=stages)
        result = verdict.model_copy(
            update={**spend, "judge_model": ctx.judges[s][0].model, "cascade": record}
        )
    else:
        said = "; ".join(
            f"{v.judge} {v.verdict or 'gave no verdict'} at confidence {v.confidence:.2f}"
            + (f" (needs {v.threshold:.2f})" if v.threshold is not None else " (keeps nothing)")
            for v in stages
        )
        why = f"no judge of the cascade was confident enough: {said}"
        base["judge_model"] = stages[-1].judge
        result = _null(
            ABSTAINED, why[:RAW_NULL_LIMIT], base, cascade=CascadeRecord(stage=None, stages=stages)
        )
    result._served = _served(ctx, asked)
    return result


def _served(ctx: GradingContext, results: Sequence[CallResult]) -> list[str]:
    return [
        provenance(ctx.judges[r.call.judge][0], r.outcome.reply)
        for r in results
        if r.outcome.reply is not None and not r.cached
    ]


def plan_calls(ctx: GradingContext, job: Job) -> list[tuple[Call, str | None]]:
    """The calls of ``job`` with their reply-cache keys (None without a cache)."""
    return [(call, ctx.cache_key(call.request, ctx.judges[call.judge][0])) for call in job_calls(ctx, job)]


def combine(
    ctx: GradingContext,
    job: Job,
    index: int,
    results: Sequence[CallResult],
    *,
    batch: bool = False,
) -> Result:
    """One result from the outcomes of a job's calls (in :func:`job_calls` order): parse,
    score, combine (pairs, councils), and keep each graded reply in the cache. ``batch``:
    the replies came from the batch lane (their cost is discounted). The provenance of its
    answered calls rides along (:attr:`Result._served`), to be counted when it is stored."""
    result = _combine(ctx, job, index, results, batch=batch)
    result._served = _served(ctx, results)
    return result


def _combine(
    ctx: GradingContext,
    job: Job,
    index: int,
    results: Sequence[CallResult],
    *,
    batch: bool = False,
) -> Result:
    rubric = ctx.rubric
    judges = ctx.judges
    base = _base_fields(ctx, job, index, results, batch=batch)
    jury = ctx.jury is not None and len(judges) > 1
    absent: dict[int, str] = {}  # a jury's members that did not answer this job: why
    for r in results:
        if r.outcome.reply is None:
            error = r.outcome.error or JudgeError("no reply")
            if jury and error.reason in ABSENT_REASONS:
                absent.setdefault(r.call.judge, error.reason)
                continue
            failed = _null(error.reason, _who(ctx, r) + str(error)[:RAW_NULL_LIMIT], base)
            failed._failing_s, failed._own_refusal = r.outcome.failing, r.outcome.own_refusal
            _keep_answered(ctx, index, results)
            return failed
    if len(results) < call_count(ctx, job):
        return _null("internal_error", "a judge call of this job is missing", base)
    graded: list[Graded] = []
    for r in results:
        reply = r.outcome.reply
        if reply is None:
            continue  # (an absent member's)
        pv = parse_verdict(
            rubric, text=reply.text, tool_input=reply.tool_input, stop_reason=reply.stop_reason
        )
        if observed() and not r.cached:
            member = judges[r.call.judge][0]
            emit(VerdictParsed(provider_of(member), member.model, pv.null_reason or "ok"))
        if pv.null_reason is not None and jury and pv.null_reason in ABSENT_REASONS:
            absent.setdefault(r.call.judge, pv.null_reason)
            continue
        if pv.null_reason is not None:
            notes = pv.notes[:NOTES_LIMIT] if pv.notes else None
            raw = (_who(ctx, r) + (pv.raw or ""))[: RAW_NULL_LIMIT * 4]
            return _null(pv.null_reason, raw, base, notes=notes, flags=pv.flags)
        graded.append(Graded(r.call.unit, r.call.judge, judges[r.call.judge][0].model, pv))
    missing = {judges[j][0].model: why for j, why in sorted(absent.items())}
    if missing:  # every call of an absent member is left out; the panel keeps its seat
        graded = [g for g in graded if g.judge not in absent]
        base["judges_absent"] = missing
    fields = job.grade(ctx.scoring, graded, base) if graded or not absent else {"null_reason": "no_majority"}
    if fields.get("null_reason"):
        said = ", ".join(f"{m}: {why}" for m, why in missing.items())
        why = f"no verdict has a majority of the panel of {len(judges)}"
        return _null(str(fields["null_reason"]), why + (f" ({said} absent)" if said else ""), base)
    # no verdict at all: no call was due (a job its checks settle); the kind says what that is
    result = make_result(status="graded", **{**base, **fields})
    if ctx.cache is not None and result.status == "graded":
        paid_by = ctx.paid_by(index)
        for r in results:  # only graded replies are kept: a failure is asked again
            if r.key is not None and not r.cached and r.outcome.reply is not None:
                ctx.cache.put(r.key, replace(r.outcome.reply, paid_by=paid_by))
    return result


def _base_fields(
    ctx: GradingContext, job: Job, index: int, results: Sequence[CallResult], *, batch: bool
) -> dict[str, object]:
    """What a result of ``job`` from these calls' outcomes has whatever its verdict: the job's
    fields, the time, attempts and tokens spent (a council's and a cascade's per judge model)."""
    judges = ctx.judges
    all_cached = bool(results) and all(r.cached for r in results)
    spent = [r for r in results if all_cached or not r.cached]
    base: dict[str, object] = {
        "job_id": job.id,
        "index": index,
        "kind": job.kind,
        "grading_latency_ms": round(sum(r.outcome.elapsed for r in results) * 1000, 1),
        "attempts": sum(r.outcome.attempts for r in results),
        "rubric_name": ctx.rubric.name,
        "rubric_version": ctx.rubric.version,
        "judge_model": ctx.judge.model,
        "cached": all_cached,
        "batch": batch,
        **job_fields(job, ctx.rubric, ctx.retrieval),
    }
    replies = [r.outcome.reply for r in spent if r.outcome.reply is not None]
    base.update(
        input_tokens=sum(x.input_tokens for x in replies),
        output_tokens=sum(x.output_tokens for x in replies),
        cache_read_input_tokens=sum(x.cache_read_input_tokens for x in replies),
        cache_creation_input_tokens=sum(x.cache_creation_input_tokens for x in replies),
    )
    if len(judges) > 1:
        usage: dict[str, list[int]] = {}
        for r in spent:
            if r.outcome.reply is not None:
                x = r.outcome.reply
                row = usage.setdefault(judges[r.call.judge][0].model, [0, 0, 0, 0])
                for i, n in enumerate(
                    (
                        x.input_tokens,
                        x.output_tokens,
                        x.cache_read_input_tokens,
                        x.cache_creation_input_tokens,
                    )
                ):
                    row[i] += n
        base["judge_usage"] = usage
    return base


ABSENT_REASONS = frozenset({"parse_error", "refusal", "invalid_request"})
"""Why a jury member may be absent from a job's panel: it answered, but not with a verdict
(one that does not parse, a refusal) or refused the request itself. A member that could not
answer (its judge down, rate-limited, its key refused) holds or pauses the job as any judge's
failure does: an outage never decides a verdict."""


def _keep_answered(ctx: GradingContext, index: int, results: Sequence[CallResult]) -> None:
    """A job null because one of its calls failed keeps the replies its other calls got (those
    that parse) in the reply cache, marked paid by it: when it is graded again (held for an
    outage or a refused key, then retried) they are served from the cache and counted once, as
    its own spend (:func:`grade_job`), not paid again."""
    if ctx.cache is None:
        return
    for r in results:
        reply = r.outcome.reply
        if r.key is None or r.cached or reply is None:
            continue
        parsed = parse_verdict(
            ctx.rubric, text=reply.text, tool_input=reply.tool_input, stop_reason=reply.stop_reason
        )
        if parsed.null_reason is None:
            ctx.cache.put(r.key, replace(reply, paid_by=ctx.paid_by(index)))


def provenance(judge: JudgeBase, reply: JudgeReply) -> str:
    """``provider endpoint model response_format`` of one answered call (see
    :attr:`Result._served`)."""
    # a reply this job paid for, read back from the cache after a redelivery, has no format of its
    # own (the cache keeps none): the judge's, which asked for it
    shape = reply.response_format or judge.response_format
    parts = (provider_of(judge), judge.endpoint, reply.model or judge.model, shape)
    return " ".join(str(p or "-").replace(" ", "_") for p in parts)


def call_count(ctx: GradingContext, job: Job | None = None) -> int:
    """How many calls :func:`job_calls` makes for ``job`` (the one statement of the rule): per
    judge of the run, one per unit of the job (:meth:`Job.units`). Without a job: what a job of
    this run makes at least, for the sizes that hold for all (a run's jobs are of one kind: its
    kind's :attr:`JobKind.least_units`)."""
    per_unit = len(ctx.judges) * ctx.samples  # (a cascade's: at most, every stage asked)
    if job is None:
        return per_unit * kind_for(ctx.rubric).least_units(ctx.swap)
    return per_unit * len(job.units(ctx.rubric, swap=ctx.swap))


def _who(ctx: GradingContext, r: CallResult) -> str:
    """``judge MODEL: `` before a council member's failure (which judge failed)."""
    if len(ctx.judges) == 1:
        return ""
    return f"judge {ctx.judges[r.call.judge][0].model}: "


RAW_NULL_LIMIT = 500
"""Characters of an error message kept in a null's ``raw`` (a judge's reply keeps its own
limit, :data:`judgeq.grading.verdict.RAW_LIMIT`)."""


def null_result(
    *,
    index: int,
    reason: str,
    why: str | None,
    spec: RunSpec | None = None,
    raw: str | None = None,
    rubric_name: str = "",
    rubric_version: str = "",
    judge_model: str = "",
    job: Job | None = None,
    job_id: str | None = None,
    retrieval: RetrievalConfig | None = None,
    kind: str | None = None,
    rubric: Rubric | None = None,
) -> Result:
    """The one way a null result is made outside a judge's reply (internal error, held jobs
    out of retries, lost, finalized, canceled, a batch-lane failure).

    Given the run's ``spec`` and the job's stored payload ``raw`` (None: gone), the run's
    rubric, judge and retrieval settings and the job are taken from them (a rubric that no
    longer loads still names the run's rubric); else they are given one by one.

    A null keeps its job's kind, id and model, so it counts in the denominators of its own
    section (``retrieval.questions``, ``by_model``): with ``job``, a question's retrieval
    fields (rank, hits: they need no judge) are filled in too; without it (the payload is
    gone: a job never sent, or damaged) the null is a job of ``kind`` (the kind the run's
    rubric grades: a run holds one kind) named ``job_id``, with no model and, for a question,
    no rank (it counts as not found in every rate over questions).
    """
    if spec is not None:
        try:
            rubric = spec.rubric
            rubric_name, rubric_version, kind = rubric.name, rubric.version, kind_for(rubric).name
        except Exception:  # the rubric itself fails to load: the null still names the run's rubric
            rubric_name, rubric_version, kind = spec.rubric_source, "unknown", None
        judge_model, retrieval = spec.judge_model, spec.retrieval
        job, job_id = parse_job(raw), _payload_id(raw, index)
    ident = job.id if job is not None else (job_id or f"#{index}")
    base: dict[str, object] = {
        "job_id": ident,
        "index": index,
        "rubric_name": rubric_name,
        "rubric_version": rubric_version,
        "judge_model": judge_model,
    }
    if job is None and kind is not None:
        base["kind"] = kind
        base.update(kind_of(kind).null_fields(ident))
    if job is not None:
        base.update(job_fields(job, rubric, retrieval))
    return _null(reason, why[:RAW_NULL_LIMIT] if why else why, base)


def parse_job(raw: str | None) -> Job | None:
    """A stored job payload as its model, or None when it is missing or unreadable."""
    if raw is None:
        return None
    try:
        obj = json.loads(raw)
        return JOB_MODELS[infer_kind(obj)].model_validate(obj)
    except Exception:  # a payload is validated before it is stored: this is damage, not input
        return None


def _payload_id(raw: str | None, index: int) -> str:
    try:
        return str(json.loads(raw or "{}").get("id", f"#{index}"))
    except (ValueError, AttributeError):
        return f"#{index}"


def job_fields(job: Job, rubric: Rubric | None, retrieval: RetrievalConfig | None) -> dict[str, object]:
    """What every result of ``job`` carries, graded or null: its kind, label and input key, and
    what its kind records without a judge (:meth:`Job.result_fields`: the system that produced
    it, a pair's output lengths, a question's retrieval fields, a conversation's checks)."""
    return {
        "kind": job.kind,
        "label": job.label,
        "input_key": job.input_key(),
        **job.result_fields(rubric, retrieval or RetrievalConfig()),
    }


def _null(reason: str, raw: str | None, base: dict[str, object], **extra: object) -> Result:
    return make_result(status="null", null_reason=reason, raw=raw, **base, **extra)

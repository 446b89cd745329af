"""Everything ``submit`` and ``run`` check before a single job is enqueued.

:func:`make_plan` resolves and validates the rubric (with weight overrides), the judge spec
and the thresholds, validates the whole batch (streaming) and checks that the rubric grades
the batch's kinds of jobs (:func:`check_rubric_fits`).  Any problem raises a
:class:`~judgeq.JudgeqError` whose text names the file, line and field; nothing has been
enqueued at that point.
"""

from __future__ import annotations

import math
import os
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from judgeq.errors import ConfigError, JudgeError
from judgeq.grading.cascade import CascadeSpec
from judgeq.grading.retrieval import parse_position_weights
from judgeq.jobs.base import label_problem
from judgeq.jobs.kinds import KINDS, kind_for
from judgeq.jobs.models import Job
from judgeq.jobs.reader import JobsFileLimits, JobsFileScan, scan_jobs_file
from judgeq.judges import (
    JudgeSpec,
    default_judge,
    has_credentials,
    parse_judge_spec,
)
from judgeq.judges.prices import Prices, load_prices, no_price_message, shipped_prices
from judgeq.judges.providers import JudgeSetup, family_of, provider, registered
from judgeq.rubric.model import (
    RetrievalConfig,
    Rubric,
    parse_rubric,
    parse_weights,
    read_rubric_text,
)
from judgeq.runspec import RunSpec, new_run_id
from judgeq.settings import Settings, default

__all__ = [
    "KIND_RUBRIC",
    "LEXICAL_NOTICE",
    "PLAN_OPTIONS",
    "PREFLIGHT_TRIES",
    "Plan",
    "check_credentials",
    "check_rubric_fits",
    "judges_text",
    "label_check",
    "load_rubric_for_run",
    "make_plan",
    "missing_key",
    "parse_thresholds",
    "plan_kwargs",
    "preflight",
    "resolve_judge",
    "resolve_judges",
    "retrieval_config",
    "rubric_kinds",
]

LEXICAL_NOTICE = (
    "judgeq: no ANTHROPIC_API_KEY is set, so this run uses the offline 'lexical' judge "
    "(token overlap with the expected answer; no LLM).\n"
    "judgeq: to grade with Claude: export ANTHROPIC_API_KEY=... and pass --judge anthropic:MODEL "
    "(or leave --judge out for the default model)."
)


def check_batch_lane(judges: Sequence[JudgeSpec]) -> None:
    """Refuse ``--batch-api`` for judges it cannot serve, in one line: a provider without a batch
    API (the offline judge, an OpenAI-compatible server, a custom judge), judges of two providers
    (each provider's batches are its own), or an OpenAI council of several models (the Batch API
    takes one model per input file)."""
    providers = sorted({j.provider for j in judges})
    others = [provider(p) for p in providers if provider(p).batch_api is None]
    if others:
        offered = [provider(p).batch_api for p in registered() if provider(p).batch_api]
        named = ", ".join(p.plural for p in others)
        raise ConfigError(
            f"--batch-api sends judge calls through a provider's batch API ({', '.join(map(str, offered))}); "
            f"{named} have none: grade without --batch-api"
        )
    if len(providers) > 1:
        raise ConfigError(
            "--batch-api: a council across providers cannot be graded in batches (each provider's "
            "batches are its own); grade it without --batch-api, or one provider at a time"
        )
    models = {j.model for j in judges}
    api = provider(providers[0])
    if api.batch_one_model and len(models) > 1:
        raise ConfigError(
            f"--batch-api: {api.batch_api} takes one model per batch, and this council has "
            f"{len(models)} ({', '.join(sorted(models))}); grade it without --batch-api"
        )


def judge_family(judge: JudgeSpec) -> str:
    """Whose models a judge is: its provider's family, else the one its model's name says (a
    gateway serving ``anthropic/claude-3.5-sonnet``)."""
    return judge.api.family or family_of(judge.model.partition("@")[0])


def self_grading(judges: Sequence[JudgeSpec], scan: JobsFileScan) -> list[str]:
    """A warning line per judge that grades outputs of its own family (by the jobs' ``model``):
    judges favour their own family's outputs (self-preference), so its figures on them lean."""
    lines = []
    for judge in judges:
        family = judge_family(judge)
        own = {m: n for m, n in scan.systems.items() if n > 0 and family and family_of(m) == family}
        if own:
            named = ", ".join(sorted(own)[:3]) + (", ..." if len(own) > 3 else "")
            lines.append(
                f"judgeq: warning: judge {judge} grades {sum(own.values()):,} output(s) of its own "
                f"family ({family}: {named}); judges favour their own family's outputs: add a judge "
                "of another family (a jury: --judge ... --jury median)"
            )
    return lines


def check_jury(
    jury: str | None,
    no_majority: str | None,
    council_mode: str | None,
    judges: Sequence[JudgeSpec],
    rubric: Rubric,
) -> None:
    """Refuse, in one line, a jury that cannot be one: fewer than two judges, a z-combined
    council, a rubric graded turn by turn (a turn's panel is not stated yet), or
    ``--no-majority`` without a jury."""
    if jury is None:
        if no_majority is not None:
            raise ConfigError("--no-majority says what a jury does without a majority: give --jury too")
        return
    if len(judges) < 2:
        raise ConfigError(
            "--jury: a jury is a panel of judges: give two --judge options or more "
            "(three or more: an odd panel)"
        )
    if council_mode == "z":
        raise ConfigError(
            "--jury and --council z: a jury combines its scores by median or mean: give one of them"
        )
    if rubric.turn_scope is not None:
        raise ConfigError(
            f"--jury: rubric {rubric.name} grades turn by turn, and a jury's rules for a turn are "
            "not stated yet: grade it with a council (no --jury)"
        )


@dataclass(slots=True)
class Plan:
    """A validated submission, ready to register and enqueue."""

    spec: RunSpec
    scan: JobsFileScan
    judge: JudgeSpec
    notice: str | None = None
    council: tuple[JudgeSpec, ...] = ()
    """The other judges of a council (``--judge A --judge B``)."""
    prices: Prices | None = None
    """The prices the run was planned with (the shipped ones and the user's ``JUDGEQ_PRICES``);
    :attr:`RunSpec.prices` holds those of its judges."""

    @property
    def judges(self) -> list[JudgeSpec]:
        return [self.judge, *self.council]


def parse_thresholds(text: str, *, origin: str = "--thresholds") -> list[float]:
    out: list[float] = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        try:
            value = float(part)
        except ValueError:
            raise ConfigError(f"{origin}: {part!r} is not a number (e.g. --thresholds 8,7,6.5)") from None
        if not math.isfinite(value):
            raise ConfigError(f"{origin}: {part!r} is not a finite number")
        out.append(value)
    if not out:
        raise ConfigError(f"{origin}: give at least one threshold, e.g. 8,7,6.5")
    return sorted(set(out), reverse=True)


def resolve_judges(
    flags: str | tuple[str, ...] | list[str] | None, settings: Settings
) -> tuple[list[JudgeSpec], str | None]:
    """The judges of the run (one, or a council), and, when the judge was chosen for the user,
    a notice saying so. A council's judges must differ."""
    given = [flags] if isinstance(flags, str) else list(flags or ())
    if len(given) <= 1:
        judge, notice = resolve_judge(given[0] if given else None, settings)
        return [judge], notice
    judges = distinct_judges(given, "--judge", "a council")
    return judges, None


DEFAULT_AGREEMENT = 0.85
DEFAULT_RISK = 0.1
DEFAULT_SAMPLES = 3


def cascade_judges(
    text: str, judge: str | tuple[str, ...] | list[str] | None, council_mode: str | None, jury: str | None
) -> list[JudgeSpec]:
    """The judges of ``--cascade A,B[,C]``, in order of cost; ConfigError for a cascade that
    cannot be one (fewer than two judges, one given twice, with ``--judge``, a council's or a
    jury's options)."""
    given = [judge] if isinstance(judge, str) else list(judge or ())
    for flag, value in (("--judge", given), ("--council", council_mode), ("--jury", jury)):
        if value:
            raise ConfigError(f"--cascade names the run's judges: {flag} does not go with it")
    parts = [p.strip() for p in text.split(",")]
    if len(parts) < 2 or not all(parts):
        raise ConfigError(
            f"--cascade: {text!r}: give two judges or more, cheapest first, separated by commas "
            "(e.g. anthropic:claude-haiku-4-5,anthropic:claude-opus-4-5)"
        )
    return distinct_judges(parts, "--cascade", "a cascade")


def distinct_judges(given: Sequence[str], flag: str, group: str) -> list[JudgeSpec]:
    """The judges ``flag`` names, parsed; ConfigError when one is given twice (``group``'s
    judges must differ)."""
    judges = [parse_judge_spec(g) for g in given]
    names = [str(j) for j in judges]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise ConfigError(f"{flag}: {dup[0]} is given twice; {group}'s judges must differ")
    return judges


def cascade_plan(stages: int, agreement: float, risk: float, samples: int) -> CascadeSpec:
    """A calibration's cascade (no stage keeps a job); ConfigError naming a bad flag."""
    for flag, value, example in (("--agreement", agreement, "0.85"), ("--risk", risk, "0.1")):
        if not (0 < value < 1):
            raise ConfigError(f"{flag}: {value:g} must be between 0 and 1 (e.g. {flag} {example})")
    if not 2 <= samples <= 16:
        raise ConfigError(
            f"--samples: {samples} must be between 2 and 16 "
            "(a judge's confidence is the share of its samples that agree)"
        )
    return CascadeSpec(thresholds=[None] * stages, agreement=agreement, risk=risk, samples=samples)


def resolve_judge(flag: str | None, settings: Settings) -> tuple[JudgeSpec, str | None]:
    """The judge to use and, when it was chosen for the user, a notice saying so."""
    if flag:
        return parse_judge_spec(flag), None
    judge, why = default_judge(settings)
    if why == "JUDGEQ_JUDGE":
        return judge, None
    if judge.api.offline:
        return judge, LEXICAL_NOTICE
    return judge, f"judgeq: judge {judge} (the default: {why}; --judge chooses another)"


def load_rubric_for_run(
    ref: str, weights: str | None, settings: Settings
) -> tuple[Rubric, str, dict[str, float]]:
    """The rubric with ``JUDGEQ_WEIGHT_*`` (``settings.weights``) then ``--weights`` applied,
    its text, the overrides."""
    text, source = read_rubric_text(ref)
    rubric = parse_rubric(text, source)
    overrides = dict(settings.weights)
    if overrides:
        rubric = rubric.with_weights(overrides, origin="JUDGEQ_WEIGHT_*")
    if weights:
        flag = parse_weights(weights)
        rubric = rubric.with_weights(flag, origin="--weights")
        overrides.update(flag)
    return rubric, text, overrides


PLAN_OPTIONS = (
    "weights",
    "thresholds",
    "run_id",
    "skip_invalid",
    "position_weights",
    "default_weight",
    "hit_k",
)


def plan_kwargs(options: Mapping[str, Any]) -> dict[str, Any]:
    """The keyword arguments of :func:`make_plan` among a command's options or a Python API
    call's (named as on the CLI: ``judge``, ``council``/``council_mode``, ``no_swap``, ...):
    the one mapping ``judgeq run``/``submit`` and :func:`judgeq.grade`/:func:`judgeq.submit`
    share."""
    judge = options.get("judge")
    out: dict[str, Any] = {k: options[k] for k in PLAN_OPTIONS if options.get(k) is not None}
    out["judge"] = (judge,) if isinstance(judge, str) else tuple(judge or ())
    out["council_mode"] = options.get("council_mode") or options.get("council")
    out["jury"] = options.get("jury")
    out["no_majority"] = options.get("no_majority")
    out["swap"] = not options.get("no_swap", False)
    out["disagreement"] = options.get("disagreement")
    for key in ("cascade", "agreement", "risk", "samples"):
        if options.get(key) is not None:
            out[key] = options[key]
    return out


def make_plan(
    *,
    jobs_path: Path,
    jobs_name: str,
    rubric_ref: str,
    settings: Settings,
    judge: str | tuple[str, ...] | list[str] | None = None,
    weights: str | None = None,
    thresholds: str | None = None,
    run_id: str | None = None,
    skip_invalid: bool = False,
    position_weights: str | None = None,
    default_weight: float | None = None,
    hit_k: str | None = None,
    council_mode: str | None = None,
    swap: bool = True,
    disagreement: float | None = None,
    jury: str | None = None,
    no_majority: str | None = None,
    cascade: str | None = None,
    agreement: float = DEFAULT_AGREEMENT,
    risk: float = DEFAULT_RISK,
    samples: int = DEFAULT_SAMPLES,
    calibration: bool = False,
) -> Plan:
    """Validate everything; raise before anything is enqueued. With ``cascade`` the plan is a
    calibration's (every stage grades every job): :mod:`producer.cascade` fits the thresholds."""
    rubric, rubric_text, overrides = load_rubric_for_run(rubric_ref, weights, settings)
    if cascade is not None:
        judges, notice = cascade_judges(cascade, judge, council_mode, jury), None
        cascade_spec: CascadeSpec | None = cascade_plan(len(judges), agreement, risk, samples)
    else:
        judges, notice = resolve_judges(judge, settings)
        cascade_spec = None
    judge_spec = judges[0]
    prices = load_prices(settings.prices) if settings.prices else shipped_prices()
    llm_models = [j.model for j in judges if not j.api.offline]
    if settings.max_cost is not None:
        unpriced = [m for m in llm_models if prices.lookup(m) is None]
        if unpriced:  # the limit could not be held: a call without a price counts as nothing
            raise ConfigError(no_price_message(unpriced[0]))
    if council_mode == "z" and len(judges) < 2:
        raise ConfigError("--council z combines several judges: give two --judge options or more")
    check_jury(jury, no_majority, council_mode, judges, rubric)
    if disagreement is not None and not (disagreement >= 0 and math.isfinite(disagreement)):
        raise ConfigError(f"--disagreement: {disagreement} must be a non-negative number")
    origin = "--thresholds" if thresholds else "JUDGEQ_THRESHOLDS"
    levels = parse_thresholds(thresholds or settings.thresholds, origin=origin)
    if (thresholds or settings.thresholds != default("thresholds")) and rubric.scale not in (
        "pass-fail",
        "pairwise",
    ):
        lo, hi = rubric.scale_range  # a threshold off the scale: a pass rate of 0% or 100%, always
        off = [t for t in levels if not lo <= t <= hi]
        if off:
            raise ConfigError(
                f"{origin}: {off[0]:g} is outside the scale of rubric {rubric.name} ({lo}-{hi}); "
                f"give thresholds between {lo} and {hi}, e.g. {hi * 0.8:g},{hi * 0.7:g}"
            )
    if run_id is not None and not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}", run_id):
        raise ConfigError(f"--run-id: {run_id!r} must be letters, digits, '.', '_' or '-' (max 128)")
    retrieval = retrieval_config(rubric, position_weights, default_weight, hit_k)
    limits = JobsFileLimits(settings.max_line_bytes, settings.max_field_chars)
    scan = scan_jobs_file(jobs_path, jobs_name, limits, label_check(rubric, required=calibration))
    if not skip_invalid:
        scan.raise_if_invalid()
    if scan.valid == 0:
        raise ConfigError(f"{jobs_name}: no valid job lines to grade ({scan.invalid} invalid)")
    check_rubric_fits(rubric, scan)
    notice = "\n".join(filter(None, [notice, *self_grading(judges, scan)])) or None
    if settings.batch_api:
        if cascade_spec is not None:
            raise ConfigError(
                "--batch-api with --cascade: a cascade's stages go through the live lane only in this "
                "version (a stage waits for the one before); grade without --batch-api"
            )
        check_batch_lane(judges)
    spec = RunSpec(
        run_id=run_id or new_run_id(),
        rubric_text=rubric_text,
        rubric_source=rubric.source,
        weights=overrides,
        judge_provider=judge_spec.provider,
        judge_model=judge_spec.model,
        thresholds=levels,
        total=scan.valid,
        jobs_file=jobs_name,
        jobs_fingerprint=scan.fingerprint,
        judge_timeout=settings.judge_timeout,
        judge_deadline=settings.judge_deadline,
        max_rate_limited=settings.max_rate_limited,
        max_tokens=settings.judge_max_tokens,
        cache=settings.cache,
        lane="batch" if settings.batch_api else "live",
        council=[str(j) for j in judges[1:]],
        council_mode="z" if council_mode == "z" else "mean",
        jury="median" if jury == "median" else "mean" if jury == "mean" else None,
        no_majority="tie" if no_majority == "tie" else "null",
        swap=swap,
        disagreement=disagreement,
        cascade=cascade_spec,
        rpm=settings.judge_rpm,
        itpm=settings.judge_itpm,
        otpm=settings.judge_otpm,
        share=settings.judge_share,
        safety_gate=settings.safety_gate,
        safety_cap=settings.safety_score_cap,
        retrieval=retrieval,
        rejected_count=scan.invalid,
        rejected=scan.rejected[:1000],
        prices=prices.resolve(j.model for j in judges),  # the lexical judge's too: it costs $0
        prices_taken=prices.taken,
    )
    return Plan(
        spec=spec, scan=scan, judge=judge_spec, notice=notice, council=tuple(judges[1:]), prices=prices
    )


KIND_RUBRIC = {name: kind.rubric for name, kind in KINDS.items()}
"""Every kind of job (:data:`judgeq.jobs.kinds.KINDS`), with the built-in rubric suggested
for it."""


def rubric_kinds(rubric: Rubric) -> frozenset[str]:
    """The job kinds a rubric grades (:func:`judgeq.jobs.kinds.kind_for`)."""
    return frozenset({kind_for(rubric).name})


def _jobs(n: int, kind: str) -> str:
    return f"{n} {kind} job{'s' if n != 1 else ''}"


def check_rubric_fits(rubric: Rubric, scan: JobsFileScan) -> None:
    """Refuse (one line) a rubric that does not grade every kind of job in the batch."""
    present = {kind: scan.kinds[kind] for kind in KIND_RUBRIC if scan.kinds.get(kind, 0) > 0}
    fits = rubric_kinds(rubric)
    misfit = [kind for kind in present if kind not in fits]
    if not misfit:
        return
    grades = " and ".join(sorted(fits))
    what = " and ".join(KINDS[kind].rubric_is for kind in sorted(fits))
    if len(present) > 1:
        use = ", ".join(f"{kind} jobs with --rubric {KIND_RUBRIC[kind]}" for kind in present)
        raise ConfigError(
            f"rubric {rubric.name!r} grades {grades} jobs ({what}), but {scan.name} mixes "
            f"{' and '.join(_jobs(n, kind) for kind, n in present.items())}: split the batch by kind "
            f"and grade {use}"
        )
    (kind,) = misfit
    other = KINDS[kind].rubric_with
    raise ConfigError(
        f"rubric {rubric.name!r} grades {grades} jobs ({what}), but {scan.name} has "
        f"{_jobs(present[kind], kind)}: use --rubric {KIND_RUBRIC[kind]} (or another rubric {other})"
    )


def label_check(rubric: Rubric, *, required: bool = False) -> Callable[[Job], tuple[str, str] | None]:
    """The check of each job's ``label`` against the rubric (:func:`label_problem`); with
    ``required`` (a cascade's calibration set), a job without one is an error too."""

    def check(job: Job) -> tuple[str, str] | None:
        label = job.label
        if label is None and required:
            return (
                "label",
                "a calibration job needs a person's label (its labels fit the cascade's thresholds)",
            )
        if label is None or job.kind != kind_for(rubric).name:
            return None  # a job of another kind: the rubric refuses the file for that, once
        problem = label_problem(rubric, label)
        return ("label", problem) if problem else None

    return check


def retrieval_config(
    rubric: Rubric, position_weights: str | None, default_weight: float | None, hit_k: str | None
) -> RetrievalConfig | None:
    """The rubric's retrieval settings with the flags on top; None when no flag is given."""
    if position_weights is None and default_weight is None and hit_k is None:
        return None
    update: dict[str, object] = {}
    if position_weights is not None:
        try:
            update["position_weights"] = dict(parse_position_weights(position_weights))
        except ValueError as exc:
            raise ConfigError(f"--position-weights: {exc}") from None
    if hit_k is not None:
        try:
            update["hit_k"] = [int(k) for k in hit_k.split(",") if k.strip()]
        except ValueError:
            raise ConfigError(f"--hit-k: {hit_k!r} is not a list of whole numbers, e.g. 1,3,5,10") from None
    if default_weight is not None:
        update["default_weight"] = default_weight
    base = rubric.retrieval or RetrievalConfig()
    try:
        return RetrievalConfig.model_validate({**base.model_dump(), **update})
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(x) for x in first["loc"])
        flag = {"hit_k": "--hit-k", "position_weights": "--position-weights"}.get(field)
        where = (
            f"{flag} {hit_k if field == 'hit_k' else position_weights}" if flag and field in update else None
        )
        what = str(first["msg"]).removeprefix("Value error, ")
        raise ConfigError(f"{where or f'retrieval settings: {field}'}: {what}") from None


PREFLIGHT_TRIES = 4


def preflight(plan: Plan, settings: Settings, *, sleep: Callable[[float], None] = time.sleep) -> None:
    """Prove every LLM judge's key and model before enqueuing anything: one request to the
    Models API each (no tokens spent, no rate limit of the judge's calls used: a re-run
    answered by the reply cache makes no judge call at all; where that API cannot tell, see
    each judge's ``check``), tried again on a transient failure (429, 5xx)."""
    from judgeq.judges import judge_factory

    build = judge_factory(settings)
    for judge in plan.judges:
        if judge.api.offline:
            continue
        client: Any = build(judge.provider, judge.model)
        if not client.has_credentials:  # the API (judgeq.grade) comes here without check_credentials
            raise ConfigError(missing_key(judge))
        variable = judge.api.key_variable or "its key"
        try:
            for attempt in range(PREFLIGHT_TRIES):
                try:
                    client.check(timeout=settings.judge_timeout)
                    break
                except JudgeError as exc:
                    if not exc.retryable or attempt == PREFLIGHT_TRIES - 1:
                        raise
                    sleep(min(exc.retry_after or 2.0**attempt, 10.0))
        except JudgeError as exc:
            hint = {
                "auth_error": f"the API key was refused: check {variable}",
                "billing_error": f"the account behind {variable} has no credit left",
                "invalid_request": f"the judge rejected model {judge.model!r}: check --judge",
                "model_not_found": f"the judge rejected model {judge.model!r}: check --judge",
            }.get(exc.reason, "the judge could not be reached")
            # which server: the host (and port) only, never a credential or path
            where = getattr(client, "endpoint", None)
            at = f"; server {where}" if where else ""
            raise ConfigError(f"judge preflight failed: {hint} ({exc}{at})") from None


def check_credentials(plan: Plan, settings: Settings) -> None:
    """Refuse (one line, before anything is sent or enqueued) a run whose LLM judge has no
    credential: no key, an empty one, or one of white space only. Asks the installed SDK what
    it resolved (a key, a token, a profile), without a request."""
    for judge in plan.judges:
        if not has_credentials(settings, judge.provider):
            raise ConfigError(missing_key(judge))
        judge.api.check_setup(judge.model, JudgeSetup.of(settings))


def missing_key(judge: JudgeSpec) -> str:
    """The one line said when an LLM judge has no credential."""
    variable = judge.api.key_variable or "its key"
    state = "is blank" if os.environ.get(variable) is not None else "is not set"
    return (
        f"judge {judge} needs {judge.api.key_name}, and {variable} {state}: export "
        f"{variable}=... (or use --judge lexical, the offline judge)"
    )


def judges_text(plan: Plan) -> str:
    """``anthropic:m`` or, for a council, ``council of anthropic:a, anthropic:b (mean)``; a
    cascade's ``cascade of anthropic:a, anthropic:b``."""
    if not plan.council:
        return str(plan.judge)
    if plan.spec.cascade is not None:
        return f"cascade of {', '.join(map(str, plan.judges))}"
    return f"council of {', '.join(map(str, plan.judges))} ({plan.spec.council_mode})"

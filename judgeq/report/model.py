"""``report.json`` as a typed model: :class:`RunReport`, what a run's report holds, each part a
model whose attributes mypy checks (``report.counts.graded``, ``report.usage.reply_cache.hits``)
instead of string keys read from a dict.

report.json serialises it (:meth:`RunReport.to_dict`) byte for byte as before: the keys a report
has are exactly the keys it was given (a part left out stays out, a ``null`` stays ``null``), in
report.json's order; numbers keep their type (an ``int`` stays ``5``, a ``float`` ``5.0``). Each
kind of job's own section (``retrieval``, ``pairwise``, ``conversation``: see
:attr:`judgeq.jobs.kind.JobKind.section`) is kept by its kind's key in :attr:`RunReport.sections`
and written where report.json has it: a section of every group of results after the group's
``flags``, a section of the whole run after ``by_model_paired``.

A kind's own section stays a mapping here (its shape is its kind's: the kind's module makes it
and reads it).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from judgeq.jobs.kinds import GROUP_SECTION_KEYS, RUN_SECTION_KEYS

__all__ = [
    "REPORT_VERSION",
    "Agreement",
    "BatchUsage",
    "Categorical",
    "Combined",
    "Council",
    "Counts",
    "Disagreement",
    "Distributions",
    "EstimateFigure",
    "Estimates",
    "Figures",
    "GroupFigures",
    "JudgeInfo",
    "LabelsInfo",
    "Latency",
    "MeanCI",
    "NumericAgreement",
    "PairedDiff",
    "PairsAgreement",
    "ReplyCacheUsage",
    "RubricInfo",
    "RunReport",
    "Usage",
]

REPORT_VERSION = 1
"""The version of report.json's layout."""

Num = int | float
"""A figure as computed: an int stays an int, a float a float (report.json keeps ``5`` and ``5.0``)."""
Interval = list[Num] | None
"""A 95% interval ``[low, high]`` (None: too few to say)."""


class _Part(BaseModel):
    """A part of report.json: every key it may have is declared (a key no part declares is an
    error, not silently kept)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    def to_dict(self) -> dict[str, Any]:
        """The part as report.json holds it: the keys it was given, in report.json's order."""
        return self.model_dump(mode="json", exclude_unset=True, by_alias=True)


class Counts(_Part):
    total: int
    graded: int
    null: int
    null_by_reason: dict[str, int]
    settled_by_checks: int | None = None
    """Conversations a failed hard check settled (graded as failed, no judge's score)."""
    rejected: int | None = None
    missing: int | None = None


class Figures(_Part):
    """A value's distribution over graded jobs: count, mean with its interval, median, spread."""

    n: int
    mean: Num | None = None
    ci95: Interval = None
    median: Num | None = None
    std: Num | None = None
    min: Num | None = None
    max: Num | None = None


class GroupFigures(_Part):
    """What is reported for a group of jobs (the whole run, or one model)."""

    counts: Counts
    coverage: Num | None = None
    coverage_ci95: Interval = None
    overall: Figures
    dimensions: dict[str, Figures]
    pass_rate: Num | None = None
    pass_rate_ci95: Interval = None
    pass_rates: dict[str, Num | None] | None = None
    pass_rates_ci95: dict[str, Interval] | None = None
    flags: dict[str, int] = Field(default_factory=dict)
    sections: dict[str, Any] = Field(default_factory=dict)
    """Each kind's own section of this group, by its key (:data:`GROUP_SECTION_KEYS`)."""

    @model_validator(mode="before")
    @classmethod
    def _gather_sections(cls, data: Any) -> Any:
        return _gather(data, GROUP_SECTION_KEYS)

    def to_dict(self) -> dict[str, Any]:
        out = super().to_dict()
        sections = out.pop("sections", {})
        return _insert_after(out, "flags", sections)


class RubricInfo(_Part):
    name: str
    version: str
    scale: str | None = None
    source: str = ""
    weights: dict[str, Num] | None = None
    pass_threshold: Num | None = None
    fingerprint: str | None = None
    error: str | None = None
    """Why the run's rubric no longer loads (its jobs are nulls; the report still names it)."""


class JudgeInfo(_Part):
    provider: str
    model: str
    lane: str = "live"
    council: list[str] | None = None
    council_mode: str | None = None
    swap: bool | None = None
    served: list[dict[str, Any]] = Field(default_factory=list)
    """The provenance of its answered calls: provider, endpoint, model, response format, calls."""
    note: str | None = None
    """Why no judge answered (a re-scored run's verdicts are another run's)."""


class Latency(_Part):
    p50: Num | None = None
    p95: Num | None = None
    max: Num | None = None


class Distributions(_Part):
    overall: dict[str, Any] = Field(default_factory=dict)
    latency_ms: dict[str, Any] = Field(default_factory=dict)


class BatchUsage(_Part):
    jobs: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    discount_usd: Num | None = None


class ReplyCacheUsage(_Part):
    hits: int = 0
    saved_input_tokens: int = 0
    saved_output_tokens: int = 0
    saved_usd: Num | None = None


class Usage(_Part):
    """What the run spent (a part a report of an earlier version lacks reads as none spent)."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_input_tokens: int = 0
    cache_creation_input_tokens: int = 0
    judge_calls: int = 0
    estimated_cost_usd: Num | None = None
    cost_usd: dict[str, Num] | None = None
    batch_api: BatchUsage = Field(default_factory=BatchUsage)
    prices_taken: str = "?"
    reply_cache: ReplyCacheUsage = Field(default_factory=ReplyCacheUsage)
    by_judge: dict[str, dict[str, Any]] | None = None
    prompt_cache: dict[str, Any] | None = None
    unpriced_models: list[str] | None = None


class PairedDiff(_Part):
    """One model against another on the inputs both were graded on (``by_model_paired``)."""

    model: str
    vs: str
    n: int
    mean_diff: Num | None = None
    ci95: Interval = None
    p_value: Num | None = None
    sampled: bool = False


class Categorical(_Part):
    """A judge's categories against people's labels: accuracy, Cohen's kappa, the confusion."""

    n: int
    accuracy: Num | None = None
    accuracy_ci95: Interval = None
    kappa: Num | None = None
    confusion: dict[str, dict[str, int]] = Field(default_factory=dict)
    note: str | None = None


class PairsAgreement(_Part):
    """A pairwise judge's winners against people's (ties counted half, or left out)."""

    n: int
    accuracy_ties_half: Num | None = None
    accuracy_ties_half_ci95: Interval = None
    accuracy_ties_excluded: Num | None = None
    accuracy_ties_excluded_ci95: Interval = None
    ties_excluded_n: int = 0
    kappa: Num | None = None
    confusion: dict[str, dict[str, int]] = Field(default_factory=dict)
    note: str | None = None


class NumericAgreement(_Part):
    """A judge's scores against people's numbers."""

    n: int
    spearman: Num | None = None
    kendall_tau: Num | None = None
    qwk: Num | None = None
    mae: Num | None = None
    mae_ci95: Interval = None
    spearman_p: Num | None = None
    kendall_p: Num | None = None


class EstimateFigure(_Part):
    """A figure with its 95% interval, over ``n`` jobs (people's labels: the labelled ones)."""

    value: Num
    ci95: Interval = None
    n: int


class PPIFigure(EstimateFigure):
    """The prediction-powered estimate; ``lam`` the judge's weight in each stratum."""

    lam: list[Num | None] = Field(default_factory=list)


class QuantityEstimate(_Part):
    """One figure (a pass rate in %, a mean score) three ways: the judge's alone over every
    graded job, people's alone over the labelled ones, and both together (PPI++)."""

    n: int
    labelled: int
    judge_only: EstimateFigure
    human_only: EstimateFigure | None = None
    ppi: PPIFigure | None = None
    note: str | None = None


class GroupEstimates(_Part):
    pass_rate: QuantityEstimate | None = None
    mean: QuantityEstimate | None = None


class Estimates(GroupEstimates):
    """The run's figures estimated from labels and verdicts together, and each model's."""

    by_model: dict[str, GroupEstimates] | None = None
    note: str | None = None


class Agreement(_Part):
    """The judge against people's labels (jobs with a ``label``)."""

    labelled: int
    graded: int
    nulls: int
    null_by_reason: dict[str, int] = Field(default_factory=dict)
    pairs: PairsAgreement | None = None
    pass_fail: Categorical | None = None
    numeric: NumericAgreement | None = None
    estimates: Estimates | None = None


class MeanCI(_Part):
    n: int
    mean: Num | None = None
    ci95: Interval = None


class Combined(_Part):
    """How a council's scores combine: their mean, or the mean of per-judge z-scores."""

    method: str
    note: str | None = None
    n: int | None = None
    mean: Num | None = None
    ci95: Interval = None
    by_model: dict[str, MeanCI] | None = None


class Disagreement(_Part):
    job_id: str
    spread: Num


class MemberAgreement(_Part):
    """One judge's agreement with a reference: jobs compared, agreed, their share (percent) and
    its 95% Wilson interval."""

    n: int
    agree: int
    rate: Num | None = None
    ci95: Interval = None


class Council(_Part):
    """Several judges on every job: each judge's mean, their agreement, their disagreements."""

    judges: list[str]
    per_judge: dict[str, MeanCI]
    krippendorff_alpha: Num | None = None
    alpha_level: str
    units: int
    sampled_units: int
    combined: Combined
    disagreements: list[Disagreement] = Field(default_factory=list)
    absent: dict[str, int] | None = None
    """Per judge, the jobs it gave no verdict for (a jury keeps it in the panel's count)."""
    with_council: dict[str, MemberAgreement] | None = None
    """Per judge, how often its category was the council's verdict (categorical scales)."""
    with_labels: dict[str, MemberAgreement] | None = None
    """Per judge, how often its category was the job's label (categorical labels)."""


class LabelsInfo(_Part):
    """Labels people gave after the run (``judgeq labels import``): the agreement figures use them."""

    file: str
    """The labels file, by name."""
    imported_at: str
    given: Num
    """Jobs the file labelled."""
    changed: Num
    """Of them, jobs whose label is new or other than before."""


class CascadeStage(_Part):
    """One judge of a cascade: its threshold, the jobs it was asked and those it answered."""

    judge: str
    threshold: Num | None
    asked: int
    answered: int
    share: Num | None
    """Answered, in % of the run's jobs."""


class CascadeObserved(_Part):
    """Agreement of the kept verdicts with the run's own labels (held out from the calibration)."""

    labelled: int
    agreement: Num | None
    interval: Interval = None


class CascadeFigures(_Part):
    """A cascade run (``--cascade``): the guarantee it ran under and what it did
    (:mod:`judgeq.report.cascade`)."""

    agreement: Num
    """The agreement with people the kept verdicts are guaranteed."""
    risk: Num
    """The chance, over calibration draws, that the guarantee does not hold."""
    samples: int
    confidence: str
    calibration: str
    calibration_run: str
    calibrated: int
    jobs: int
    kept: int
    coverage: Num | None
    abstained: int
    stages: list[CascadeStage]
    observed: CascadeObserved
    cost_usd: Num | None
    strongest_alone_usd: Num | None
    """The strongest judge grading every job once, alone (its mean cost per calibration job)."""
    cost_fraction: Num | None


class RunReport(GroupFigures):
    """A run's whole report (report.json)."""

    report_version: int = REPORT_VERSION
    run_id: str
    batch: str | None = None
    """The jobs file (the key keeps its first name: readers use it)."""
    rubric: RubricInfo
    judge: JudgeInfo
    intervals: dict[str, Any] = Field(default_factory=dict)
    latency_ms: Latency = Field(default_factory=Latency)
    distributions: Distributions = Field(default_factory=Distributions)
    usage: Usage = Field(default_factory=Usage)
    by_model: dict[str, GroupFigures] | None = None
    by_model_paired: list[PairedDiff] | None = None
    run_sections: dict[str, Any] = Field(default_factory=dict)
    """Each kind's own section of the whole run, by its key (:data:`RUN_SECTION_KEYS`)."""
    agreement: Agreement | None = None
    council: Council | None = None
    cascade: CascadeFigures | None = None
    rejected: list[dict[str, Any]] = Field(default_factory=list)
    started_at: str
    finished_at: str
    wall_s: Num
    warnings: list[str] | None = None
    partial: bool | None = None
    """Written before every job was graded (a run stopped, or at its cost limit)."""
    rescored_from: str | None = None
    """The run whose results this report scored again (``judgeq rescore``)."""
    labels: LabelsInfo | None = None
    """The last labels imported into the run (``judgeq labels import``)."""

    @model_validator(mode="before")
    @classmethod
    def _gather_run_sections(cls, data: Any) -> Any:
        data = _gather(data, GROUP_SECTION_KEYS)
        if isinstance(data, dict):
            data = dict(data)
            data["run_sections"] = {k: data.pop(k) for k in RUN_SECTION_KEYS if k in data}
            if not data["run_sections"]:
                del data["run_sections"]
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunReport:
        """A report.json document as its model, every key declared (an undeclared key is an
        error: what judgeq writes is this model)."""
        return cls.model_validate(data)

    @classmethod
    def read(cls, data: dict[str, Any]) -> RunReport:
        """A stored report.json (an archived run's, one an earlier or later version of judgeq
        wrote) as its model: a part it lacks reads as its default, a key this version does not
        know is left out."""
        doc = copy.deepcopy(data)
        for _ in range(_READ_TRIES):
            try:
                return cls.model_validate(doc)
            except ValidationError as exc:
                unknown = [e["loc"] for e in exc.errors() if e["type"] == "extra_forbidden"]
                if not unknown or len(unknown) < len(exc.errors()):
                    raise
                for loc in unknown:
                    _drop(doc, loc)
        return cls.model_validate(doc)

    @classmethod
    def of(cls, document: RunReport | Mapping[str, Any]) -> RunReport:
        """``document`` as the model: itself, or a report.json dict read (:meth:`read`)."""
        return document if isinstance(document, RunReport) else cls.read(dict(document))

    def section(self, key: str) -> Any:
        """A kind's own section of the run (None: the run has none)."""
        return self.sections.get(key, self.run_sections.get(key))

    def to_dict(self) -> dict[str, Any]:
        body = _Part.to_dict(self)
        groups = body.pop("sections", {})
        runs = body.pop("run_sections", {})
        head = {k: body.pop(k) for k in _HEAD if k in body}
        out = {**head, **body}
        if self.by_model is not None:
            out["by_model"] = {m: g.to_dict() for m, g in self.by_model.items()}
        out = _insert_after(out, "flags", groups)
        anchor = next(k for k in ("by_model_paired", "by_model", "usage") if k in out)
        return _insert_after(out, anchor, runs)


_READ_TRIES = 4
"""Passes that leave out unknown keys (a key left out can reveal one nested below it)."""


def _drop(doc: Any, loc: tuple[int | str, ...]) -> None:
    """Remove the key at ``loc`` (a validation error's location) from ``doc``; the sections a
    validator moved under ``sections`` are found where the document has them."""
    path = [k for k in loc if k not in ("sections", "run_sections")]
    for key in path[:-1]:
        doc = doc[key] if isinstance(doc, dict) else doc[int(key)]
    if isinstance(doc, dict):
        doc.pop(path[-1], None)


_HEAD = ("report_version", "run_id", "batch", "rubric", "judge", "intervals")
"""report.json's first keys, before the run's figures."""


def _gather(data: Any, keys: tuple[str, ...]) -> Any:
    """A document's kind sections moved under ``sections``."""
    if not isinstance(data, dict) or "sections" in data:
        return data
    data = dict(data)
    sections = {k: data.pop(k) for k in keys if k in data}
    if sections:
        data["sections"] = sections
    return data


def _insert_after(doc: dict[str, Any], anchor: str, extra: dict[str, Any]) -> dict[str, Any]:
    """``doc`` with ``extra``'s keys right after ``anchor`` (at the end without it)."""
    if not extra:
        return doc
    if anchor not in doc:
        return {**doc, **extra}
    out: dict[str, Any] = {}
    for key, value in doc.items():
        out[key] = value
        if key == anchor:
            out.update(extra)
    return out

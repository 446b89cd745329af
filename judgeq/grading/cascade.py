"""A judge cascade's facts, with no Celery or Redis: what a run asks of its cascade
(:class:`CascadeSpec`), what each job's result records of it (:class:`CascadeRecord`), and the
one rule of agreement between a verdict and a person's label (:func:`label_verdict`).

A cascade asks its judges in order of cost (the run's ``--cascade`` judges). Each stage's judge
grades the job ``samples`` times: the first sample's verdict is the stage's (the very verdict a
run with that judge alone gives), and the stage's **confidence** is the share of its samples
whose verdict (pass/fail; a pair's winner) is that one. The stage keeps the job when its
confidence reaches the stage's threshold; else the job goes to the next stage; a job no stage
keeps is **abstained** (a null whose reason is ``abstained``: counted in every denominator,
never a guess). The thresholds are fitted on a labelled calibration set by fixed-sequence
testing (:mod:`judgeq.figures.selective`), so that, with probability at least ``1 - risk`` over
exchangeable calibration draws, the kept verdicts agree with people at least ``agreement`` of
the time.

A calibration run is a cascade run whose thresholds are all None: every stage grades every job,
every job ends abstained, and each result's record holds every stage's verdict and confidence,
from which the thresholds are fitted.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = [
    "ABSTAINED",
    "CONFIDENCE_RULES",
    "CascadeRecord",
    "CascadeSpec",
    "StageVerdict",
    "confidence_of",
    "label_verdict",
]

ABSTAINED = "abstained"
"""The null reason of a job no stage of the cascade was confident about."""

CONFIDENCE_RULES = ("samples",)
"""How a stage's confidence is estimated: ``samples``, the share of the judge's samples that
agree with its first (a pair graded in both orders is one sample of both orders)."""


class CascadeSpec(BaseModel):
    """What a run asks of its cascade (stored with the run, :class:`judgeq.runspec.RunSpec`);
    its judges are the run's, in order (the first ``--cascade`` judge first)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    thresholds: list[float | None]
    """Each stage's confidence threshold (None: the stage keeps nothing, as in a calibration
    run, or when the calibration found no threshold safe for it)."""
    agreement: float = Field(gt=0, lt=1)
    """The agreement with people the kept verdicts are guaranteed (``1 - alpha``)."""
    risk: float = Field(gt=0, lt=1)
    """The chance the guarantee fails over calibration draws (``delta``)."""
    samples: int = Field(3, ge=2, le=16)
    """Samples per stage (its confidence's resolution: thresholds are shares of them)."""
    confidence: str = "samples"
    calibration: str = ""
    """The labelled jobs file the thresholds were fitted on (empty: a calibration run)."""
    calibrated: int = 0
    """Labelled calibration jobs graded by every stage (those the fit used)."""
    calibration_run: str = ""
    """The run that graded the calibration set."""
    strongest_cost: float | None = None
    """The mean cost in USD of one job graded once by the last (strongest) judge alone, measured
    on the calibration run (None: not measured, e.g. a judge without a price)."""

    @model_validator(mode="after")
    def _check(self) -> CascadeSpec:
        if self.confidence not in CONFIDENCE_RULES:
            raise ValueError(f"confidence must be one of {', '.join(CONFIDENCE_RULES)}")
        if len(self.thresholds) < 2:
            raise ValueError("a cascade has two judges or more")
        return self

    @property
    def calibrating(self) -> bool:
        """A calibration run: every stage grades every job (no stage keeps any)."""
        return all(t is None for t in self.thresholds)


class StageVerdict(BaseModel):
    """What one stage said of a job: its judge, its verdict (None: it gave none), its
    confidence, the threshold it was held to, and the tokens of its first sample (the cost of
    the same judge grading the job alone)."""

    model_config = ConfigDict(extra="forbid")

    judge: str
    verdict: str | None
    confidence: float
    threshold: float | None
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_input_tokens: int = 0
    cache_creation_input_tokens: int = 0


class CascadeRecord(BaseModel):
    """What a job's result records of the cascade: the stage that kept it (None: abstained)
    and every stage asked, in order."""

    model_config = ConfigDict(extra="forbid")

    stage: int | None
    stages: list[StageVerdict]

    @property
    def kept(self) -> StageVerdict | None:
        return None if self.stage is None else self.stages[self.stage]


def confidence_of(verdicts: Sequence[str | None]) -> float:
    """A stage's confidence from its samples' verdicts (the first is the stage's): the share
    that agree with the first; 0 when the first gave no verdict."""
    if not verdicts or verdicts[0] is None:
        return 0.0
    return sum(v == verdicts[0] for v in verdicts) / len(verdicts)


def label_verdict(label: float | str | None, threshold: float | None, pairwise: bool) -> str | None:
    """A person's label as a verdict to compare with a judge's (:meth:`Result.verdict`): a
    pair's ``a``/``b``/``tie``; ``pass``/``fail``; a score is a pass at the rubric's pass
    threshold or above. None: the label says no verdict (none given, or a score and no
    threshold)."""
    if label is None:
        return None
    if isinstance(label, str):
        if pairwise:
            return label if label in ("a", "b", "tie") else None
        return label if label in ("pass", "fail") else None
    if pairwise or threshold is None:
        return None
    return "pass" if label >= threshold else "fail"

"""A judge cascade's thresholds fitted from a calibration run's results, and its section of a
run's report (:mod:`judgeq.grading.cascade` says what a cascade is).

A calibration run grades a labelled jobs file with every stage of the cascade (no stage keeps
a job), so each result records every stage's verdict and confidence: :func:`fit_thresholds`
fits one threshold per stage on them (:func:`judgeq.figures.selective.fit_cascade`, by
fixed-sequence testing), and says how many labelled jobs it used and what it left out.
:class:`CascadeStats` folds a cascade run's results into its report section: the guarantee it
was run under, the share of jobs each judge answered, the abstentions, the agreement observed on
the run's own labelled jobs (held out from the calibration), and its cost against the strongest
judge grading every job alone.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from judgeq.figures.selective import apply_cascade, fit_cascade
from judgeq.figures.stats import wilson
from judgeq.grading.cascade import ABSTAINED, CascadeSpec, label_verdict
from judgeq.grading.result import Result
from judgeq.judges.prices import Prices
from judgeq.rubric.model import Rubric

__all__ = ["CascadeStats", "Fitted", "fit_thresholds"]


@dataclass(frozen=True, slots=True)
class Fitted:
    """A calibration's outcome: the cascade to run the batch with, and what the calibration saw."""

    spec: CascadeSpec
    used: int
    """Labelled calibration jobs every stage gave a verdict or a confidence for (the fit's)."""
    left_out: dict[str, int]
    """Calibration jobs the fit could not use, by why (no label, a judge failure)."""
    coverage: float | None
    """On the calibration set: the share of jobs the fitted cascade keeps."""
    agreement: float | None
    """On the calibration set: the share of kept verdicts that agree with the labels."""


def fit_thresholds(
    results: Iterable[Result],
    rubric: Rubric,
    calibrating: CascadeSpec,
    judges: list[str],
    *,
    prices: Prices,
    calibration: str,
    calibration_run: str,
) -> Fitted:
    """The thresholds of ``calibrating``'s cascade fitted on a calibration run's results (each
    graded by every stage: ``calibrating.thresholds`` all None); ValueError when no labelled
    job can be used."""
    stages = len(calibrating.thresholds)
    confidence: list[list[float]] = [[] for _ in range(stages)]
    correct: list[list[bool]] = [[] for _ in range(stages)]
    left_out: Counter[str] = Counter()
    costs: list[float] = []
    for r in results:
        said = label_verdict(r.label, rubric.threshold, rubric.is_pairwise)
        record = r.cascade
        if said is None:
            left_out["no label"] += 1
            continue
        if record is None or len(record.stages) != stages:
            left_out[f"no verdict from every judge ({r.null_reason or 'settled by its checks'})"] += 1
            continue
        for s, stage in enumerate(record.stages):
            confidence[s].append(stage.confidence)
            correct[s].append(stage.verdict == said)
        last = record.stages[-1]
        cost = prices.cost(
            judges[-1],
            last.input_tokens,
            last.output_tokens,
            last.cache_read_input_tokens,
            last.cache_creation_input_tokens,
        )
        if cost is not None:
            costs.append(cost["total"])
    used = len(correct[0])
    if used == 0:
        raise ValueError("no labelled calibration job was graded by every judge of the cascade")
    fitted = fit_cascade(confidence, correct, 1 - calibrating.agreement, calibrating.risk)
    kept = agree = 0
    for i in range(used):
        keeper = apply_cascade(fitted, [row[i] for row in confidence])
        if keeper is not None:
            kept += 1
            agree += correct[keeper][i]
    spec = calibrating.model_copy(
        update={
            "thresholds": list(fitted.thresholds),
            "calibration": calibration,
            "calibrated": used,
            "calibration_run": calibration_run,
            "strongest_cost": round(sum(costs) / len(costs), 8) if len(costs) == used else None,
        }
    )
    return Fitted(spec, used, dict(left_out), kept / used, agree / kept if kept else None)


@dataclass(slots=True)
class CascadeStats:
    """A cascade run's report section, streaming."""

    spec: CascadeSpec
    judges: list[str]
    threshold: float | None
    pairwise: bool
    jobs: int = 0
    kept: Counter[int] = field(default_factory=Counter)
    abstained: int = 0
    labelled: int = 0
    agreed: int = 0
    reached: Counter[int] = field(default_factory=Counter)

    def add(self, r: Result) -> None:
        self.jobs += 1
        record = r.cascade
        if record is None:
            return
        for s in range(len(record.stages)):
            self.reached[s] += 1
        if r.status == "null" and r.null_reason == ABSTAINED:
            self.abstained += 1
        if record.stage is None:
            return
        self.kept[record.stage] += 1
        said = label_verdict(r.label, self.threshold, self.pairwise)
        if said is not None:
            self.labelled += 1
            self.agreed += r.verdict() == said

    def to_dict(self, cost_usd: float | None) -> dict[str, Any]:
        kept = sum(self.kept.values())
        alone = self.spec.strongest_cost * self.jobs if self.spec.strongest_cost is not None else None
        return {
            "agreement": self.spec.agreement,
            "risk": self.spec.risk,
            "samples": self.spec.samples,
            "confidence": self.spec.confidence,
            "calibration": self.spec.calibration,
            "calibration_run": self.spec.calibration_run,
            "calibrated": self.spec.calibrated,
            "jobs": self.jobs,
            "kept": kept,
            "coverage": round(100.0 * kept / self.jobs, 2) if self.jobs else None,
            "abstained": self.abstained,
            "stages": [
                {
                    "judge": judge,
                    "threshold": self.spec.thresholds[s],
                    "asked": self.reached[s],
                    "answered": self.kept[s],
                    "share": round(100.0 * self.kept[s] / self.jobs, 2) if self.jobs else None,
                }
                for s, judge in enumerate(self.judges)
            ],
            "observed": {
                "labelled": self.labelled,
                "agreement": round(100.0 * self.agreed / self.labelled, 2) if self.labelled else None,
                "interval": wilson(self.agreed, self.labelled) if self.labelled else None,
            },
            "cost_usd": cost_usd,
            "strongest_alone_usd": None if alone is None else round(alone, 6),
            "cost_fraction": round(cost_usd / alone, 4) if cost_usd is not None and alone else None,
        }

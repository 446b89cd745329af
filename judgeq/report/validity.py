"""How far a run's grades can be trusted: streaming accumulators for the report.

* :class:`AgreementStats` -- labelled jobs: the judge against people's labels;
* :class:`CouncilStats` -- several judges: each judge's scores, Krippendorff's alpha between
  them, the combined score (mean, or mean of per-judge z-scores) and the jobs they disagree on;
* :class:`InputPairing` -- models graded on the same inputs: paired differences and a test.

Denominators (each figure's; a pair job's win rates are its kind's section, see
:class:`judgeq.jobs.pair.PairwiseStats`): agreement is over labelled **graded** jobs
(labelled nulls are counted by reason beside, never scored); council figures over graded jobs
with every judge's score.  Memory is bounded: counters, plus at most :data:`MAX_UNITS` values
per judge or input (the report says when a figure is over that sample).
"""

from __future__ import annotations

import heapq
import math
from array import array
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import combinations
from statistics import NormalDist
from typing import Any

from judgeq.figures import stats as _stats
from judgeq.figures.ppi import Estimate, Moments, Stratum, stratified
from judgeq.figures.stats import pct
from judgeq.grading.result import Result

__all__ = [
    "DOUBTED",
    "MAX_UNITS",
    "SHOWN",
    "AgreementStats",
    "CouncilStats",
    "EstimateStats",
    "InputPairing",
]

MAX_UNITS = 200_000
"""Jobs (or inputs) whose per-judge or per-model values are kept for alpha, z-scores and
paired tests: the first that many graded; the figures say when they are over a sample."""
SHOWN = 20
DOUBTED = frozenset({"judges_disagree", "position_inconsistent"})
"""The flags by which a run doubts its own verdict: a stratum of their own for the estimates
(:class:`EstimateStats`; ``judgeq labels export`` puts all of them before people)."""


@dataclass(slots=True)
class AgreementStats:
    """The judge against people's labels (``label`` on a job): see :meth:`to_dict`."""

    mode: str  # "pairwise", "pass-fail" or "numeric"
    lo: int = 1
    hi: int = 10
    threshold: float | None = None
    categories: Counter[tuple[str, str]] = field(default_factory=Counter)
    pass_fail: Counter[tuple[str, str]] = field(default_factory=Counter)
    labels: array[float] = field(default_factory=lambda: array("d"))
    scores: array[float] = field(default_factory=lambda: array("d"))
    nulls: Counter[str] = field(default_factory=Counter)
    labelled: int = 0

    def add(self, r: Result) -> None:
        if r.label is None:
            return
        self.labelled += 1
        if r.settled:  # failed by a rule of its kind (a hard check): a fail, with no score to compare
            if self.mode != "pairwise" and isinstance(r.label, str):
                self.pass_fail[(r.label, "fail")] += 1
            elif self.mode != "pairwise" and self.threshold is not None:
                self.pass_fail[("pass" if float(r.label) >= self.threshold else "fail", "fail")] += 1
            return
        if r.status != "graded" or r.overall is None:
            self.nulls[r.null_reason or "unknown"] += 1
            return
        said_pass = "pass" if r.passed else "fail"
        if self.mode == "pairwise":
            self.categories[(str(r.label), str(r.verdict()))] += 1  # a pair's winner
        elif isinstance(r.label, str):
            self.pass_fail[(r.label, said_pass)] += 1
        else:
            if len(self.labels) < MAX_UNITS * 5:
                self.labels.append(float(r.label))
                self.scores.append(float(r.overall))
            if self.threshold is not None:
                self.pass_fail[("pass" if r.label >= self.threshold else "fail", said_pass)] += 1

    def to_dict(self) -> dict[str, Any] | None:
        if not self.labelled:
            return None
        graded = self.labelled - sum(self.nulls.values())
        out: dict[str, Any] = {
            "labelled": self.labelled,
            "graded": graded,
            "nulls": sum(self.nulls.values()),
            "null_by_reason": dict(sorted(self.nulls.items())),
        }
        if self.mode == "pairwise":
            out["pairs"] = self._pairs()
        if self.pass_fail:
            out["pass_fail"] = _stats.categorical_agreement(self.pass_fail, ["pass", "fail"])
            if self.mode == "numeric":
                out["pass_fail"]["note"] = (
                    f"numeric labels at or above the pass threshold ({self.threshold:g}) count as pass"
                    if self.threshold is not None
                    else "pass/fail labels against the judge's pass"
                )
        if self.labels:
            out["numeric"] = _stats.numeric_agreement(self.labels, self.scores, self.lo, self.hi)
        return out

    def _pairs(self) -> dict[str, Any]:
        cats = self.categories
        n = sum(cats.values())
        credits = {
            key: 1.0 if key[0] == key[1] else 0.5 if "tie" in key else 0.0 for key in cats
        }  # a job's credit: right 1, a tie on one side 0.5, wrong 0
        credit = sum(c * credits[k] for k, c in cats.items())
        decisive = {k: c for k, c in cats.items() if "tie" not in k}
        right = sum(c for (label, said), c in decisive.items() if label == said)
        m = sum(decisive.values())
        base = _stats.categorical_agreement(cats, ["a", "b", "tie"])
        return {
            "n": n,
            "accuracy_ties_half": pct(credit, n),
            "accuracy_ties_half_ci95": _stats.wilson(credit, n),
            "accuracy_ties_excluded": pct(right, m),
            "accuracy_ties_excluded_ci95": _stats.wilson(right, m),
            "ties_excluded_n": m,
            "kappa": base["kappa"],
            "confusion": base["confusion"],
            "note": "ties half: a tie on one side and a winner on the other earns half; ties excluded: "
            "only jobs where neither the label nor the judge is a tie",
        }


@dataclass(slots=True)
class CouncilStats:
    """Several judges per job (``judge_scores``): see :meth:`to_dict`."""

    judges: Sequence[str]
    level: _stats.AlphaLevel
    mode: str = "mean"
    rows: dict[str, array[float]] = field(default_factory=dict)
    models: list[str | None] = field(default_factory=list)
    sums: dict[str, list[float]] = field(default_factory=dict)
    disagreements: list[tuple[float, str]] = field(default_factory=list)
    units: int = 0
    absent: dict[str, int] = field(default_factory=dict)
    """Per judge: the jobs it gave no verdict for (a jury's absent member)."""
    with_panel: dict[str, list[int]] = field(default_factory=dict)
    """Per judge: [jobs, those whose category it gave is the council's] (categorical scales)."""
    with_labels: dict[str, list[int]] = field(default_factory=dict)
    """Per judge: [labelled jobs, those whose label it gave] (categorical labels)."""

    def __post_init__(self) -> None:
        self.rows = {j: array("d") for j in self.judges}
        self.sums = {j: [0, 0.0, 0.0] for j in self.judges}
        self.absent = dict.fromkeys(self.judges, 0)
        self.with_panel = {j: [0, 0] for j in self.judges}
        self.with_labels = {j: [0, 0] for j in self.judges}

    def add(self, r: Result) -> None:
        for j in r.judges_absent or {}:
            if j in self.absent:
                self.absent[j] += 1
        if r.status != "graded" or not r.judge_scores:
            return
        if self.level == "nominal":
            self._agree(r, r.judge_scores)
        self.units += 1
        for j in self.judges:
            v = r.judge_scores.get(j)
            if v is not None:
                s = self.sums[j]
                s[0] += 1
                s[1] += v
                s[2] += v * v
        if len(self.models) < MAX_UNITS:
            for j in self.judges:
                self.rows[j].append(r.judge_scores.get(j, math.nan))
            self.models.append(r.model)
        values = list(r.judge_scores.values())
        spread = max(values) - min(values)
        if "judges_disagree" in r.flags:
            item = (spread, r.job_id)
            if len(self.disagreements) < SHOWN:
                heapq.heappush(self.disagreements, item)
            else:
                heapq.heappushpop(self.disagreements, item)

    def _agree(self, r: Result, scores: dict[str, float]) -> None:
        """Each member's category against the council's verdict and the job's label."""
        panel = r.verdict()
        label = str(r.label).lower() if isinstance(r.label, str) else None
        for j, v in scores.items():
            if j not in self.with_panel:
                continue
            pair = panel in ("a", "b", "tie")  # (a pair's score is output A's: 1, 0.5, 0)
            mine = {1.0: "a", 0.5: "tie", 0.0: "b"}.get(v, "tie") if pair else "pass" if v > 0.5 else "fail"
            if panel is not None:
                self.with_panel[j][0] += 1
                self.with_panel[j][1] += mine == panel
            if label in ("pass", "fail", "a", "b", "tie"):
                self.with_labels[j][0] += 1
                self.with_labels[j][1] += mine == label

    def to_dict(self) -> dict[str, Any]:
        per_judge = {}
        for j in self.judges:
            n, total, sq = self.sums[j]
            per_judge[j] = {
                "n": int(n),
                "mean": round(total / n, 4) if n else None,
                "ci95": _stats.t_interval(int(n), total, sq),
            }
        matrix = [list(self.rows[j]) for j in self.judges]
        sampled = len(self.models)
        out: dict[str, Any] = {
            "judges": list(self.judges),
            "per_judge": per_judge,
            "krippendorff_alpha": _stats.krippendorff_alpha(matrix, level=self.level),
            "alpha_level": self.level,
            "units": self.units,
            "sampled_units": sampled,
            "combined": self._combined(matrix),
            "absent": dict(self.absent) if any(self.absent.values()) else None,
            "with_council": _shares(self.with_panel),
            "with_labels": _shares(self.with_labels),
            "disagreements": [
                {"job_id": job, "spread": round(spread, 4)}
                for spread, job in sorted(self.disagreements, reverse=True)
            ],
        }
        return out

    def _combined(self, matrix: list[list[float]]) -> dict[str, Any]:
        """The mean of the judges' scores (each job's ``overall``), or with ``z`` the mean of
        per-judge z-scores (each judge's scores standardised over the run), overall and by model;
        a jury's rules (``jury-median``, ``jury-mean``)."""
        if self.mode.startswith("jury-"):
            rule = self.mode.removeprefix("jury-")
            return {
                "method": self.mode,
                "note": (
                    "a jury: a category is the one more than half of the whole panel gave (members "
                    f"that gave no verdict counted); a score is the {rule} of the members that "
                    "answered, when more than half did"
                ),
            }
        if self.mode != "z":
            return {"method": "mean", "note": "each job's overall is the mean of its judges' scores"}
        stats = {}
        for j, row in zip(self.judges, matrix, strict=True):
            vals = [v for v in row if not math.isnan(v)]
            if len(vals) >= 2:
                mean = math.fsum(vals) / len(vals)
                sd = math.sqrt(math.fsum((v - mean) ** 2 for v in vals) / (len(vals) - 1))
                stats[j] = (mean, sd)
        combined: list[float] = []
        by_model: dict[str, list[float]] = {}
        for u, model in enumerate(self.models):
            zs = [
                (matrix[k][u] - stats[j][0]) / stats[j][1]
                for k, j in enumerate(self.judges)
                if j in stats and stats[j][1] > 0 and not math.isnan(matrix[k][u])
            ]
            if zs:
                z = math.fsum(zs) / len(zs)
                combined.append(z)
                by_model.setdefault(model or "(no model)", []).append(z)
        return {
            "method": "z",
            "note": "mean of per-judge z-scores (each judge's scores standardised over the run)",
            "n": len(combined),
            "mean": round(math.fsum(combined) / len(combined), 4) if combined else None,
            "ci95": _stats.mean_interval(combined),
            "by_model": {
                m: {"n": len(v), "mean": round(math.fsum(v) / len(v), 4), "ci95": _stats.mean_interval(v)}
                for m, v in sorted(by_model.items())
            },
        }


@dataclass(slots=True)
class InputPairing:
    """Overall scores of several models on the same input (``input_key``), for paired tests; a
    model graded more than once on an input counts with the mean of its scores there. Fed the
    results of the kinds grouped by model (:attr:`judgeq.jobs.kind.JobKind.by_model`)."""

    scores: dict[str, dict[str, list[float]]] = field(default_factory=dict)
    dropped: int = 0

    def add(self, r: Result) -> None:
        if r.status != "graded" or r.overall is None or r.model is None or r.input_key is None:
            return
        slot = self.scores.get(r.input_key)
        if slot is None:
            if len(self.scores) >= MAX_UNITS:
                self.dropped += 1
                return
            slot = self.scores[r.input_key] = {}
        total = slot.setdefault(r.model, [0.0, 0.0])
        total[0] += r.overall
        total[1] += 1

    def to_list(self) -> list[dict[str, Any]]:
        models = sorted({m for slot in self.scores.values() for m in slot})
        out = []
        for a, b in combinations(models, 2):
            diffs = [
                slot[b][0] / slot[b][1] - slot[a][0] / slot[a][1]
                for slot in self.scores.values()
                if a in slot and b in slot
            ]
            if len(diffs) < 2:
                continue
            out.append({"model": a, "vs": b, **_stats.paired(diffs), "sampled": bool(self.dropped)})
        return out


def _shares(counts: dict[str, list[int]]) -> dict[str, dict[str, Any]] | None:
    """``{judge: {n, agree, rate, ci95}}``: the share in percent and its 95% Wilson interval, as
    the report's other agreement figures; None when no judge has a count."""
    if not any(n for n, _ in counts.values()):
        return None
    return {
        j: {
            "n": n,
            "agree": k,
            "rate": round(100 * k / n, 2) if n else None,
            "ci95": _stats.wilson(k, n) if n else None,
        }
        for j, (n, k) in counts.items()
    }


@dataclass(slots=True)
class _Quantity:
    """One figure's strata (doubted verdicts, the others) and the judge's figure over all."""

    strata: tuple[Stratum, Stratum] = field(default_factory=lambda: (Stratum(), Stratum()))
    judge: Moments = field(default_factory=Moments)

    def add(self, judge: float, person: float | None, doubted: bool) -> None:
        self.judge.add(judge)
        self.strata[1 if doubted else 0].add(judge, person)

    @property
    def doubted(self) -> int:
        """Jobs whose verdict the run doubts (their own stratum)."""
        return self.strata[1].size

    def to_dict(
        self, scale: float, bounds: tuple[float, float], level: float = 0.95
    ) -> dict[str, Any] | None:
        """Its figures times ``scale``; intervals clipped to ``bounds`` (what the figure can be:
        a normal interval past them says nothing more). None without labels."""
        people = [y for s in self.strata for y in s.y]
        if not people or not self.judge.n:
            return None
        lo, hi = bounds

        def clip(x: float) -> float:
            return max(lo, min(hi, x))

        def shown(e: Estimate) -> dict[str, Any]:
            ends = (clip(e.lo), clip(e.hi))
            return {
                "value": round(clip(e.value) * scale, 4),
                "ci95": [round(ends[0] * scale, 4), round(ends[1] * scale, 4)],
                "n": e.n,
            }

        half = NormalDist().inv_cdf(0.5 + level / 2) * math.sqrt(self.judge.var / self.judge.n)
        mean = self.judge.mean
        out: dict[str, Any] = {
            "n": self.judge.n,
            "labelled": len(people),
            "judge_only": shown(Estimate(mean, mean - half, mean + half, level, self.judge.n)),
        }
        try:  # people alone, each stratum weighted by its share (a random draw within each)
            out["human_only"] = shown(stratified(self.strata, level, lam=0.0, bounds=bounds)[0])
        except ValueError:
            out["human_only"] = None
        try:
            whole, parts = stratified(self.strata, level, bounds=bounds)
        except ValueError:
            short = self.doubted and len(self.strata[1].y) < 2 and self.strata[1].unlabelled.n
            where = "the jobs whose verdict the run doubts" if short else "the jobs"
            out["ppi"] = None
            out["note"] = (
                f"no prediction-powered estimate: {where} need two labels or more "
                "(judgeq labels export puts them before people)"
            )
            return out
        out["ppi"] = {**shown(whole), "lam": [p.lam for p in parts]}
        return out


@dataclass(slots=True)
class EstimateStats:
    """The run's pass rate and mean score estimated from people's labels and the judge's
    figures together (prediction-powered inference, :mod:`judgeq.figures.ppi`), beside the
    judge-only and human-only figures, for the run and each model. Over graded jobs (a null
    has no judge figure); labels a, b and tie (pairs) are not estimated here."""

    threshold: float | None
    numeric: bool
    lo: float = 1.0
    hi: float = 10.0
    run: dict[str, _Quantity] = field(default_factory=dict)
    by_model: dict[str, dict[str, _Quantity]] = field(default_factory=dict)

    def add(self, r: Result, *, by_model: bool) -> None:
        if r.status != "graded" and not r.settled:
            return
        label = r.label
        if isinstance(label, str) and label not in ("pass", "fail"):
            return  # a pair's label
        doubted = bool(DOUBTED.intersection(r.flags))
        groups = [self.run] + ([self.by_model.setdefault(r.model, {})] if by_model and r.model else [])
        if r.passed is not None:
            person: float | None = None
            if isinstance(label, str):
                person = 1.0 if label == "pass" else 0.0
            elif label is not None and self.threshold is not None:
                person = 1.0 if label >= self.threshold else 0.0
            for g in groups:
                g.setdefault("pass_rate", _Quantity()).add(1.0 if r.passed else 0.0, person, doubted)
        if self.numeric and r.overall is not None and not r.settled:
            # (a pass/fail label says nothing of the score: the job counts as unlabelled here)
            score = float(label) if isinstance(label, float) else None
            for g in groups:
                g.setdefault("mean", _Quantity()).add(float(r.overall), score, doubted)

    def _figures(self, group: dict[str, _Quantity]) -> dict[str, Any]:
        out = {}
        for name, scale, bounds in (("pass_rate", 100.0, (0.0, 1.0)), ("mean", 1.0, (self.lo, self.hi))):
            q = group.get(name)
            body = q.to_dict(scale, bounds) if q is not None else None
            if body is not None:
                out[name] = body
        return out

    def to_dict(self) -> dict[str, Any] | None:
        run = self._figures(self.run)
        if not run:
            return None
        models = {m: f for m, f in ((m, self._figures(g)) for m, g in sorted(self.by_model.items())) if f}
        first = next(iter(self.run.values()))
        note = (
            "PPI++: people's labels correct the judge's figure (its weight: lam); valid when the "
            "labelled jobs are a random sample of the graded jobs"
        )
        if first.doubted:
            note += (
                f", within each of two strata: the {first.doubted} jobs whose verdict the run doubts "
                "(judges disagree, or a pair's verdict changed with the order) and the others"
            )
        return {**run, **({"by_model": models} if models else {}), "note": note}

"""Prediction-powered inference for a mean (PPI++; Angelopoulos, Duchi, Zrnic 2023): a few
human labels correct the bias of many judge labels, with a valid interval.

With ``n`` jobs labelled by people (``y``, and the judge's figure on the same jobs, ``f``) and
``N`` jobs only the judge graded (``f_u``), the estimate is

    theta = lam * mean(f_u) + mean(y - lam * f)

unbiased for the people's mean for any ``lam``; ``lam`` is tuned to the variance-minimising
``cov(y, f) / ((1 + n/N) var(f))``, clipped to [0, 1] (0: the human-only mean; 1: classical
PPI). Its interval is ``theta +- sqrt(z^2 lam^2 var(f_u)/N + t^2 var(y - lam f)/n)``: the normal
quantile ``z`` for the judge's part over many jobs, Student's ``t`` with ``n - 1`` degrees of
freedom for the part estimated from the few labelled ones (the human-only interval is the
t-interval); with the normal quantile alone, 40 labels covered 93.9% where 95% was asked
(``benchmarks/ppi.py``, PaLM 2 on LLMBar; 94.5% with ``t``). Pass rates are means of 0/1.
Pure (scipy's t quantile aside): no numpy, no Celery, no Redis.

**Strata.** :func:`stratified` combines estimates made apart in strata that cover the jobs (a
report's: the jobs whose verdict the run doubts, and the others): each stratum's weight is its
share of the jobs, its variance that weight squared times its own. People's labels need only be
a random sample *within* each stratum, so a file that puts every doubted job before people and a
random draw of the others (``judgeq labels export``) gives a valid estimate. A stratum whose
every job is labelled is known exactly (its people's mean, no variance).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from statistics import NormalDist, covariance, fmean, variance

__all__ = [
    "Estimate",
    "Moments",
    "Stratum",
    "human_only",
    "judge_only",
    "ppi_mean",
    "ppi_moments",
    "stratified",
]


@dataclass(frozen=True)
class Estimate:
    """A mean with its interval at ``level``; ``lam`` the PPI++ weight of the judge (None for the
    human-only and judge-only figures)."""

    value: float
    lo: float
    hi: float
    level: float
    n: int
    lam: float | None = None

    @property
    def width(self) -> float:
        return self.hi - self.lo


def _var(xs: Sequence[float]) -> float:
    """The sample variance; 0 for fewer than two values."""
    return variance(xs) if len(xs) > 1 else 0.0


def _z(level: float) -> float:
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must be between 0 and 1, not {level}")
    return NormalDist().inv_cdf(0.5 + level / 2)


def _t(level: float, n: int) -> float:
    """The two-sided quantile of Student's t with ``n - 1`` degrees of freedom: the variance of a
    mean over ``n`` labelled jobs is itself estimated from them (with 40 labels the normal
    quantile's intervals covered 93.9% where 95% was asked: benchmarks/ppi.py)."""
    from scipy.stats import t

    return float(t.ppf(0.5 + level / 2, max(n - 1, 1)))


def _normal(value: float, var: float, level: float, n: int, lam: float | None = None) -> Estimate:
    half = _z(level) * math.sqrt(max(var, 0.0))
    return Estimate(value, value - half, value + half, level, n, lam)


def human_only(y: Sequence[float], level: float = 0.95) -> Estimate:
    """The labelled jobs' mean and its normal interval (the classical estimate PPI improves on)."""
    if not y:
        raise ValueError("no labelled jobs")
    half = _t(level, len(y)) * math.sqrt(_var(y) / len(y))
    return Estimate(fmean(y), fmean(y) - half, fmean(y) + half, level, len(y))


def judge_only(f_all: Sequence[float], level: float = 0.95) -> Estimate:
    """The judge's mean over every job: narrow, and biased by however the judge errs."""
    if not f_all:
        raise ValueError("no judged jobs")
    return _normal(fmean(f_all), _var(f_all) / len(f_all), level, len(f_all))


@dataclass
class Moments:
    """A stream's count, mean and sum of squared deviations (Welford): its mean and variance
    without keeping its values."""

    n: int = 0
    mean: float = 0.0
    m2: float = 0.0

    def add(self, x: float) -> None:
        self.n += 1
        delta = x - self.mean
        self.mean += delta / self.n
        self.m2 += delta * (x - self.mean)

    @property
    def var(self) -> float:
        """The sample variance; 0 for fewer than two values."""
        return self.m2 / (self.n - 1) if self.n > 1 else 0.0

    @classmethod
    def of(cls, xs: Sequence[float]) -> Moments:
        out = cls()
        for x in xs:
            out.add(x)
        return out


def ppi_mean(
    y: Sequence[float],
    f: Sequence[float],
    f_u: Sequence[float],
    level: float = 0.95,
    *,
    lam: float | None = None,
) -> Estimate:
    """The PPI++ estimate of the people's mean (see the module); ``lam`` fixed, or tuned when
    None. ``y`` and ``f`` are the same labelled jobs, in the same order."""
    return ppi_moments(y, f, Moments.of(f_u), level, lam=lam)


def ppi_moments(
    y: Sequence[float],
    f: Sequence[float],
    unlabelled: Moments,
    level: float = 0.95,
    *,
    lam: float | None = None,
    bounds: tuple[float, float] | None = None,
) -> Estimate:
    """:func:`ppi_mean` with the unlabelled jobs' judge figures as their :class:`Moments` (a
    report's stream: the labelled jobs are few and kept, the others are counted).

    ``lam`` tuned: 1 (classical PPI) when the judge's figures on the labelled jobs do not vary
    (they cannot tell how the judge relates to people; the judge's spread stays in the interval).
    ``bounds``: what a figure can be (0-1 for a pass); when every labelled job gives the same
    ``y - lam f`` (20 passes of 20), its variance is taken as if one more had been at the far
    end of what it can be, so a few unanimous labels never make a zero-width interval."""
    n, big_n = len(y), unlabelled.n
    if n != len(f):
        raise ValueError(f"{n} labels but {len(f)} judge figures for the labelled jobs")
    if n < 2 or big_n < 1:
        raise ValueError("PPI needs two labelled jobs or more and one unlabelled job or more")
    var_f = _var(f)
    if lam is None:
        lam = covariance(y, f) / ((1 + n / big_n) * var_f) if var_f > 0 else 1.0
        lam = min(1.0, max(0.0, lam))
    rectifier = [a - lam * b for a, b in zip(y, f, strict=True)]
    value = lam * unlabelled.mean + fmean(rectifier)
    var_r = _var(rectifier)
    if var_r == 0 and bounds is not None:
        lo, hi = bounds
        centre = rectifier[0]
        far = max((lo - lam * hi, hi - lam * lo), key=lambda x: abs(x - centre))
        var_r = _var([*rectifier, far])
    # the judge's part over many jobs (normal), the rectifier's over the few labelled (Student's t)
    half = math.sqrt((_z(level) * lam) ** 2 * unlabelled.var / big_n + _t(level, n) ** 2 * var_r / n)
    return Estimate(value, value - half, value + half, level, n, lam)


@dataclass
class Stratum:
    """One stratum's jobs, streamed: the labelled jobs' people's and judge's figures (kept), the
    others' judge figures (counted)."""

    y: list[float] = field(default_factory=list)
    f: list[float] = field(default_factory=list)
    unlabelled: Moments = field(default_factory=Moments)

    def add(self, judge: float, person: float | None) -> None:
        if person is None:
            self.unlabelled.add(judge)
        else:
            self.y.append(person)
            self.f.append(judge)

    @property
    def size(self) -> int:
        return len(self.y) + self.unlabelled.n

    def estimate(
        self, level: float, *, lam: float | None = None, bounds: tuple[float, float] | None = None
    ) -> Estimate:
        """Its PPI++ estimate (``lam`` 0: its people's mean alone); its people's mean, exact,
        when every job is labelled; ValueError when it has unlabelled jobs and fewer than two
        labels."""
        if not self.unlabelled.n and self.y:
            value = fmean(self.y)
            return Estimate(value, value, value, level, len(self.y), None)
        return ppi_moments(self.y, self.f, self.unlabelled, level, lam=lam, bounds=bounds)


def stratified(
    strata: Sequence[Stratum],
    level: float = 0.95,
    *,
    lam: float | None = None,
    bounds: tuple[float, float] | None = None,
) -> tuple[Estimate, list[Estimate]]:
    """The estimate over the strata's jobs together (see the module) and each non-empty
    stratum's own, in order (``lam``, ``bounds``: :func:`ppi_moments`'; ``lam=0``: people's
    figure alone, weighted by the strata, the people-only figure of a stratified sample);
    ValueError (from the stratum) when one cannot be estimated."""
    full = [s for s in strata if s.size]
    total = sum(s.size for s in full)
    if not total:
        raise ValueError("no jobs")
    parts = [s.estimate(level, lam=lam, bounds=bounds) for s in full]
    value = sum(s.size / total * e.value for s, e in zip(full, parts, strict=True))
    z = _z(level)
    var = sum((s.size / total * e.width / (2 * z)) ** 2 for s, e in zip(full, parts, strict=True))
    return _normal(value, var, level, sum(len(s.y) for s in full)), parts

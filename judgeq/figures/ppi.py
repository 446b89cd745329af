"""Prediction-powered inference for a mean (PPI++; Angelopoulos, Duchi, Zrnic 2023): a few
human labels correct the bias of many judge labels, with a valid interval.

With ``n`` jobs labelled by people (``y``, and the judge's figure on the same jobs, ``f``) and
``N`` jobs only the judge graded (``f_u``), the estimate is

    theta = lam * mean(f_u) + mean(y - lam * f)

unbiased for the people's mean for any ``lam``; ``lam`` is tuned to the variance-minimising
``cov(y, f) / ((1 + n/N) var(f))``, clipped to [0, 1] (0: the human-only mean; 1: classical
PPI). Its interval is normal: ``theta +- z * sqrt(lam^2 var(f_u)/N + var(y - lam f)/n)``.
Pass rates are means of 0/1. Pure: no numpy, no Celery, no Redis.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist, covariance, fmean, variance

__all__ = ["Estimate", "human_only", "judge_only", "ppi_mean"]


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


def _normal(value: float, var: float, level: float, n: int, lam: float | None = None) -> Estimate:
    half = _z(level) * math.sqrt(max(var, 0.0))
    return Estimate(value, value - half, value + half, level, n, lam)


def human_only(y: Sequence[float], level: float = 0.95) -> Estimate:
    """The labelled jobs' mean and its normal interval (the classical estimate PPI improves on)."""
    if not y:
        raise ValueError("no labelled jobs")
    return _normal(fmean(y), _var(y) / len(y), level, len(y))


def judge_only(f_all: Sequence[float], level: float = 0.95) -> Estimate:
    """The judge's mean over every job: narrow, and biased by however the judge errs."""
    if not f_all:
        raise ValueError("no judged jobs")
    return _normal(fmean(f_all), _var(f_all) / len(f_all), level, len(f_all))


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
    n, big_n = len(y), len(f_u)
    if n != len(f):
        raise ValueError(f"{n} labels but {len(f)} judge figures for the labelled jobs")
    if n < 2 or big_n < 1:
        raise ValueError("PPI needs two labelled jobs or more and one unlabelled job or more")
    var_f = _var(f)
    if lam is None:
        lam = covariance(y, f) / ((1 + n / big_n) * var_f) if var_f > 0 else 0.0
        lam = min(1.0, max(0.0, lam))
    rectifier = [a - lam * b for a, b in zip(y, f, strict=True)]
    value = lam * fmean(f_u) + fmean(rectifier)
    return _normal(value, lam**2 * _var(f_u) / big_n + _var(rectifier) / n, level, n, lam)

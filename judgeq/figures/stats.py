"""Statistics for the report: intervals, paired tests, agreement and ratings.

Each function is small and states its method; the arithmetic is scipy's, scikit-learn's and
krippendorff's (imported when first needed, so a worker that never reduces pays nothing).

* :func:`wilson` -- a rate's 95% interval: the Wilson score interval (scipy ``binomtest``);
* :func:`t_interval` -- a mean's 95% interval: Student's t on the sample standard deviation;
* :func:`paired` -- paired differences: mean, t interval, Wilcoxon signed-rank p-value;
* :func:`categorical_agreement` / :func:`numeric_agreement` -- a judge against labels;
* :func:`krippendorff_alpha` -- agreement between judges;
* :func:`bradley_terry` -- ratings from pairwise outcomes, with bootstrap intervals.

Every function returns None (or omits a figure) where it is undefined: no data, one value,
no variance.  A figure is never made up to fill a table.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypedDict

__all__ = [
    "LEVEL",
    "METHODS",
    "AlphaLevel",
    "Histogram",
    "Stats",
    "bradley_terry",
    "bradley_terry_leaderboard",
    "categorical_agreement",
    "decrease_p",
    "elo",
    "histogram",
    "krippendorff_alpha",
    "mean_interval",
    "numeric_agreement",
    "paired",
    "pct",
    "prewarm",
    "quantile",
    "signed_rank_p",
    "strata_mean_interval",
    "t_interval",
    "wilson",
    "wilson_bounds",
]


class Histogram(TypedDict):
    """A ``report.json`` distribution: bin edges and the count in each bin."""

    edges: list[float]
    counts: list[int]


def histogram(hist: Mapping[float, int], lo: float, hi: float, bins: int = 20) -> Histogram:
    """A {value: count} histogram in ``bins`` equal bins from ``lo`` to ``hi`` (``edges`` has
    bins + 1 entries; a value equal to ``hi`` falls in the last bin). Integer scales of at most
    ``bins`` values get one bin per value."""
    if hi <= lo:
        hi = lo + 1
    if float(lo).is_integer() and float(hi).is_integer() and hi - lo + 1 <= bins:
        edges = [lo + i - 0.5 for i in range(int(hi - lo) + 2)]
    else:
        edges = [lo + (hi - lo) * i / bins for i in range(bins + 1)]
    counts = [0] * (len(edges) - 1)
    for value, n in hist.items():
        k = next((i for i in range(len(counts)) if value < edges[i + 1]), len(counts) - 1)
        counts[max(k, 0)] += n
    return {"edges": [round(e, 4) for e in edges], "counts": counts}


def pct(num: float, den: float) -> float | None:
    """Percent with 2 decimals; None when the denominator is 0."""
    return round(100.0 * num / den, 2) if den else None


AlphaLevel = Literal["ordinal", "nominal"]
"""The levels of measurement :func:`krippendorff_alpha` is used at."""

LEVEL = 0.95
METHODS = {
    "level": LEVEL,
    "rates": "Wilson score interval",
    "means": "Student's t interval on the sample standard deviation",
    "paired": "paired t interval of the mean difference; p-value: Wilcoxon signed-rank (two-sided)",
    "win_rates": "Wilson score interval, a tie counting half a win",
    "length_controlled": "normal interval of the mean of the two strata's win rates (longer, shorter)",
    "ratings": "Bradley-Terry maximum likelihood; bootstrap percentile interval (200 resamples)",
}
"""The methods behind every interval of the report (``report.json`` ``intervals``)."""


def prewarm() -> None:
    """Import the statistics libraries now (about a second of CPU), so that a long-lived
    process (a worker) does not pay for them in the middle of its first reduce."""
    import krippendorff  # noqa: F401
    import scipy.stats  # noqa: F401
    import sklearn.metrics  # noqa: F401


def _round(x: float | None, nd: int) -> float | None:
    return None if x is None or not math.isfinite(x) else round(x, nd)


def wilson(k: float, n: int, *, percent: bool = True) -> list[float] | None:
    """The 95% Wilson score interval of ``k`` successes in ``n`` (in percent); None if n = 0.

    ``k`` may be fractional (a tie counting half a win): the score interval's closed form is
    used for it, scipy's ``binomtest`` for whole counts (the two agree; a test checks)."""
    if n <= 0:
        return None
    scale = 100.0 if percent else 1.0
    nd = 2 if percent else 4
    if float(k).is_integer():
        from scipy.stats import binomtest

        ci = binomtest(int(k), int(n)).proportion_ci(confidence_level=LEVEL, method="wilson")
        low, high = float(ci.low), float(ci.high)
    else:
        low, high = wilson_bounds(k / n, n)
    return [round(low * scale, nd), round(high * scale, nd)]


def wilson_bounds(p: float, n: int) -> tuple[float, float]:
    """The Wilson score interval of a proportion ``p`` over ``n`` (its closed form)."""
    from scipy.stats import norm

    z = float(norm.ppf(0.5 + LEVEL / 2))
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def strata_mean_interval(
    strata: Sequence[tuple[int, float, float]], nd: int = 2, bounds: tuple[float, float] = (0.0, 100.0)
) -> list[float] | None:
    """95% normal interval of the unweighted mean of several strata's means, each given as
    (n, sum, sum of squares) of its values, kept within ``bounds`` (a rate's 0-100); None
    when a stratum has fewer than 2 values."""
    if not strata or any(n < 2 for n, _, _ in strata):
        return None
    from scipy.stats import norm

    k = len(strata)
    mean = math.fsum(s / n for n, s, _ in strata) / k
    var = math.fsum(max((sq - s * s / n) / (n - 1), 0.0) / n for n, s, sq in strata) / (k * k)
    half = float(norm.ppf(0.5 + LEVEL / 2)) * math.sqrt(var)
    low, high = max(bounds[0], mean - half), min(bounds[1], mean + half)
    return [round(low, nd), round(high, nd)]


def t_interval(n: int, total: float, total_sq: float, nd: int = 4) -> list[float] | None:
    """The 95% Student's t interval of a mean from ``n`` values, their sum and sum of squares;
    None when n < 2.  A sample without variance has the mean as both bounds."""
    if n < 2:
        return None
    from scipy.stats import t

    mean = total / n
    var = max((total_sq - n * mean * mean) / (n - 1), 0.0)
    half = float(t.ppf(0.5 + LEVEL / 2, n - 1)) * math.sqrt(var / n)
    return [round(mean - half, nd), round(mean + half, nd)]


def mean_interval(values: Sequence[float], nd: int = 4) -> list[float] | None:
    """:func:`t_interval` of a sequence."""
    return t_interval(len(values), math.fsum(values), math.fsum(v * v for v in values), nd)


def paired(diffs: Sequence[float]) -> dict[str, Any]:
    """Paired differences (b - a per shared input): n, mean, its t interval and the two-sided
    Wilcoxon signed-rank p-value (None with fewer than 2 differences; 1.0 when all are 0)."""
    n = len(diffs)
    return {
        "n": n,
        "mean_diff": _round(math.fsum(diffs) / n, 4) if n else None,
        "ci95": mean_interval(diffs),
        "p_value": signed_rank_p(diffs),
    }


def decrease_p(diffs: Sequence[float]) -> float | None:
    """The one-sided Wilcoxon signed-rank p-value that the differences are shifted below 0
    (a decrease); None with fewer than 2 differences, 1.0 when all are 0."""
    return signed_rank_p(diffs, "less")


EXACT_TIED_UP_TO = 13
"""scipy's ``wilcoxon`` gives the exact permutation p-value of a sample with ties or zeros
of up to 13 differences (all 2**n sign flips), else the normal approximation."""


def signed_rank_p(
    diffs: Sequence[float], alternative: Literal["two-sided", "less"] = "two-sided", nd: int = 6
) -> float | None:
    """The Wilcoxon signed-rank p-value of ``diffs`` (zeros dropped, ties ranked by their
    mean), as scipy's ``wilcoxon`` gives it; None with fewer than 2 differences, 1.0 when all
    are 0.

    For up to :data:`EXACT_TIED_UP_TO` differences with ties or zeros, scipy's answer is the
    exact permutation test, which it finds by computing the statistic for each of the 2**n
    sign flips: most of a second at n = 13, paid by each pair of models in every report. The
    same distribution is counted here instead (:func:`_flip_counts`: a sum of ranks over
    subsets, a few thousand additions), the same p-value to the last digit; other samples go
    to scipy.
    """
    if len(diffs) < 2:
        return None
    if all(d == 0 for d in diffs):
        return 1.0
    magnitudes = [abs(d) for d in diffs if d != 0]
    tied = len(magnitudes) < len(diffs) or len(set(magnitudes)) < len(magnitudes)
    if not (tied and len(diffs) <= EXACT_TIED_UP_TO):
        from scipy.stats import wilcoxon

        return _round(float(wilcoxon(diffs, alternative=alternative).pvalue), nd)
    doubled = _doubled_ranks(magnitudes)
    observed = sum(r for r, d in zip(doubled, (d for d in diffs if d != 0), strict=True) if d > 0)
    counts = _flip_counts(doubled)
    total = 2 ** len(doubled)
    below = sum(counts[: observed + 1]) / total
    if alternative == "less":
        return _round(below, nd)
    above = sum(counts[observed:]) / total
    return _round(min(1.0, 2 * min(below, above)), nd)


def _doubled_ranks(values: Sequence[float]) -> list[int]:
    """Twice each value's rank among ``values`` (1-based; a tie's ranks averaged): whole numbers."""
    order = sorted(range(len(values)), key=values.__getitem__)
    doubled = [0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            doubled[order[k]] = i + j + 2  # 2 x the mean of ranks i+1 .. j+1
        i = j + 1
    return doubled


def _flip_counts(weights: Sequence[int]) -> list[int]:
    """``counts[s]``: how many of the 2**n subsets of ``weights`` sum to ``s`` (each sign flip
    of a signed-rank sample is the subset of its differences left positive)."""
    counts = [1] + [0] * sum(weights)
    reached = 0
    for w in weights:
        reached += w
        for s in range(reached, w - 1, -1):
            counts[s] += counts[s - w]
    return counts


def categorical_agreement(pairs: Mapping[tuple[str, str], int], labels: Sequence[str]) -> dict[str, Any]:
    """A judge's categories against people's: ``pairs`` counts (label, judge) pairs. Accuracy
    (with its Wilson interval), Cohen's kappa (scikit-learn) and the confusion matrix (rows:
    label, columns: judge)."""
    n = sum(pairs.values())
    if n == 0:
        return {"n": 0, "accuracy": None, "accuracy_ci95": None, "kappa": None, "confusion": {}}
    import numpy as np
    from sklearn.metrics import cohen_kappa_score

    agree = sum(c for (label, said), c in pairs.items() if label == said)
    y_true = np.repeat([k[0] for k in pairs], list(pairs.values()))
    y_pred = np.repeat([k[1] for k in pairs], list(pairs.values()))
    kappa = float(cohen_kappa_score(y_true, y_pred, labels=list(labels)))
    return {
        "n": n,
        "accuracy": round(100.0 * agree / n, 2),
        "accuracy_ci95": wilson(agree, n),
        "kappa": _round(kappa, 4),
        "confusion": {a: {b: pairs.get((a, b), 0) for b in labels} for a in labels},
    }


def numeric_agreement(labels: Sequence[float], scores: Sequence[float], lo: int, hi: int) -> dict[str, Any]:
    """A judge's scores against people's numbers on the scale ``lo``-``hi``: Spearman's rho and
    Kendall's tau-b (scipy, with p-values), quadratic-weighted kappa on the scores rounded to the
    scale's integers (scikit-learn) and the mean absolute error."""
    n = len(labels)
    out: dict[str, Any] = {"n": n, "spearman": None, "kendall_tau": None, "qwk": None, "mae": None}
    if n == 0:
        return out
    import numpy as np
    from scipy.stats import kendalltau, spearmanr
    from sklearn.metrics import cohen_kappa_score

    y, s = np.asarray(labels, dtype=float), np.asarray(scores, dtype=float)
    out["mae"] = _round(float(np.mean(np.abs(y - s))), 4)
    out["mae_ci95"] = mean_interval(np.abs(y - s).tolist())
    if n >= 2 and np.ptp(y) > 0 and np.ptp(s) > 0:
        rho = spearmanr(y, s)
        tau = kendalltau(y, s)
        out["spearman"] = _round(float(rho.statistic), 4)
        out["spearman_p"] = _round(float(rho.pvalue), 6)
        out["kendall_tau"] = _round(float(tau.statistic), 4)
        out["kendall_p"] = _round(float(tau.pvalue), 6)
    yi = np.clip(np.floor(y + 0.5), lo, hi).astype(int)
    si = np.clip(np.floor(s + 0.5), lo, hi).astype(int)
    if len(set(yi.tolist()) | set(si.tolist())) > 1:
        qwk = cohen_kappa_score(yi, si, labels=list(range(lo, hi + 1)), weights="quadratic")
        out["qwk"] = _round(float(qwk), 4)
    return out


def krippendorff_alpha(matrix: Sequence[Sequence[float]], *, level: AlphaLevel) -> float | None:
    """Krippendorff's alpha of a judges x units matrix (NaN: no value), at ``level``
    (``ordinal`` for scales, ``nominal`` for categories); None when undefined (fewer than two
    units rated by two judges, or a single value everywhere)."""
    import numpy as np

    data = np.asarray(matrix, dtype=float)
    if data.ndim != 2 or data.shape[0] < 2:
        return None
    rated = np.sum(~np.isnan(data), axis=0) >= 2
    values = data[:, rated]
    if values.shape[1] < 2 or len(np.unique(values[~np.isnan(values)])) < 2:
        return None
    import krippendorff

    domain = np.unique(values[~np.isnan(values)])
    alpha = krippendorff.alpha(reliability_data=values, level_of_measurement=level, value_domain=domain)
    return _round(float(alpha), 4)


def bradley_terry(
    counts: Mapping[tuple[str, str], tuple[float, float]], *, iterations: int = 1000, tol: float = 1e-10
) -> dict[str, float]:
    """Bradley-Terry strengths (maximum likelihood, Hunter's MM algorithm) from win counts:
    ``counts[(i, j)] = (wins of i over j, wins of j over i)`` (a tie counts half to each).
    Strengths are normalised to a geometric mean of 1; a model that never wins or never loses
    has no finite maximum likelihood estimate, so every model gets a prior of one tie against
    each opponent (half a win each way), which keeps the estimates finite."""
    counts = {k: v for k, v in counts.items() if k[0] != k[1]}  # a model against itself: no information
    models = sorted({m for pair in counts for m in pair})
    wins: dict[str, float] = dict.fromkeys(models, 0.0)
    games: dict[tuple[str, str], float] = {}
    for (i, j), (w_ij, w_ji) in counts.items():
        wins[i] += w_ij
        wins[j] += w_ji
        games[(i, j)] = games.get((i, j), 0.0) + w_ij + w_ji
    for a in models:  # the prior: one tie between every pair that met
        for b in models:
            if a < b and ((a, b) in games or (b, a) in games):
                games[(a, b)] = games.get((a, b), 0.0) + 1.0
                wins[a] += 0.5
                wins[b] += 0.5
    p = dict.fromkeys(models, 1.0)
    for _ in range(iterations):
        new = {}
        for i in models:
            denom = 0.0
            for (a, b), n in games.items():
                if i in (a, b):
                    other = b if i == a else a
                    denom += n / (p[i] + p[other])
            new[i] = wins[i] / denom if denom > 0 else p[i]
        log_mean = math.fsum(math.log(v) for v in new.values()) / len(new)
        new = {k: v / math.exp(log_mean) for k, v in new.items()}
        done = max(abs(new[k] - p[k]) for k in models) < tol
        p = new
        if done:
            break
    return p


def elo(strengths: Mapping[str, float]) -> dict[str, float]:
    """Bradley-Terry strengths on an Elo-like scale: 1000 + 400 log10(strength) (a 400-point
    gap is 10:1 odds)."""
    return {k: round(1000 + 400 * math.log10(v), 1) for k, v in strengths.items()}


def bradley_terry_leaderboard(
    outcomes: Mapping[tuple[str, str], tuple[int, int, int]], *, resamples: int = 200, seed: int = 0
) -> list[dict[str, Any]]:
    """A leaderboard from ``outcomes[(i, j)] = (wins of i, ties, wins of j)``: each model's
    rating (:func:`elo` of :func:`bradley_terry`) with a bootstrap percentile 95% interval.
    Resampling the jobs is a multinomial draw over the (pair, outcome) cells, so no job list
    is kept."""
    import numpy as np

    def fit(cells: Mapping[tuple[str, str], Sequence[int]]) -> dict[str, float]:
        return elo(bradley_terry({k: (w + t / 2, lost + t / 2) for k, (w, t, lost) in cells.items()}))

    point = fit(outcomes)
    keys = list(outcomes)
    flat = np.array([c for k in keys for c in outcomes[k]], dtype=float)
    total = int(flat.sum())
    draws: dict[str, list[float]] = {m: [] for m in point}
    if total > 0:
        rng = np.random.default_rng(seed)
        for _ in range(resamples):
            sample = rng.multinomial(total, flat / total)
            cells = {k: tuple(int(x) for x in sample[3 * n : 3 * n + 3]) for n, k in enumerate(keys)}
            rated = fit(cells)
            for m in draws:
                draws[m].append(rated.get(m, point[m]))
    board = []
    for m, rating in sorted(point.items(), key=lambda kv: -kv[1]):
        ci = (
            [round(float(np.percentile(draws[m], 2.5)), 1), round(float(np.percentile(draws[m], 97.5)), 1)]
            if draws[m]
            else None
        )
        board.append({"model": m, "rating": rating, "ci95": ci})
    return board


def quantile(hist: Mapping[float, int], q: float) -> float | None:
    """The q-quantile of a histogram {value: count}, interpolating linearly (numpy default)."""
    n = sum(hist.values())
    if n == 0:
        return None
    pos = q * (n - 1)
    lo_rank, frac = math.floor(pos), pos - math.floor(pos)
    hi_rank = min(lo_rank + 1, n - 1)
    lo_val = hi_val = None
    seen = 0
    for value in sorted(hist):
        seen += hist[value]
        if lo_val is None and seen > lo_rank:
            lo_val = value
        if seen > hi_rank:
            hi_val = value
            break
    assert lo_val is not None and hi_val is not None
    return lo_val + (hi_val - lo_val) * frac


@dataclass(slots=True)
class Stats:
    """Streaming mean/median/std/min/max over values with at most 2 decimals.

    ``add`` only counts the value (it runs several times per result of a million-job reduce);
    the histogram of values rounded to 2 decimals, the count and the sums are derived from
    those counts when asked for (a few hundred distinct values whatever the run's size)."""

    raw: Counter[float] = field(default_factory=Counter)

    def add(self, value: float) -> None:
        self.raw[value] += 1

    @property
    def hist(self) -> Counter[float]:
        out: Counter[float] = Counter()
        for v, c in self.raw.items():
            out[round(v, 2)] += c
        return out

    @property
    def n(self) -> int:
        return sum(self.raw.values())

    @property
    def total(self) -> float:
        return sum(v * c for v, c in self.hist.items())

    @property
    def total_sq(self) -> float:
        return sum(v * v * c for v, c in self.hist.items())

    def to_dict(self) -> dict[str, Any]:
        hist = self.hist
        n = sum(hist.values())
        if not n:
            return {"n": 0, "mean": None, "ci95": None, "median": None, "std": None, "min": None, "max": None}
        total = sum(v * c for v, c in hist.items())
        total_sq = sum(v * v * c for v, c in hist.items())
        mean = total / n
        var = max(total_sq / n - mean * mean, 0.0)
        return {
            "n": n,
            "mean": _round(mean, 4),
            "ci95": t_interval(n, total, total_sq),
            "median": _round(quantile(hist, 0.5), 4),
            "std": _round(math.sqrt(var), 4),
            "min": min(hist),
            "max": max(hist),
        }

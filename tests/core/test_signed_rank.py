"""The Wilcoxon signed-rank p-value (judgeq.figures.stats.signed_rank_p) against scipy's.

scipy answers a small sample with ties or zeros by an exact permutation test over its 2**n
sign flips (most of a second at n = 13, once per pair of models in a report); judgeq counts
the same distribution instead. The p-value must be scipy's to the digit the report shows,
for either alternative, whatever the ties, zeros and signs; other samples are scipy's own.
"""

from __future__ import annotations

import random

import pytest
from scipy.stats import wilcoxon

from judgeq.figures.stats import (
    EXACT_TIED_UP_TO,
    _doubled_ranks,
    _flip_counts,
    decrease_p,
    paired,
    signed_rank_p,
)


def scipy_p(diffs: list[float], alternative: str) -> float:
    return round(float(wilcoxon(diffs, alternative=alternative).pvalue), 6)  # type: ignore[arg-type]


def samples(seed: int, count: int, most: int) -> list[list[float]]:
    """Samples of 2..``most`` differences drawn from few values: ties and zeros are common."""
    rng = random.Random(seed)
    values = [-3.0, -2.0, -1.0, -1.0, -0.5, 0.0, 0.0, 0.5, 1.0, 1.0, 2.0, 4.5]
    out = []
    while len(out) < count:
        d = [rng.choice(values) for _ in range(rng.randint(2, most))]
        if any(d):
            out.append(d)
    return out


@pytest.mark.parametrize("alternative", ["two-sided", "less"])
def test_small_tied_samples_get_scipys_exact_p_value(alternative: str) -> None:
    for d in samples(seed=7, count=80, most=10):
        assert signed_rank_p(d, alternative) == scipy_p(d, alternative), d  # type: ignore[arg-type]


def test_the_largest_exact_case_and_the_first_approximate_one() -> None:
    tied = [1.0, -1.0, 0.0, 2.0, 2.0, 1.0, 3.0, -2.0, 1.0, 0.5, 1.0, 2.0, -0.5]
    assert len(tied) == EXACT_TIED_UP_TO
    assert signed_rank_p(tied) == scipy_p(tied, "two-sided")
    longer = [*tied, 1.0]  # 14 differences: scipy's normal approximation, asked of scipy
    assert signed_rank_p(longer) == scipy_p(longer, "two-sided")


def test_untied_and_long_samples_are_scipys() -> None:
    rng = random.Random(3)
    untied = [rng.uniform(-1, 2) for _ in range(9)]
    long = [rng.choice([-1.0, 0.0, 1.0, 2.0]) for _ in range(40)]
    for d in (untied, long):
        for alternative in ("two-sided", "less"):
            assert signed_rank_p(d, alternative) == scipy_p(d, alternative)  # type: ignore[arg-type]


def test_degenerate_samples() -> None:
    assert signed_rank_p([]) is None
    assert signed_rank_p([1.0]) is None
    assert signed_rank_p([0.0, 0.0, 0.0]) == 1.0
    assert decrease_p([0.0, 0.0]) == 1.0
    assert paired([0.0, 0.0])["p_value"] == 1.0
    # every difference the same sign: the smallest p-value the flips allow
    assert signed_rank_p([1.0, 1.0, 1.0, 1.0]) == 2 / 16
    assert decrease_p([-1.0, -1.0, -1.0]) == 1 / 8


def test_ranks_and_flip_counts() -> None:
    # |d| = 1, 1, 2, 3, 3, 3: ranks 1.5, 1.5, 3, 5, 5, 5 -> doubled 3, 3, 6, 10, 10, 10
    assert _doubled_ranks([1.0, 1.0, 2.0, 3.0, 3.0, 3.0]) == [3, 3, 6, 10, 10, 10]
    assert _doubled_ranks([2.0, 1.0]) == [4, 2]
    counts = _flip_counts([2, 4, 6])
    assert sum(counts) == 8
    assert [s for s, c in enumerate(counts) for _ in range(c)] == [0, 2, 4, 6, 6, 8, 10, 12]

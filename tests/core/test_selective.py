"""Fixed-sequence testing of a judge cascade's thresholds (issue 32, the statistics first): the
p-value is the exact binomial tail; the threshold keeps the most items its test allows; and the
guarantee holds by simulation (a seeded Monte-Carlo over calibration draws from a known world)."""

from __future__ import annotations

import random

import pytest
from scipy.stats import binomtest

from judgeq.figures.selective import apply_cascade, fit_cascade, fit_threshold, risk_p_value


@pytest.mark.parametrize(("errors", "n", "alpha"), [(0, 10, 0.1), (3, 50, 0.1), (10, 40, 0.2), (5, 5, 0.5)])
def test_the_p_value_is_the_exact_binomial_tail(errors: int, n: int, alpha: float) -> None:
    assert risk_p_value(errors, n, alpha) == pytest.approx(
        binomtest(errors, n, alpha, alternative="less").pvalue
    )
    assert risk_p_value(0, 0, alpha) == 1.0


def test_the_threshold_keeps_the_confident_and_stops_at_the_first_test_it_fails() -> None:
    # 60 confident items (0.9) all right, 40 unsure (0.6) half wrong
    confidence = [0.9] * 60 + [0.6] * 40
    correct = [True] * 60 + [i % 2 == 0 for i in range(40)]
    assert fit_threshold(confidence, correct, alpha=0.1, delta=0.1) == 0.9
    assert fit_threshold(confidence, correct, alpha=0.5, delta=0.1) == 0.6  # a lax level keeps all
    assert fit_threshold([0.9] * 5 + [0.8] * 50, [False] * 5 + [True] * 50, 0.1, 0.1) is None
    with pytest.raises(ValueError):
        fit_threshold([0.9], [True, False], 0.1, 0.1)


def world(rng: random.Random, n: int) -> tuple[list[float], list[bool]]:
    """A judge whose confidence c is uniform in [0.5, 1] and right with probability c: the risk
    of the items kept at t is (1 - t) / 2."""
    confidence = [rng.uniform(0.5, 1.0) for _ in range(n)]
    return confidence, [rng.random() < c for c in confidence]


def test_the_guarantee_holds_over_calibration_draws() -> None:
    """With probability >= 1 - delta the kept items' true risk is <= alpha."""
    rng = random.Random(7)
    alpha, delta, draws = 0.15, 0.1, 400
    violated = covered = 0
    for _ in range(draws):
        t = fit_threshold(*world(rng, 300), alpha, delta)
        if t is None:
            continue
        covered += 1
        violated += (1 - t) / 2 > alpha
    assert covered > 0.75 * draws  # the test has power: it keeps something in most draws
    assert violated / draws <= delta  # the guarantee (0.1); typically far below it


def test_a_cascade_escalates_what_the_cheap_judge_is_unsure_of_and_abstains_the_rest() -> None:
    cheap_conf = [0.95] * 50 + [0.55] * 50
    cheap_ok = [True] * 50 + [i % 2 == 0 for i in range(50)]
    strong_conf = [0.9] * 100
    strong_ok = [True] * 50 + [i % 25 != 0 for i in range(50)]  # 96% right where it is asked
    cascade = fit_cascade([cheap_conf, strong_conf], [cheap_ok, strong_ok], alpha=0.15, delta=0.1)
    assert cascade.thresholds == (0.95, 0.9)
    assert apply_cascade(cascade, [0.95, 0.2]) == 0 and apply_cascade(cascade, [0.6, 0.9]) == 1
    assert apply_cascade(cascade, [0.6, 0.5]) is None  # no judge confident: abstained, never a guess

"""Selective evaluation with a guaranteed agreement level: the thresholds of a judge cascade,
fitted by fixed-sequence testing (Jung, Brahman and Choi, "Trust or Escalate", ICLR 2025,
arXiv 2407.18370), with no other judgeq import.

A judge gives each item a verdict and a confidence. Kept at a threshold ``t`` are the items whose
confidence is at least ``t``; their risk is the share of kept verdicts that disagree with people.
:func:`fit_threshold` tests, from the highest candidate threshold down, the hypothesis "the risk
at ``t`` exceeds ``alpha``" with the exact binomial tail of the calibration items kept at ``t``,
and stops at the first it cannot reject at level ``delta`` (thresholds keeping too few items for
any outcome to reject are not tested): the lowest threshold rejected so far is returned
(fixed-sequence testing controls the family-wise error at ``delta`` without a correction, the
hypotheses being tested in an order fixed by the confidences alone). So, over draws of an
exchangeable calibration set, the risk of the verdicts kept at the returned threshold is at most
``alpha`` with probability at least ``1 - delta``.

A cascade (:func:`fit_cascade`) asks its judges in order of cost: an item goes to the next judge
when the one before is not confident enough, and is abstained when no judge is. Each stage's
threshold is fitted on the calibration items that reach it, at level ``delta / stages`` (a
union bound), so with probability at least ``1 - delta`` every stage's kept verdicts have risk at
most ``alpha``, and so do all the kept verdicts together (a weighted mean of the stages').
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["Cascade", "apply_cascade", "fit_cascade", "fit_threshold", "risk_p_value"]


def risk_p_value(errors: int, n: int, alpha: float) -> float:
    """The p-value of "the risk exceeds ``alpha``" after ``errors`` disagreements in ``n`` kept
    items: the chance of so few errors or fewer if the risk were ``alpha`` (an exact binomial
    tail; 1.0 for no item)."""
    if n <= 0:
        return 1.0
    from scipy.stats import binom

    return float(binom.cdf(errors, n, alpha))


def fit_threshold(
    confidence: Sequence[float], correct: Sequence[bool], alpha: float, delta: float
) -> float | None:
    """The lowest confidence threshold whose kept items' risk is at most ``alpha`` with
    probability ``1 - delta`` (fixed-sequence testing, from the highest candidate down; the
    candidates are the calibration confidences); None when not even the highest passes."""
    if len(confidence) != len(correct):
        raise ValueError("one correctness flag per confidence")
    if not 0 < alpha < 1 or not 0 < delta < 1:
        raise ValueError("alpha and delta must be between 0 and 1")
    chosen = None
    for t in sorted(set(confidence), reverse=True):
        kept = [ok for c, ok in zip(confidence, correct, strict=True) if c >= t]
        if (1 - alpha) ** len(kept) > delta:
            continue  # too few kept to reject even with no error: no test (the sequence is the
            # confidences', fixed before any verdict is checked)
        if risk_p_value(sum(not ok for ok in kept), len(kept), alpha) > delta:
            break  # the first hypothesis not rejected ends the sequence
        chosen = t
    return chosen


@dataclass(frozen=True, slots=True)
class Cascade:
    """Each stage's threshold (None: the stage keeps nothing), in the cascade's order, and the
    level they were fitted at."""

    thresholds: tuple[float | None, ...]
    alpha: float
    delta: float


def fit_cascade(
    confidence: Sequence[Sequence[float]], correct: Sequence[Sequence[bool]], alpha: float, delta: float
) -> Cascade:
    """The thresholds of a cascade: ``confidence[s][i]`` and ``correct[s][i]`` are stage ``s``'s
    confidence and whether its verdict on calibration item ``i`` agrees with the label. Each
    stage is fitted on the items no earlier stage kept, at level ``delta / stages``."""
    stages = len(confidence)
    if stages == 0 or len(correct) != stages:
        raise ValueError("one confidence and one correctness row per stage")
    left = list(range(len(confidence[0])))
    thresholds: list[float | None] = []
    for s in range(stages):
        t = fit_threshold(
            [confidence[s][i] for i in left], [correct[s][i] for i in left], alpha, delta / stages
        )
        thresholds.append(t)
        if t is not None:
            left = [i for i in left if confidence[s][i] < t]
    return Cascade(tuple(thresholds), alpha, delta)


def apply_cascade(cascade: Cascade, confidence: Sequence[float]) -> int | None:
    """The stage that keeps an item of these per-stage confidences (None: abstained)."""
    for s, t in enumerate(cascade.thresholds):
        if t is not None and confidence[s] >= t:
            return s
    return None

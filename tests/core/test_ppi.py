"""PPI++ (judgeq.figures.ppi): unbiased with a biased judge, intervals that cover at their level,
narrower than the human-only interval when the judge agrees with people, never wider in effect
than it when the judge is noise (lam tuned towards 0), and clear errors on bad input."""

from __future__ import annotations

import random
from statistics import fmean

import pytest

from judgeq.figures.ppi import human_only, judge_only, ppi_mean


def population(rng: random.Random, size: int, *, agree: float, bias: float) -> list[tuple[int, int]]:
    """(person's pass/fail, judge's pass/fail): the judge agrees with people on ``agree`` of the
    jobs and passes ``bias`` of the rest regardless."""
    out = []
    for _ in range(size):
        y = 1 if rng.random() < 0.6 else 0
        f = y if rng.random() < agree else (1 if rng.random() < bias else 0)
        out.append((y, f))
    return out


@pytest.mark.parametrize(("agree", "bias"), [(0.9, 0.9), (0.7, 0.1), (0.0, 0.5)])
def test_the_interval_covers_the_people_s_mean_at_its_level(agree: float, bias: float) -> None:
    rng = random.Random(f"{agree}-{bias}")
    pop = population(rng, 20_000, agree=agree, bias=bias)
    truth = sum(y for y, _ in pop) / len(pop)
    covered = ppi_covered = narrower = 0
    runs, n, big_n = 500, 100, 1_000
    for _ in range(runs):
        sample = rng.sample(pop, n + big_n)
        labelled, rest = sample[:n], sample[n:]
        y = [a for a, _ in labelled]
        f = [b for _, b in labelled]
        est = ppi_mean(y, f, [b for _, b in rest])
        human = human_only(y)
        ppi_covered += est.lo <= truth <= est.hi
        covered += human.lo <= truth <= human.hi
        narrower += est.width < human.width
    assert ppi_covered / runs >= 0.93, ppi_covered / runs  # nominal 95%, 500 draws
    assert covered / runs >= 0.92
    if agree >= 0.7:  # a judge that agrees: a narrower interval nearly always
        assert narrower / runs >= 0.95
    # the judge alone is biased wherever it errs one way: its interval misses the truth
    judged = judge_only([b for _, b in pop])
    if agree == 0.9 and bias == 0.9:
        assert not judged.lo <= truth <= judged.hi


def test_lam_follows_how_much_the_judge_says() -> None:
    rng = random.Random(7)
    good = population(rng, 2_000, agree=0.95, bias=0.5)
    noise = population(rng, 2_000, agree=0.0, bias=0.5)
    for pop, lo, hi in ((good, 0.7, 1.0), (noise, 0.0, 0.2)):
        y = [a for a, _ in pop[:200]]
        f = [b for _, b in pop[:200]]
        est = ppi_mean(y, f, [b for _, b in pop[200:]])
        assert est.lam is not None and lo <= est.lam <= hi, est.lam


def test_fixed_lam_zero_is_the_human_only_mean_and_one_is_classical_ppi() -> None:
    y, f, f_u = [1, 0, 1, 1], [1, 0, 0, 1], [1, 1, 0, 1, 1, 1, 0, 1]
    assert ppi_mean(y, f, f_u, lam=0.0).value == pytest.approx(human_only(y).value)
    assert ppi_mean(y, f, f_u, lam=1.0).value == pytest.approx(6 / 8 + (3 - 2) / 4)


def test_a_constant_judge_gives_the_human_only_estimate() -> None:
    """A judge that says the same of every job: classical PPI (lam 1, nothing in the labels
    tells how it relates to people), which then is the people's mean and its interval."""
    est = ppi_mean([1, 0, 1], [1, 1, 1], [1, 1, 1, 1])
    human = human_only([1, 0, 1])
    assert est.lam == 1.0 and est.value == pytest.approx(2 / 3)
    assert (est.lo, est.hi) == pytest.approx((human.lo, human.hi))


def test_unanimous_labels_never_make_a_zero_width_interval() -> None:
    """20 labelled jobs the judge passed, all labelled pass, while the judge fails 5% of the
    others: classical PPI keeps the judge's spread, and the bounds keep the labels' part from
    being certain (as if one more label had been the other way)."""
    from judgeq.figures.ppi import Moments, ppi_moments

    judge_rest = Moments.of([1.0] * 930 + [0.0] * 50)
    est = ppi_moments([1.0] * 20, [1.0] * 20, judge_rest, bounds=(0.0, 1.0))
    assert est.lam == 1.0 and est.value == pytest.approx(930 / 980)
    assert est.width > 0.05
    alone = ppi_moments([1.0] * 20, [1.0] * 20, judge_rest, lam=0.0, bounds=(0.0, 1.0))
    assert alone.value == 1.0 and alone.lo < 0.95  # people alone: 20 of 20 is not certainty


@pytest.mark.parametrize(
    ("y", "f", "f_u", "level", "message"),
    [
        ([1, 0], [1], [1], 0.95, "2 labels but 1 judge figures"),
        ([1], [1], [1], 0.95, "two labelled jobs or more"),
        ([1, 0], [1, 0], [], 0.95, "one unlabelled job or more"),
        ([1, 0], [1, 0], [1], 1.5, "level must be between 0 and 1"),
    ],
)
def test_bad_input_is_named(y: list[int], f: list[int], f_u: list[int], level: float, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        ppi_mean(y, f, f_u, level)


def test_empty_samples_are_named() -> None:
    with pytest.raises(ValueError, match="no labelled jobs"):
        human_only([])
    with pytest.raises(ValueError, match="no judged jobs"):
        judge_only([])


def test_streamed_moments_give_the_same_estimate_as_the_values() -> None:
    from statistics import fmean, variance

    from judgeq.figures.ppi import Moments, ppi_moments

    rng = random.Random(3)
    xs = [rng.random() * 10 for _ in range(1000)]
    m = Moments.of(xs)
    assert m.n == 1000 and m.mean == pytest.approx(fmean(xs)) and m.var == pytest.approx(variance(xs))
    y, f = [rng.random() for _ in range(50)], [rng.random() for _ in range(50)]
    assert ppi_moments(y, f, m) == pytest.approx(ppi_mean(y, f, xs))  # (a dataclass of floats)
    assert Moments().var == 0.0 and Moments.of([2.0]).var == 0.0


def test_strata_keep_the_estimate_valid_when_the_doubted_jobs_are_all_labelled() -> None:
    """A judge that errs mostly where the run doubts it (its judges disagree there): every
    doubted job labelled plus a random draw of the others, as ``judgeq labels export`` asks.
    The stratified estimate covers the people's pass rate at its level; pooling those labels as
    one sample does not (the doubted jobs are over-represented in it)."""
    from judgeq.figures.ppi import Stratum, stratified

    rng = random.Random(11)
    jobs = []  # (doubted, person, judge)
    for _ in range(5_000):
        doubted = rng.random() < 0.1
        y = 1.0 if rng.random() < (0.2 if doubted else 0.7) else 0.0
        f = (1.0 if rng.random() < 0.9 else 0.0) if doubted else (y if rng.random() < 0.9 else 1 - y)
        jobs.append((doubted, y, f))
    truth = fmean(y for _, y, _ in jobs)
    covered = pooled_covered = 0
    runs = 400
    for _ in range(runs):
        rest = [i for i, (d, _, _) in enumerate(jobs) if not d]
        drawn = set(rng.sample(rest, 150))
        strata = (Stratum(), Stratum())
        pooled = Stratum()
        for i, (d, y, f) in enumerate(jobs):
            labelled = d or i in drawn
            strata[1 if d else 0].add(f, y if labelled else None)
            pooled.add(f, y if labelled else None)
        whole, parts = stratified(strata)
        assert parts[1].width == 0  # every doubted job labelled: known exactly
        covered += whole.lo <= truth <= whole.hi
        naive, _ = stratified([pooled])
        pooled_covered += naive.lo <= truth <= naive.hi
    assert covered / runs >= 0.93, covered / runs
    assert pooled_covered / runs < 0.5, pooled_covered / runs


def test_a_stratum_with_unlabelled_jobs_and_fewer_than_two_labels_cannot_be_estimated() -> None:
    from judgeq.figures.ppi import Stratum, stratified

    rest, doubted = Stratum(), Stratum()
    for i in range(20):
        rest.add(1.0, 1.0 if i < 5 else None)
    doubted.add(0.0, 1.0)
    doubted.add(1.0, None)
    with pytest.raises(ValueError, match="two labelled jobs"):
        stratified([rest, doubted])
    with pytest.raises(ValueError, match="no jobs"):
        stratified([Stratum()])

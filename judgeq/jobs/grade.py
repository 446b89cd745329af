"""How a job's judge verdicts become its grade: the part of the job-kind protocol every kind
shares, and the rules written once that its kinds use.

A job is graded in **units** (:class:`Unit`): one for most jobs, the two orders of a pair
judged in both, each assistant turn of a conversation graded turn by turn, none for a
conversation a hard check settles. Each judge of the run makes one call per unit, so a job makes
``judges x units`` calls (:meth:`JobBase.units <judgeq.jobs.base.JobBase.units>`, the one
statement of the calls-per-job rule). The verdicts of those calls come back as :class:`Graded`
and the kind combines them (:meth:`JobBase.grade <judgeq.jobs.base.JobBase.grade>`) under the
run's :class:`Scoring`:

* :func:`scored`: one judge's score, or a council's mean (per dimension likewise; pass-fail:
  the share of judges that said pass, passed when more than half did);
* :func:`council`: each judge's own score kept, and a spread above the run's ``disagreement``
  threshold flagged ``judges_disagree`` (the one statement of that rule, for every kind);
* a **jury** (:class:`Jury`, ``--jury``): a council with stated rules. Every member of the
  panel counts, those that did not answer too (a failed call or a verdict that does not parse
  keeps the member in the panel, absent: an odd panel with one failure never becomes an even
  one deciding by order). A category (pass/fail, a pair's winner) is the one more than half of
  the whole panel gave (:func:`majority`); with none, a pair is a tie or a null
  (``no_majority``), as the run chose, and pass/fail a null. A score is the mean or the median
  of the members that answered, when more than half the panel did; else a null.
"""

from __future__ import annotations

import math
import statistics
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from judgeq.grading.score import Score, score_verdict
from judgeq.grading.verdict import ParsedVerdict
from judgeq.rubric.model import RetrievalConfig, Rubric

__all__ = ["NOTES_LIMIT", "Graded", "Jury", "Scoring", "Unit", "council", "majority", "notes_of", "scored"]

NOTES_LIMIT = 4000
"""Characters of a judge's reasoning kept in a result's ``notes``."""


@dataclass(frozen=True, slots=True)
class Unit:
    """What one judge call of a job grades: the whole job, a pair in one order (``swapped``:
    output B shown first) or one turn of a conversation (the index of its assistant message)."""

    swapped: bool = False
    turn: int | None = None


@dataclass(frozen=True, slots=True)
class Graded:
    """A usable verdict of one call: its unit, which judge of the run gave it (0: the first
    ``--judge``) and that judge's model."""

    unit: Unit
    judge: int
    model: str
    verdict: ParsedVerdict


@dataclass(frozen=True, slots=True)
class Jury:
    """A jury's stated rules (see the module docstring)."""

    scores: Literal["mean", "median"] = "median"
    """How the answering members' scores combine."""
    no_majority: Literal["tie", "null"] = "null"
    """A pair no verdict has a majority of the panel for: a tie, or a null (``no_majority``)."""


def majority(votes: Sequence[str], panel: int) -> str | None:
    """The vote more than half of the ``panel`` gave (members that did not vote count in the
    panel); None when none did. Never decided by order."""
    counted = Counter(votes).most_common(1)
    return counted[0][0] if counted and counted[0][1] * 2 > panel else None


@dataclass(frozen=True, slots=True)
class Scoring:
    """What is the same for every job of a run when its verdicts are combined."""

    rubric: Rubric
    judges: int = 1
    """How many judges grade each unit (more than one: a council)."""
    disagreement: float = 0.0
    safety_gate: bool | None = None
    safety_cap: float = 0.0
    retrieval: RetrievalConfig | None = None
    jury: Jury | None = None
    """The council is a jury (its stated rules); None: a council's mean."""

    def score(self, verdict: ParsedVerdict, candidate: str | None) -> Score:
        """One verdict scored on the rubric; ``candidate`` is the text the safety gate checks."""
        return score_verdict(
            self.rubric,
            verdict,
            candidate=candidate,
            safety_gate=self.safety_gate,
            safety_cap=self.safety_cap,
        )

    def passes(self, overall: float, categories: Sequence[str]) -> bool:
        """A scored rubric's verdict on an overall score: at its threshold and not unsafe."""
        return overall >= (self.rubric.threshold or 0.0) and not categories


def notes_of(verdict: ParsedVerdict) -> str | None:
    """A verdict's reasoning as a result keeps it."""
    return verdict.notes[:NOTES_LIMIT] if verdict.notes else None


def council(scoring: Scoring, per_judge: dict[str, float], flags: list[str]) -> dict[str, object]:
    """A council's fields: each judge's score (``judge_scores``, by model) and, when they spread
    more than the run's threshold, ``judges_disagree`` added to ``flags``. A single judge, or a
    council whose judges share one model name (nothing to compare by name): none."""
    if scoring.judges <= 1 or len(per_judge) <= 1:
        return {}
    if max(per_judge.values()) - min(per_judge.values()) > scoring.disagreement:
        flags.append("judges_disagree")
    return {"judge_scores": per_judge}


def scored(scoring: Scoring, graded: Sequence[Graded], candidate: str | None) -> dict[str, object]:
    """The grade of a job judged once per judge: the judge's score, or the council's mean."""
    rubric = scoring.rubric
    if scoring.jury is not None and len(graded) * 2 <= scoring.judges:
        return {"null_reason": "no_majority"}  # no majority of the panel answered
    scores: list[Score] = [scoring.score(g.verdict, candidate) for g in graded]
    first = scores[0]
    flags = list(first.flags)
    fields: dict[str, object] = {"notes": notes_of(graded[0].verdict)}
    if len(scores) == 1:
        overall, passed, dims = first.overall, first.passed, first.scores
        categories = first.safety_categories
        fields["holistic"] = graded[0].verdict.holistic
        if rubric.is_pass_fail:  # the judge's own verdict, whatever the gate decides
            fields["holistic"] = 1.0 if graded[0].verdict.verdict == "pass" else 0.0
    else:
        combine = _combiner(scoring.jury)
        overall = round(combine([s.overall for s in scores]), 2)
        names = list(first.scores)
        dims = {n: round(combine([s.scores[n] for s in scores]), 2) for n in names}
        categories = sorted({c for s in scores for c in s.safety_categories})
        for s in scores[1:]:
            flags += [f for f in s.flags if f not in flags]
        if scoring.jury is not None and rubric.is_pass_fail:  # the panel's strict majority
            vote = majority(["pass" if s.overall > 0.5 else "fail" for s in scores], scoring.judges)
            if vote is None:
                return {"null_reason": "no_majority"}
            passed = vote == "pass"
        else:
            passed = overall > 0.5 if rubric.is_pass_fail else scoring.passes(overall, categories)
        per_judge = {g.model: s.overall for g, s in zip(graded, scores, strict=True)}
        fields.update(council(scoring, per_judge, flags))
    fields.update(scores=dims, overall=overall, passed=passed, flags=flags, safety_categories=categories)
    return fields


def _combiner(jury: Jury | None) -> Callable[[Sequence[float]], float]:
    """How a council's scores combine: a jury's median or mean, else the mean."""
    if jury is not None and jury.scores == "median":
        return lambda xs: float(statistics.median(xs))
    return lambda xs: math.fsum(xs) / len(xs)

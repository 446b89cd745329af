"""The pair kind: two outputs for one input, compared (``input``, ``output_a``, ``output_b``;
optional ``model_a``, ``model_b``, ``context``, ``expected_answer``), judged A, B or tie."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from pydantic import model_validator

from judgeq.grading.verdict import ParsedVerdict
from judgeq.jobs.base import JobBase
from judgeq.jobs.grade import Graded, Scoring, Unit, council, notes_of
from judgeq.jobs.kind import JobKind
from judgeq.rubric.model import RetrievalConfig, Rubric

__all__ = ["PAIR", "PAIR_SCORE", "SWAP", "PairJob"]

PAIR_SCORE = {"A": 1.0, "tie": 0.5, "B": 0.0}
"""Output A's score for a positional verdict."""
SWAP = {"A": "B", "B": "A", "tie": "tie"}


class PairJob(JobBase):
    """Compare two outputs for one input (judged A, B or tie)."""

    kind: Literal["pair"] = "pair"
    input: str
    output_a: str
    output_b: str
    model_a: str | None = None
    model_b: str | None = None
    context: str | None = None
    expected_answer: str | None = None

    @model_validator(mode="after")
    def _no_model(self) -> PairJob:
        if self.model is not None:
            raise ValueError("model: a pair job names its systems with model_a and model_b")
        return self

    def render_fields(self, *, swapped: bool = False) -> dict[str, Any]:
        """The fields as shown to the judge; ``swapped``: output_b is shown first (as A)."""
        first, second = (self.output_b, self.output_a) if swapped else (self.output_a, self.output_b)
        return {
            "input": self.input,
            "output_a": first,
            "output_b": second,
            "context": self.context,
            "expected_answer": self.expected_answer,
        }

    def units(self, rubric: Rubric, *, swap: bool) -> tuple[Unit, ...]:
        """A/B, then B/A unless the run does not swap."""
        return (Unit(), Unit(swapped=True)) if swap else (Unit(),)

    def request_fields(self, unit: Unit, rubric: Rubric) -> dict[str, Any]:
        return self.render_fields(swapped=unit.swapped)

    def material(self) -> tuple[str, str | None]:
        return self.input, self.expected_answer

    def result_fields(self, rubric: Rubric | None, retrieval: RetrievalConfig) -> dict[str, object]:
        """Output A's model as ``model``, B's as ``model_b``, and the outputs' lengths."""
        return {
            "model": self.model_a,
            "model_b": self.model_b,
            "len_a": len(self.output_a),
            "len_b": len(self.output_b),
        }

    def grade(
        self, scoring: Scoring, graded: Sequence[Graded], fields: dict[str, object]
    ) -> dict[str, object]:
        """Per judge: the verdict of both orders when they agree (one that flips with the order
        is a tie, flagged ``position_inconsistent``); ``overall`` is the mean of the judges'
        scores for output A (1 A wins, 0.5 tie, 0 B wins), ``winner`` the majority."""
        flags: list[str] = []
        votes: list[str] = []
        per_judge: dict[str, float] = {}
        dims: dict[str, list[float]] = {}
        by_judge: dict[int, list[tuple[bool, ParsedVerdict]]] = {}
        models: dict[int, str] = {}
        for g in graded:
            by_judge.setdefault(g.judge, []).append((g.unit.swapped, g.verdict))
            models[g.judge] = g.model
            votes.append(str(g.verdict.verdict))
        for j, calls in by_judge.items():
            seen = [SWAP[str(pv.verdict)] if swapped else str(pv.verdict) for swapped, pv in calls]
            verdict = seen[0] if len(set(seen)) == 1 else "tie"
            if len(set(seen)) > 1 and "position_inconsistent" not in flags:
                flags.append("position_inconsistent")
            per_judge[models[j]] = PAIR_SCORE[verdict]
            for d in scoring.rubric.dimensions:
                said = [pv.extra.get("dimension_verdicts", {}).get(d.name) for _, pv in calls]
                if any(v is None for v in said):
                    continue
                mapped = [
                    SWAP[str(v)] if swapped else str(v) for (swapped, _), v in zip(calls, said, strict=True)
                ]
                dims.setdefault(d.name, []).append(PAIR_SCORE[mapped[0] if len(set(mapped)) == 1 else "tie"])
        overall = round(math.fsum(per_judge.values()) / len(per_judge), 4)
        winner = "a" if overall > 0.5 else "b" if overall < 0.5 else "tie"
        return {
            **council(scoring, per_judge, flags),
            "scores": {name: round(math.fsum(v) / len(v), 4) for name, v in dims.items()},
            "overall": overall,
            "passed": None,
            "flags": flags,
            "notes": notes_of(graded[0].verdict),
            "winner": winner,
            "votes": votes,
        }


def _texts(obj: Mapping[str, Any]) -> dict[str, str]:
    output = f"A: {obj.get('output_a', '')}\n\nB: {obj.get('output_b', '')}"
    return {"input": str(obj.get("input", "")), "output": output}


PAIR = JobKind(
    name="pair",
    model=PairJob,
    marks=("output_a",),
    rubric="pairwise",
    rubric_is="its scale is pairwise",
    rubric_with="with scale pairwise",
    sample={
        "id": "sample",
        "input": "What is the capital of France?",
        "output_a": "Paris.",
        "output_b": "The capital of France is Lyon.",
    },
    texts=_texts,
)

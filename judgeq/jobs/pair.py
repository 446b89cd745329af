"""The pair kind: two outputs for one input, compared (``input``, ``output_a``, ``output_b``;
optional ``model_a``, ``model_b``, ``context``, ``expected_answer``), judged A, B or tie."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import model_validator

from judgeq.jobs.base import JobBase
from judgeq.jobs.kind import JobKind

__all__ = ["PAIR", "PairJob"]


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

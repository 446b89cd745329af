"""The response kind: one model output graded against a rubric (``input``, ``output``;
optional ``context``, ``expected_answer``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from judgeq.jobs.base import JobBase
from judgeq.jobs.grade import Unit
from judgeq.jobs.kind import JobKind

__all__ = ["RESPONSE", "ResponseJob"]


class ResponseJob(JobBase):
    """Grade one model response."""

    kind: Literal["response"] = "response"
    input: str
    output: str
    context: str | None = None
    expected_answer: str | None = None

    def render_fields(self) -> dict[str, Any]:
        return {
            "input": self.input,
            "output": self.output,
            "context": self.context,
            "expected_answer": self.expected_answer,
        }

    def material(self) -> tuple[str, str | None]:
        return self.input, self.expected_answer

    def candidate(self, unit: Unit) -> str | None:
        return self.output


def _texts(obj: Mapping[str, Any]) -> dict[str, str]:
    return {"input": str(obj.get("input", "")), "output": str(obj.get("output", ""))}


RESPONSE = JobKind(
    name="response",
    model=ResponseJob,
    marks=(),
    rubric="quality",
    rubric_is="it has no 'retrieval' section",
    rubric_with="without a 'retrieval' section or job: conversation, not pairwise",
    sample={
        "id": "sample",
        "input": "What is the capital of France?",
        "output": "Paris is the capital of France.",
    },
    texts=_texts,
)

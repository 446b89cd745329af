"""Grading jobs: one line of a batch.

Four kinds:

* ``response`` — ``id``, ``input``, ``output``; optional ``context``, ``expected_answer``,
  ``model`` (the system that produced the output) and ``metadata``;
* ``question`` — a retrieval result: ``id``, ``question``, ``expected_answer``, ``retrieved``
  (list of ``doc_id``/``text``), and ``needle_doc_id`` or ``relevant_doc_ids``; optional
  ``model``, ``metadata`` and ``latency_ms`` (the retrieval latency).

* ``pair`` — two outputs for one input, to compare: ``id``, ``input``, ``output_a``,
  ``output_b``; optional ``model_a``, ``model_b`` (the systems that produced them),
  ``context``, ``expected_answer`` and ``metadata``.

* ``conversation`` — an agent's ``messages`` (OpenAI chat format, or Anthropic's blocks),
  optional ``tools``, ``reference`` and ``checks``: see :mod:`judgeq.jobs.conversation`.

Any job may carry a ``label`` (a person's grade, for the report's agreement section): a
number on the rubric's scale, ``pass``/``fail``, or for pairs ``a``/``b``/``tie``.

The kind is given as ``kind`` or inferred: ``question`` or ``retrieved`` present means a
question job, ``messages`` a conversation, ``output_a`` a pair job.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from judgeq.jobs.base import LABEL_WORDS, MAX_ID_CHARS, JobBase, JobId
from judgeq.jobs.conversation import ConversationJob
from judgeq.rubric.model import Chunk

__all__ = [
    "JOB_MODELS",
    "LABEL_WORDS",
    "MAX_ID_CHARS",
    "MAX_RETRIEVED",
    "ConversationJob",
    "Job",
    "JobId",
    "PairJob",
    "QuestionJob",
    "ResponseJob",
    "infer_kind",
]

MAX_RETRIEVED = 1000


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


class QuestionJob(JobBase):
    """Grade the chunks retrieved for one question."""

    kind: Literal["question"] = "question"
    question: str
    expected_answer: str
    retrieved: list[Chunk] = Field(max_length=MAX_RETRIEVED)
    needle_doc_id: str | None = None
    relevant_doc_ids: list[str] | None = None
    latency_ms: float | None = Field(default=None, ge=0)

    @field_validator("needle_doc_id", mode="before")
    @classmethod
    def _needle(cls, v: Any) -> Any:
        return str(v) if isinstance(v, int) and not isinstance(v, bool) else v

    @field_validator("relevant_doc_ids", mode="before")
    @classmethod
    def _relevant(cls, v: Any) -> Any:
        if isinstance(v, list):
            return [str(x) if isinstance(x, int) and not isinstance(x, bool) else x for x in v]
        return v

    @model_validator(mode="after")
    def _has_target(self) -> QuestionJob:
        if self.needle_doc_id is None and not self.relevant_doc_ids:
            raise ValueError("needle_doc_id: required (or a non-empty relevant_doc_ids)")
        return self

    @property
    def relevant(self) -> frozenset[str]:
        ids = set(self.relevant_doc_ids or ())
        if self.needle_doc_id is not None:
            ids.add(self.needle_doc_id)
        return frozenset(ids)

    def render_fields(self) -> dict[str, Any]:
        return {
            "question": self.question,
            "expected_answer": self.expected_answer,
            "retrieved": self.retrieved,
        }


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


Job = ResponseJob | QuestionJob | PairJob | ConversationJob


def infer_kind(obj: dict[str, Any]) -> str:
    """The job kind of a decoded line: ``kind`` if given, else from the fields."""
    kind = obj.get("kind")
    if isinstance(kind, str):
        return kind
    if "question" in obj or "retrieved" in obj:
        return "question"
    if "messages" in obj:
        return "conversation"
    return "pair" if "output_a" in obj else "response"


JOB_MODELS: dict[str, type[ResponseJob] | type[QuestionJob] | type[PairJob] | type[ConversationJob]] = {
    "response": ResponseJob,
    "question": QuestionJob,
    "pair": PairJob,
    "conversation": ConversationJob,
}

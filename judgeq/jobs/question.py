"""The question kind: the chunks retrieved for one question, graded for retrieval (``question``,
``expected_answer``, ``retrieved``, ``needle_doc_id`` or ``relevant_doc_ids``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from judgeq.grading.retrieval import first_relevant_rank, hits_at, llm_grade, total_score
from judgeq.jobs.base import JobBase
from judgeq.jobs.grade import Graded, Scoring, scored
from judgeq.jobs.kind import JobKind
from judgeq.rubric.model import Chunk, RetrievalConfig, Rubric

__all__ = ["MAX_RETRIEVED", "QUESTION", "QuestionJob"]

MAX_RETRIEVED = 1000


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

    def material(self) -> tuple[str, str | None]:
        return self.question, self.expected_answer

    def result_fields(self, rubric: Rubric | None, retrieval: RetrievalConfig) -> dict[str, object]:
        """Its model and its retrieval fields (rank, hits: they need no judge)."""
        doc_ids = [c.doc_id for c in self.retrieved]
        rank = first_relevant_rank(doc_ids, self.relevant)
        hits = hits_at(rank, sorted({*retrieval.hit_k, 1, 5}))
        return {
            "model": self.model,
            "question_id": self.id,
            "question": self.question,
            "expected_answer": self.expected_answer,
            "retrieved_doc_ids": doc_ids[:100],
            "needle_found": rank is not None,
            "rank": rank,
            "hit_at_1": hits["1"],
            "hit_at_5": hits["5"],
            "hit_at_k": {str(k): hits[str(k)] for k in retrieval.hit_k},
            "latency_ms": self.latency_ms,
        }

    def grade(
        self, scoring: Scoring, graded: Sequence[Graded], fields: dict[str, object]
    ) -> dict[str, object]:
        """The judge's score, and the question's grade on 1-10 weighted by the rank it was found at."""
        out = scored(scoring, graded, None)
        grade = llm_grade(out["overall"], scoring.rubric)  # type: ignore[arg-type]
        extra = graded[0].verdict.extra
        out.update(
            llm_grade=grade,
            total_score=total_score(grade, fields["rank"], scoring.retrieval or RetrievalConfig()),  # type: ignore[arg-type]
            llm_reasoning=out["notes"],
            key_facts_present=extra.get("key_facts_present"),
            key_facts_missing=extra.get("key_facts_missing"),
        )
        return out


def _texts(obj: Mapping[str, Any]) -> dict[str, str]:
    chunks = obj.get("retrieved") or []
    output = "\n".join(f"[{c.get('doc_id')}] {c.get('text', '')}" for c in chunks if isinstance(c, dict))
    return {"input": str(obj.get("question", "")), "output": output}


QUESTION = JobKind(
    name="question",
    model=QuestionJob,
    marks=("question", "retrieved"),
    rubric="retrieval-relevance",
    rubric_is="it has a 'retrieval' section",
    rubric_with="with a 'retrieval' section",
    sample={
        "id": "sample",
        "question": "What is the capital of France?",
        "expected_answer": "Paris",
        "retrieved": [
            {"doc_id": "d1", "text": "Paris is the capital and largest city of France."},
            {"doc_id": "d2", "text": "Lyon is a city in France."},
        ],
        "needle_doc_id": "d1",
    },
    texts=_texts,
    null_fields=lambda ident: {"question_id": ident},
)

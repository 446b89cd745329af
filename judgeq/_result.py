"""The stored result of one job (one line of ``verdicts.jsonl``)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict


class Result(BaseModel):
    """What a worker stores for one (run, job).

    ``status`` is ``graded`` or ``null``; a null result has ``null_reason`` and no scores, and
    is counted (never turned into a 0).  ``grading_latency_ms`` covers every judge attempt.
    Question jobs carry the retrieval fields (``rank`` … ``total_score``).
    """

    model_config = ConfigDict(extra="forbid")

    job_id: str
    index: int
    kind: Literal["response", "question"] = "response"
    status: Literal["graded", "null"]
    null_reason: str | None = None
    scores: dict[str, float] = {}
    overall: float | None = None
    passed: bool | None = None
    flags: list[str] = []
    safety_categories: list[str] = []
    notes: str | None = None
    raw: str | None = None
    grading_latency_ms: float = 0.0
    attempts: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_input_tokens: int = 0
    cache_creation_input_tokens: int = 0
    cached: bool = False
    """The reply came from judgeq's reply cache: its tokens were spent by an earlier run."""
    rubric_name: str
    rubric_version: str
    judge_model: str
    model: str | None = None
    # question jobs
    question_id: str | None = None
    question: str | None = None
    expected_answer: str | None = None
    retrieved_doc_ids: list[str] | None = None
    needle_found: bool | None = None
    rank: int | None = None
    hit_at_1: bool | None = None
    hit_at_5: bool | None = None
    hit_at_k: dict[str, bool] | None = None
    llm_grade: int | None = None
    llm_reasoning: str | None = None
    total_score: float | None = None
    latency_ms: float | None = None
    key_facts_present: list[str] | None = None
    key_facts_missing: list[str] | None = None

    def to_line(self) -> dict[str, Any]:
        """The ``verdicts.jsonl`` form: question-only fields dropped for response jobs."""
        data = self.model_dump(mode="json")
        if self.kind == "response":
            for key in _QUESTION_FIELDS:
                data.pop(key, None)
        return data


_QUESTION_FIELDS = (
    "question_id",
    "question",
    "expected_answer",
    "retrieved_doc_ids",
    "needle_found",
    "rank",
    "hit_at_1",
    "hit_at_5",
    "hit_at_k",
    "llm_grade",
    "llm_reasoning",
    "total_score",
    "latency_ms",
    "key_facts_present",
    "key_facts_missing",
)

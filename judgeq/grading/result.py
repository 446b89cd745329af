"""The stored result of one job (one line of ``verdicts.jsonl``)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, PrivateAttr

__all__ = ["Result"]


class Result(BaseModel):
    """What a worker stores for one (run, job).

    ``status`` is ``graded`` or ``null``; a null result has ``null_reason`` and no scores, and
    is counted (never turned into a 0).  ``grading_latency_ms`` covers every judge attempt.
    Question jobs carry the retrieval fields (``rank`` … ``total_score``).
    """

    model_config = ConfigDict(extra="forbid")

    job_id: str
    index: int
    kind: Literal["response", "question", "pair", "conversation"] = "response"
    status: Literal["graded", "null"]
    null_reason: str | None = None
    scores: dict[str, float] = {}
    overall: float | None = None
    passed: bool | None = None
    flags: list[str] = []
    safety_categories: list[str] = []
    notes: str | None = None
    holistic: float | None = None
    """The judge's holistic score as parsed (numeric rubrics), beside the dimension ``scores``:
    with them, ``judgeq rescore`` recomputes the overall under new weights or thresholds. For a
    pass/fail rubric graded by one judge, the judge's own verdict (1.0 pass, 0.0 fail) before
    the safety gate: ``passed`` is False for an output the gate caught whatever the judge said,
    and a rescore with the gate lifted restores this verdict."""
    raw: str | None = None
    grading_latency_ms: float = 0.0
    attempts: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_input_tokens: int = 0
    cache_creation_input_tokens: int = 0
    cached: bool = False
    """The reply came from judgeq's reply cache: its tokens were spent by an earlier run."""
    batch: bool = False
    """The judge answered through the Message Batches lane (its cost is discounted)."""
    rubric_name: str
    rubric_version: str
    judge_model: str
    model: str | None = None
    """The system that produced the output (a pair job: output A's, ``model_b`` output B's)."""
    label: float | str | None = None
    """The job's label (a person's grade), for the agreement section."""
    input_key: str | None = None
    """A short hash of the job's input and expected answer: results on the same input pair up."""
    judge_scores: dict[str, float] | None = None
    """A council's overall score per judge model (pairs: output A's score per judge)."""
    judge_usage: dict[str, list[int]] | None = None
    """A council's tokens per judge model: input, output, cache read, cache write."""
    _served: list[str] = PrivateAttr(default=[])  # (copied per instance; see below)
    """Provenance of the job's judge calls that answered (not those from the reply cache), one
    ``provider endpoint model response_format`` each: the endpoint's host, the model as the
    server named it in its answer, how the verdict was asked for (``-``: not known). Not stored
    with the result (older readers refuse unknown fields, and it would repeat on every result):
    storing the result counts it in the run's live counters (``served:...``), once. A default,
    not ``default_factory=list``: pydantic 2.13 inspects a private attribute's factory's
    signature on every instance (pydantic#13376), 0.1 ms a result, and every result is built at
    least three times (worker, reducer, report files): 2.8 s of a 3,000-job run's 15.7."""
    _failing_s: float = PrivateAttr(default=0.0)
    """A null from a failed judge call: how long the judge kept failing it (from the end of its
    first failed attempt), to tell an outage from the job's own failure. Not stored."""
    _own_refusal: bool = PrivateAttr(default=False)
    """A ``rate_limited`` null the budget judged refused for itself (others were served). Not
    stored."""
    # pair jobs
    model_b: str | None = None
    winner: Literal["a", "b", "tie"] | None = None
    votes: list[str] | None = None
    """The positional verdicts (A, B, tie) of the job's calls, in order: per judge, the A/B
    order then (when swapped) the B/A order."""
    len_a: int | None = None
    len_b: int | None = None
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

    # conversation jobs
    tools_called: list[str] | None = None
    """The tools the agent called, in order."""
    checks: dict[str, bool] | None = None
    """The trajectory checks' outcomes (:mod:`judgeq.transcripts.checks`), by check."""
    check_failures: dict[str, str] | None = None
    """Why each failed check failed."""
    settled_by: Literal["checks"] | None = None
    """``checks``: a hard check failed and settled the job (failed) without a judge call: it
    has no judge's score (``overall`` is None) and counts as failed in the pass rates."""
    turn_scores: list[float] | None = None
    """A conversation graded turn by turn: each assistant turn's score, in order (its
    ``overall`` their aggregate)."""
    worst_turn: int | None = None
    """The number of the message of its lowest-scored turn (its ``notes`` are that turn's)."""
    cuts: list[list[int]] | None = None
    """Tool results cut for the judge: [message index, characters, characters kept] each."""

    def to_line(self) -> dict[str, Any]:
        """The ``verdicts.jsonl`` form: question-only fields dropped for response jobs."""
        data = self.model_dump(mode="json")
        if self.kind != "question":
            for key in _QUESTION_FIELDS:
                data.pop(key, None)
        if self.kind != "pair":
            for key in _PAIR_FIELDS:
                data.pop(key, None)
        for key in ("label", "judge_scores", "judge_usage", "holistic", *_CONVERSATION_FIELDS):
            if data.get(key) is None:
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
_CONVERSATION_FIELDS = (
    "tools_called",
    "checks",
    "check_failures",
    "settled_by",
    "turn_scores",
    "worst_turn",
    "cuts",
)
_PAIR_FIELDS = ("model_b", "winner", "votes", "len_a", "len_b")

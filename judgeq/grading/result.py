"""The stored result of one job (one line of ``verdicts.jsonl``)."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, PrivateAttr

from judgeq.grading.cascade import CascadeRecord

__all__ = ["Result"]


class Result(BaseModel):
    """What a worker stores for one (run, job).

    ``status`` is ``graded`` or ``null``; a null result has ``null_reason`` and no scores, and
    is counted (never turned into a 0).  ``grading_latency_ms`` covers every judge attempt.
    A kind whose results carry more (a pair's winner, a question's retrieval fields, a
    conversation's checks) subclasses it in its own module (:attr:`JobKind.result`).
    """

    model_config = ConfigDict(extra="forbid")

    job_id: str
    index: int
    kind: Literal["response"] = "response"
    """The kind of its job: each kind's results are their own class (this one, for a response,
    holds what every result has), registered with the kind (:mod:`judgeq.jobs.kinds`)."""
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
    judges_absent: dict[str, str] | None = None
    """A jury's members that gave this job no verdict, by model, and why (``parse_error``,
    ``refusal``, ``invalid_request``): they stay in the panel's count."""
    cascade: CascadeRecord | None = None
    """A cascade run's job: the stage that kept it (None: abstained) and what each stage asked
    said, with its confidence and threshold (:mod:`judgeq.grading.cascade`)."""
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
    _OMIT_NONE: ClassVar[tuple[str, ...]] = (
        "label",
        "judge_scores",
        "judge_usage",
        "holistic",
        "judges_absent",
        "cascade",
    )
    """Fields a stored line leaves out while they are None."""

    def to_line(self) -> dict[str, Any]:
        """The ``verdicts.jsonl`` form: every field, those of :attr:`_OMIT_NONE` only when set."""
        data = self.model_dump(mode="json")
        for key in self._OMIT_NONE:
            if data.get(key) is None:
                data.pop(key, None)
        return data

    @property
    def settled(self) -> bool:
        """A rule of the job's kind settled it (failed) without a judge call: it has no judge's
        score and counts as failed."""
        return False

    @property
    def rescorable(self) -> bool:
        """``judgeq rescore`` can score it again from what it keeps."""
        return True

    def units(self, judges: int) -> int:
        """The judge calls each of ``judges`` judges made for it (a pair judged in both orders:
        two; a conversation graded turn by turn: one per turn)."""
        return 1

    def verdict(self) -> str | None:
        """The judge's verdict as a category: pass or fail (a pair's: its winner, a, b or tie);
        None when not graded or the rubric's scale has none. What agreement with categorical
        labels compares (and report.html's table shows)."""
        if self.status != "graded" or self.passed is None:
            return None
        return "pass" if self.passed else "fail"

    def reason(self) -> str | None:
        """Why it was graded so, as report.html's table shows it: the judge's notes, or what a
        null's judge said."""
        return self.notes or (self.raw if self.status == "null" else None)

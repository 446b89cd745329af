"""What every job has: an id, the system that produced it, metadata and a person's label; and
the job-kind protocol, the methods through which the rest of judgeq grades a job of any kind
without naming it (each kind's module overrides what differs for it)."""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, StringConstraints, field_validator

from judgeq.jobs.grade import Graded, Scoring, Unit, scored
from judgeq.rubric.model import RetrievalConfig, Rubric

__all__ = ["LABEL_WORDS", "MAX_ID_CHARS", "JobBase", "JobId", "label_problem", "normal_label"]

MAX_ID_CHARS = 256
JobId = Annotated[str, StringConstraints(min_length=1, max_length=MAX_ID_CHARS)]


LABEL_WORDS = ("pass", "fail", "a", "b", "tie")


def normal_label(v: Any) -> float | str | None:
    """A person's label as judgeq keeps it: a finite number, or one of :data:`LABEL_WORDS`
    (``True``/``False``: pass/fail; words in any case); ValueError saying what it is not."""
    if v is None:
        return v
    if isinstance(v, bool):
        return "pass" if v else "fail"
    if isinstance(v, (int, float)):
        try:
            number = float(v)
        except OverflowError:  # an integer of hundreds of digits
            raise ValueError("must be a finite number") from None
        if not math.isfinite(number):
            raise ValueError("must be a finite number")
        return number
    if isinstance(v, str):
        word = v.strip().lower()
        if word in LABEL_WORDS:
            return word
        try:
            number = float(word)
        except ValueError:
            raise ValueError(f"must be a number, pass, fail, a, b or tie; got {v!r}") from None
        if not math.isfinite(number):
            raise ValueError("must be a finite number")
        return number
    raise ValueError(f"must be a number, pass, fail, a, b or tie; got {type(v).__name__}")


def label_problem(rubric: Rubric, label: float | str) -> str | None:
    """What is wrong with a (normal) ``label`` for ``rubric``, None when it fits: a number on
    its scale (numeric rubrics), ``pass``/``fail`` (pass-fail and numeric rubrics: compared with
    ``passed``), or ``a``/``b``/``tie`` (pairwise rubrics)."""
    if rubric.is_pairwise:
        return (
            None if label in ("a", "b", "tie") else f"a pairwise rubric's label is a, b or tie; got {label!r}"
        )
    if label in ("a", "b", "tie"):
        return f"{label!r} is a pair label; rubric {rubric.name!r} takes a score or pass/fail"
    if isinstance(label, float):
        lo, hi = rubric.scale_range
        if rubric.is_pass_fail:
            return f"rubric {rubric.name!r} is pass-fail: the label is pass or fail; got {label:g}"
        if not lo <= label <= hi:
            return f"{label:g} is outside the rubric's scale {lo}-{hi}"
    return None


class JobBase(BaseModel):
    """The fields every kind of job has."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=False)

    id: JobId
    model: str | None = None
    metadata: dict[str, Any] | None = None
    label: float | str | None = None
    """A person's grade: a number on the rubric's scale, ``pass``/``fail``, or ``a``/``b``/``tie``."""

    def systems(self) -> tuple[str, ...]:
        """The systems whose outputs it grades (its ``model``; a pair's two)."""
        return (self.model,) if self.model else ()

    @field_validator("label", mode="before")
    @classmethod
    def _label(cls, v: Any) -> Any:
        return normal_label(v)

    # -- the job-kind protocol -----------------------------------------------------------------

    def render_fields(self) -> dict[str, Any]:
        """The fields of the judge's request for the whole job (see
        :func:`judgeq.grading.request.render_user`)."""
        raise NotImplementedError

    def units(self, rubric: Rubric, *, swap: bool) -> tuple[Unit, ...]:
        """What each judge grades of this job, one call each (see :mod:`judgeq.jobs.grade`):
        the whole job once, unless its kind says otherwise."""
        return (Unit(),)

    def request_fields(self, unit: Unit, rubric: Rubric) -> dict[str, Any]:
        """The fields of the judge's request for one unit."""
        return self.render_fields()

    def material(self) -> tuple[str, str | None]:
        """What the job asks and what was expected: results of several systems on the same
        material pair up (:meth:`input_key`)."""
        raise NotImplementedError

    def input_key(self) -> str:
        """A short hash of :meth:`material`, so results of several models on the same input can
        be paired."""
        text, expected = self.material()
        material = f"{text}\x00{expected or ''}"
        return hashlib.blake2b(material.encode("utf-8", "surrogatepass"), digest_size=8).hexdigest()

    def result_fields(self, rubric: Rubric | None, retrieval: RetrievalConfig) -> dict[str, object]:
        """What every result of this job carries, graded or null, besides its kind, label and
        input key: the system that produced it, and what its kind records without a judge."""
        return {"model": self.model}

    def candidate(self, unit: Unit) -> str | None:
        """The text the safety gate checks for one unit (None: nothing a model said)."""
        return None

    def grade(
        self, scoring: Scoring, graded: Sequence[Graded], fields: dict[str, object]
    ) -> dict[str, object]:
        """The grade from the verdicts of every call (in :meth:`units` order, per judge): the
        result's score fields. ``fields`` are the result's fields so far (:meth:`result_fields`)."""
        return scored(scoring, graded, self.candidate(Unit()))

    @field_validator("id", mode="before")
    @classmethod
    def _id(cls, v: Any) -> Any:
        if isinstance(v, int) and not isinstance(v, bool):
            return str(v)
        if isinstance(v, str) and not v.strip():
            raise ValueError("must not be blank")
        return v

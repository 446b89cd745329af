"""What every job has: an id, the system that produced it, metadata and a person's label."""

from __future__ import annotations

import math
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, StringConstraints, field_validator

__all__ = ["LABEL_WORDS", "MAX_ID_CHARS", "JobBase", "JobId"]

MAX_ID_CHARS = 256
JobId = Annotated[str, StringConstraints(min_length=1, max_length=MAX_ID_CHARS)]


LABEL_WORDS = ("pass", "fail", "a", "b", "tie")


class JobBase(BaseModel):
    """The fields every kind of job has."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=False)

    id: JobId
    model: str | None = None
    metadata: dict[str, Any] | None = None
    label: float | str | None = None
    """A person's grade: a number on the rubric's scale, ``pass``/``fail``, or ``a``/``b``/``tie``."""

    @field_validator("label", mode="before")
    @classmethod
    def _label(cls, v: Any) -> Any:
        if v is None:
            return v
        if isinstance(v, bool):
            return "pass" if v else "fail"
        if isinstance(v, (int, float)):
            if not math.isfinite(v):
                raise ValueError("must be a finite number")
            return float(v)
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

    @field_validator("id", mode="before")
    @classmethod
    def _id(cls, v: Any) -> Any:
        if isinstance(v, int) and not isinstance(v, bool):
            return str(v)
        if isinstance(v, str) and not v.strip():
            raise ValueError("must not be blank")
        return v

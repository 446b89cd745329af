"""What the jobs layer knows of a kind of job (:class:`JobKind`): its model, how an untagged
line is recognised as one, the built-in rubric suggested for it, how a rubric for it is told, a
sample line and the texts a report's table shows. One module per kind defines its own
(``response.py``, ``question.py``, ``pair.py``, ``conversation.py``); :mod:`judgeq.jobs.kinds`
registers them."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from judgeq.jobs.base import JobBase

__all__ = ["JobKind"]


@dataclass(frozen=True, slots=True)
class JobKind:
    """A kind of job, as the reader, the plan, the CLI and the report files see it."""

    name: str
    model: type[JobBase]
    marks: tuple[str, ...]
    """Fields whose presence makes an untagged line this kind (none: the default kind)."""
    rubric: str
    """The built-in rubric suggested for it."""
    rubric_is: str
    """How a rubric that grades it is told ("its scale is pairwise")."""
    rubric_with: str
    """The same, after "another rubric" ("with scale pairwise")."""
    sample: Mapping[str, Any]
    """A line of this kind (``rubrics show`` renders it for a rubric without goldens)."""
    texts: Callable[[Mapping[str, Any]], dict[str, str]]
    """A raw line's ``input`` and ``output`` as report.html's table shows them (and more a
    kind's own section uses, as ``transcript``)."""
    null_fields: Callable[[str], dict[str, object]] = lambda ident: {}
    """What a null result of this kind whose job is gone (its payload missing) carries besides
    its id ``ident`` (a question's ``question_id``)."""

"""Every kind of job, registered in one place: the reader, the plan, the CLI and the report
files ask this registry (by a line's ``kind``, or the fields that mark it) instead of naming
kinds. A new kind is a module defining its model and :class:`~judgeq.jobs.kind.JobKind`, and
one line here."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Annotated, Any, Union

from pydantic import Field, TypeAdapter, ValidationError

from judgeq.grading.result import Result
from judgeq.jobs.conversation import CONVERSATION
from judgeq.jobs.kind import JobKind
from judgeq.jobs.pair import PAIR
from judgeq.jobs.question import QUESTION
from judgeq.jobs.response import RESPONSE
from judgeq.rubric.model import Rubric

__all__ = [
    "DEFAULT",
    "GROUP_SECTION_KEYS",
    "KINDS",
    "RUN_SECTION_KEYS",
    "infer_kind",
    "kind_for",
    "kind_of",
    "make_result",
    "read_result",
    "texts_of",
]

KINDS: dict[str, JobKind] = {k.name: k for k in (RESPONSE, QUESTION, PAIR, CONVERSATION)}
"""Every kind, by name (in the order error messages list them)."""
DEFAULT = RESPONSE
"""The kind of an untagged line no other kind's fields mark."""
GROUP_SECTION_KEYS = tuple(k.section for k in KINDS.values() if k.section and k.group_section is not None)
"""report.json keys of the kinds' sections in every group of results (the run's, each model's)."""
RUN_SECTION_KEYS = tuple(k.section for k in KINDS.values() if k.section and k.run_section is not None)
"""report.json keys of the kinds' sections of the whole run."""
_DETECT_ORDER = (QUESTION, CONVERSATION, PAIR)
"""The order an untagged line is matched in (a question's fields win over the others')."""
_RUBRIC_ORDER = (CONVERSATION, PAIR, QUESTION)
"""The order kinds are asked whether a rubric grades them (a rubric's ``job:`` first, then its
pairwise scale, then its retrieval section)."""


def infer_kind(obj: Mapping[str, Any]) -> str:
    """The kind of a decoded line: ``kind`` if given, else the first kind whose fields it has."""
    kind = obj.get("kind")
    if isinstance(kind, str):
        return kind
    return next((k.name for k in _DETECT_ORDER if any(m in obj for m in k.marks)), DEFAULT.name)


def kind_for(rubric: Rubric) -> JobKind:
    """The kind of job ``rubric`` grades (:attr:`JobKind.grades`; no kind claims it: the default)."""
    return next((k for k in _RUBRIC_ORDER if k.grades(rubric)), DEFAULT)


def kind_of(name: str) -> JobKind:
    """The registered kind ``name`` (KeyError for another)."""
    return KINDS[name]


def texts_of(obj: Mapping[str, Any]) -> dict[str, str]:
    """A raw line's texts for a report's table (:attr:`JobKind.texts`; a line of an unknown
    kind shows none)."""
    kind = KINDS.get(infer_kind(obj))
    return kind.texts(obj) if kind is not None else {"input": "", "output": ""}


_RESULTS: TypeAdapter[Result] = TypeAdapter(
    Annotated[Union[tuple(k.result for k in KINDS.values())], Field(discriminator="kind")]  # noqa: UP007
)
"""A stored result of any kind, read as its kind's class by its ``kind``."""


def read_result(data: str | bytes) -> Result:
    """A stored result (its JSON) as its kind's result class; a ValidationError names what is
    wrong (an unknown kind among it). Read too: a result without ``kind`` (the default kind's:
    packed entries leave a default out) and the flat form results were stored in before each
    kind had its class (every kind's fields, other kinds' null: a rolling upgrade meets them)."""
    try:
        return _RESULTS.validate_json(data)
    except ValidationError as exc:
        errors = exc.errors()
        missing = len(errors) == 1 and errors[0]["type"] == "union_tag_not_found"
        flat = bool(errors) and all(e["type"] == "extra_forbidden" and e["input"] is None for e in errors)
        if not (missing or flat):
            raise
    obj = json.loads(data)
    result = kind_of(str(obj.get("kind") or DEFAULT.name)).result
    return result.model_validate({k: v for k, v in obj.items() if v is not None or k in result.model_fields})


def make_result(**fields: Any) -> Result:
    """A result of the kind ``fields`` name (``kind``; none: the default kind)."""
    return kind_of(str(fields.get("kind") or DEFAULT.name)).result(**fields)

"""Rubrics: markdown files with YAML frontmatter, validated into a :class:`Rubric`.

A rubric file is ``---`` + YAML frontmatter + ``---`` + the judge's instructions (body).
Loading is pure: :func:`parse_rubric` takes the text and a source label, so the workers can
rebuild the exact rubric of a run from the text stored with it, without the file.

Every validation failure raises :class:`~judgeq.RubricError` whose text is one line per
problem, each naming the file, the field and what is wrong.
"""

from __future__ import annotations

import difflib
import hashlib
import math
import re
from collections.abc import Mapping
from functools import cached_property
from importlib import resources
from pathlib import Path
from typing import Any, Literal, Self

import semver
import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from judgeq.errors import ConfigError, RubricError
from judgeq.transcripts.checks import Check
from judgeq.transcripts.messages import read_messages, read_tools

__all__ = [
    "DEFAULT_PASS_THRESHOLDS",
    "MAX_SCALE_TOP",
    "SCALE_RANGES",
    "WEIGHT_TOLERANCE",
    "Ceiling",
    "CeilingRule",
    "Chunk",
    "Dimension",
    "Golden",
    "RetrievalConfig",
    "Rubric",
    "Scale",
    "TurnScope",
    "builtin_dir",
    "builtin_names",
    "check_weight_sum",
    "default_pass_threshold",
    "is_path_ref",
    "load_rubric",
    "parse_band",
    "parse_rubric",
    "parse_weights",
    "read_rubric_text",
    "resolve_rubric_path",
    "scale_range",
    "split_frontmatter",
    "weights_from_env",
]

# A scale is ``pass-fail`` or a general integer scale ``LO-HI`` (0 <= LO < HI <= MAX_SCALE_TOP),
# e.g. ``1-5``, ``1-10``, ``0-9``, ``1-7``, ``0-100``.  It is stored in the canonical form
# ``f"{lo}-{hi}"`` (no spaces, no leading zeros), so equal scales fingerprint alike.
Scale = str
MAX_SCALE_TOP = 100
SCALE_RANGES: dict[str, tuple[int, int]] = {
    "pass-fail": (0, 1),
    "pairwise": (0, 1),
    "1-5": (1, 5),
    "1-10": (1, 10),
}
"""The built-in scales; :func:`scale_range` covers every valid scale."""
_SCALE_RE = re.compile(r"^\s*([0-9]{1,3})\s*-\s*([0-9]{1,3})\s*$")
_SCALE_HELP = (
    "Input should be 'pass-fail', 'pairwise', '1-5' or '1-10', or a general integer scale LO-HI "
    f"with 0 <= LO < HI <= {MAX_SCALE_TOP} (e.g. '0-9', '1-7')"
)


def scale_range(scale: str) -> tuple[int, int] | None:
    """``"1-10"`` -> (1, 10); ``"0-9"`` -> (0, 9); ``"pass-fail"`` -> (0, 1); invalid -> None."""
    if scale in SCALE_RANGES:
        return SCALE_RANGES[scale]
    m = _SCALE_RE.match(scale)
    if not m:
        return None
    lo, hi = int(m.group(1)), int(m.group(2))
    return (lo, hi) if 0 <= lo < hi <= MAX_SCALE_TOP else None


def default_pass_threshold(lo: int, hi: int) -> float:
    """The default pass threshold of a numeric scale: 70% of the way from LO to HI, rounded to
    the nearest integer (halves up), i.e. ``LO + round(0.7 x (HI - LO))``.

    It gives the historical defaults 7 of 1-10 and 4 of 1-5 without special cases, and 6 of
    0-9, 7 of 0-10, 5 of 1-7, 70 of 0-100.  Computed in integers (no float rounding)."""
    return float(lo + (7 * (hi - lo) + 5) // 10)


DEFAULT_PASS_THRESHOLDS: dict[str, float] = {
    s: default_pass_threshold(lo, hi)
    for s, (lo, hi) in SCALE_RANGES.items()
    if s not in ("pass-fail", "pairwise")
}
"""The built-in scales' defaults ({"1-5": 4.0, "1-10": 7.0}); see :func:`default_pass_threshold`."""
WEIGHT_TOLERANCE = 0.001
_NAME_RE = re.compile(r"^[a-z0-9][a-z0-9_-]*$")
_DIM_RE = re.compile(r"^[a-z][a-z0-9_]*$")
_BAND_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(?:-\s*(\d+(?:\.\d+)?))?\s*$")


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Dimension(_Model):
    """One weighted criterion of a numeric rubric."""

    name: str
    weight: float | None = None
    """Required on numeric scales (the weights sum to 1); a pairwise rubric's dimensions are
    judged A/B/tie each and reported apart, so they take none."""
    description: str = ""
    anchors: dict[str, str] = Field(default_factory=dict)

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not _DIM_RE.match(v):
            raise ValueError(f"{v!r} is not a lowercase snake_case name")
        return v

    @field_validator("weight")
    @classmethod
    def _weight(cls, v: float | None) -> float | None:
        if v is not None and (not math.isfinite(v) or v < 0):
            raise ValueError(f"weight must be a non-negative number, got {v}")
        return v

    @field_validator("anchors", mode="before")
    @classmethod
    def _anchor_keys(cls, v: Any) -> Any:
        if isinstance(v, Mapping):
            return {str(k): val for k, val in v.items()}
        return v


class CeilingRule(_Model):
    """``below``: when the dimension scores under this, the overall is capped at ``cap``."""

    below: float
    cap: float


class Ceiling(_Model):
    """Caps on the overall score driven by one dimension (the accuracy ceiling)."""

    dimension: str
    rules: list[CeilingRule] = Field(min_length=1)


class Chunk(_Model):
    """One retrieved chunk of a retrieval result."""

    doc_id: str
    text: str

    @field_validator("doc_id", mode="before")
    @classmethod
    def _doc_id(cls, v: Any) -> Any:
        # Numeric ids are common in retrieval exports; keep them as text.
        return str(v) if isinstance(v, int) and not isinstance(v, bool) else v


class TurnScope(_Model):
    """How a rubric with ``scope: turn`` grades a conversation: each assistant turn with the
    conversation up to it (the last ``window`` turns of it, when given), the job's score the
    ``aggregate`` of its turns' (``mean``, ``min``: the worst turn, ``last``: the final one)."""

    aggregate: Literal["mean", "min", "last"] = "mean"
    window: int | None = Field(default=None, ge=1)


class RetrievalConfig(_Model):
    """Rank metrics and position weights for retrieval grading."""

    position_weights: dict[str, float] = Field(default_factory=lambda: {"1": 1.0, "2-3": 0.95, "4-5": 0.85})
    default_weight: float = 0.6
    hit_k: list[int] = Field(default_factory=lambda: [1, 3, 5, 10])

    @field_validator("hit_k")
    @classmethod
    def _hit_k(cls, v: list[int]) -> list[int]:
        if not v or any(k < 1 for k in v):
            raise ValueError("hit_k must be a non-empty list of positive integers")
        return sorted(set(v))

    @field_validator("position_weights", mode="before")
    @classmethod
    def _pw(cls, v: Any) -> Any:
        if isinstance(v, Mapping):
            out = {str(k): val for k, val in v.items()}
            for band in out:
                if parse_band(band) is None:
                    raise ValueError(f"position band {band!r} is not N or N-M")
            return out
        return v


class Golden(_Model):
    """A worked example with its expected outcome, used to check a rubric end to end."""

    name: str
    input: str | None = None
    output: str | None = None
    output_a: str | None = None
    output_b: str | None = None
    context: str | None = None
    expected_answer: str | None = None
    retrieved: list[Chunk] | None = None
    messages: list[Any] | None = None
    """A conversation golden: its messages (and ``tools``, ``reference``), as in a job line."""
    tools: list[Any] | None = None
    reference: dict[str, Any] | None = None
    expected: Literal["pass", "fail", "a", "b", "tie"] | float

    @field_validator("expected", mode="before")
    @classmethod
    def _expected(cls, v: Any) -> Any:
        return v.lower() if isinstance(v, str) else v

    @model_validator(mode="after")
    def _outputs(self) -> Golden:
        if self.messages is not None:
            if self.output is not None or self.output_a is not None or self.retrieved is not None:
                raise ValueError("a conversation golden has messages (and no output)")
            return self
        if self.tools is not None or self.reference is not None:
            raise ValueError("tools and reference are for conversation goldens (with messages)")
        if self.input is None:
            raise ValueError("input: required field is missing")
        pair = self.output_a is not None or self.output_b is not None
        if pair and (self.output_a is None or self.output_b is None or self.output is not None):
            raise ValueError("a pairwise golden has output_a and output_b (and no output)")
        if not pair and self.output is None and self.retrieved is None:
            raise ValueError("output: required field is missing")
        return self

    def job(self) -> dict[str, Any]:
        """The golden as a batch line (with its ``expected`` outcome as the ``label``)."""
        fields: dict[str, Any] = {"id": f"golden:{self.name}", "label": self.expected}
        if self.messages is not None:
            fields.update(
                kind="conversation", messages=self.messages, tools=self.tools, reference=self.reference
            )
            return {k: v for k, v in fields.items() if v is not None}
        if self.retrieved is not None:
            fields.update(
                question=self.input,
                expected_answer=self.expected_answer or "",
                retrieved=[c.model_dump() for c in self.retrieved],
                needle_doc_id=self.retrieved[0].doc_id if self.retrieved else "none",
            )
            return fields
        fields.update(input=self.input, context=self.context, expected_answer=self.expected_answer)
        if self.output_a is not None:
            fields.update(output_a=self.output_a, output_b=self.output_b, model_a="a", model_b="b")
        else:
            fields.update(output=self.output)
        return {k: v for k, v in fields.items() if v is not None}


def parse_band(band: str) -> tuple[float, float] | None:
    """``"9-10"`` -> (9, 10); ``"5"`` -> (5, 5); anything else -> None."""
    m = _BAND_RE.match(band)
    if not m:
        return None
    lo = float(m.group(1))
    hi = float(m.group(2)) if m.group(2) else lo
    return (lo, hi) if lo <= hi else None


class Rubric(_Model):
    """A validated rubric. Immutable; :meth:`with_weights` returns a new one."""

    name: str
    version: str
    scale: Scale
    description: str
    body: str
    source: str = "<memory>"
    dimensions: list[Dimension] = Field(default_factory=list)
    ceiling: Ceiling | None = None
    safety_gate: bool = False
    pass_threshold: float | None = None
    goldens: list[Golden] = Field(default_factory=list)
    retrieval: RetrievalConfig | None = None
    job: Literal["conversation"] | None = None
    """The kind of job graded, where the scale and sections do not say it: ``conversation``
    (an agent's messages and tool calls; see :mod:`judgeq.jobs.conversation`)."""
    checks: list[Check] = Field(default_factory=list)
    """Deterministic trajectory checks run before the judge (conversation rubrics)."""
    scope: Literal["conversation", "turn"] = "conversation"
    """A conversation rubric grades the whole conversation in one call, or (``turn``) each
    assistant turn in one call of its own, the job's score aggregated (``turns``)."""
    turns: TurnScope | None = None
    tags: list[str] = Field(default_factory=list)
    author: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not _NAME_RE.match(v):
            raise ValueError(f"{v!r} must be lowercase letters, digits, '-' or '_'")
        return v

    @field_validator("scale", mode="before")
    @classmethod
    def _scale(cls, v: Any) -> Any:
        if v in ("pass-fail", "pairwise"):
            return v
        rng = scale_range(v) if isinstance(v, str) else None
        if rng is None:
            raise ValueError(f"{_SCALE_HELP}; got {v!r}")
        return f"{rng[0]}-{rng[1]}"

    @field_validator("version", mode="before")
    @classmethod
    def _version(cls, v: Any) -> Any:
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            raise ValueError(f"{v!r} is not semver (write it as a string like 1.0.0)")
        if isinstance(v, str) and not semver.Version.is_valid(v):
            raise ValueError(f"{v!r} is not semver (MAJOR.MINOR.PATCH, e.g. 1.0.0)")
        return v

    @field_validator("description", "body")
    @classmethod
    def _non_empty(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("must not be empty")
        return v

    @model_validator(mode="after")
    def _consistent(self) -> Rubric:
        """Every inconsistency at once, one line each (``field: problem``): a user fixes a
        rubric in one pass, not one problem per run."""
        problems: list[str] = []
        say = problems.append
        lo, hi = self.lo, self.hi
        if self.scale == "pass-fail":
            if self.dimensions:
                say("dimensions: a pass-fail rubric has no weighted dimensions")
            if self.pass_threshold is not None:
                say("pass_threshold: a pass-fail rubric has no threshold")
            if self.ceiling is not None:
                say("ceiling: a pass-fail rubric has no ceiling")
        elif self.is_pairwise:
            for field_name in ("pass_threshold", "ceiling", "retrieval"):
                if getattr(self, field_name) is not None:
                    say(f"{field_name}: a pairwise rubric has no {field_name.replace('_', ' ')}")
            if self.safety_gate:
                say("safety_gate: a pairwise rubric has no safety gate")
            for name in [d.name for d in self.dimensions if d.weight is not None]:
                say(
                    f"dimensions.{name}.weight: a pairwise rubric's dimensions are judged "
                    "A/B/tie each and take no weight"
                )
        elif self.pass_threshold is not None and not lo <= self.pass_threshold <= hi:
            say(f"pass_threshold: {self.pass_threshold} is outside the scale {lo}-{hi}")
        names = [d.name for d in self.dimensions]
        for dup in sorted({n for n in names if names.count(n) > 1}):
            say(f"dimensions: duplicate name {dup!r}")
        if self.dimensions and not self.is_pairwise:
            unweighted = [d.name for d in self.dimensions if d.weight is None]
            for name in unweighted:
                say(f"dimensions.{name}.weight: required field is missing")
            if not unweighted and self.scale != "pass-fail":
                try:
                    check_weight_sum(self.weights)
                except ValueError as exc:
                    say(f"dimensions: {exc}")
        for d in self.dimensions:
            if self.is_pairwise and d.anchors:
                say(f"dimensions.{d.name}.anchors: a pairwise dimension has no score bands")
                continue
            for band in d.anchors:
                rng = parse_band(band)
                if rng is None or rng[0] < lo or rng[1] > hi:
                    say(f"dimensions.{d.name}.anchors: band {band!r} is not within the scale {lo}-{hi}")
        if self.ceiling is not None and self.ceiling.dimension not in names:
            say(
                f"ceiling.dimension: {self.ceiling.dimension!r} is not a dimension "
                f"(have: {', '.join(names) or 'none'})"
            )
        if self.job == "conversation":
            if self.is_pairwise or self.retrieval is not None:
                say("job: a conversation rubric is not pairwise and has no retrieval section")
        elif self.checks:
            say("checks: trajectory checks are for conversation rubrics (job: conversation)")
        if self.scope == "turn" and self.job != "conversation":
            say("scope: turn is for conversation rubrics (job: conversation)")
        if self.turns is not None and self.scope != "turn":
            say("turns: is for a rubric with scope: turn")
        for g in self.goldens:
            if (g.messages is not None) != (self.job == "conversation"):
                say(f"goldens.{g.name}: a conversation rubric's goldens have messages, and only theirs")
                continue
            if g.messages is not None:
                tools, said = read_tools(g.tools) if g.tools is not None else (None, [])
                said += read_messages(g.messages, tools)[1]
                problems += [f"goldens.{g.name}.{line}" for line in said]
            if self.is_pairwise:
                if g.expected not in ("a", "b", "tie") or g.output_a is None:
                    say(
                        f"goldens.{g.name}: a pairwise golden has output_a, output_b and expected a, b or tie"
                    )
            elif g.output_a is not None:
                say(f"goldens.{g.name}: output_a/output_b are for pairwise rubrics")
            elif self.scale == "pass-fail" and g.expected not in ("pass", "fail"):
                say(f"goldens.{g.name}.expected: must be pass or fail")
            elif self.scale != "pass-fail" and (isinstance(g.expected, str) or not lo <= g.expected <= hi):
                say(f"goldens.{g.name}.expected: must be a number from {lo} to {hi}")
        if problems:
            raise ValueError("\n".join(problems))
        return self

    # -- derived -----------------------------------------------------------------
    @property
    def lo(self) -> int:
        """The scale's lowest score (0 for pass-fail)."""
        return self.scale_range[0]

    @property
    def hi(self) -> int:
        """The scale's highest score (1 for pass-fail)."""
        return self.scale_range[1]

    @property
    def scale_range(self) -> tuple[int, int]:
        """(LO, HI) of the scale; (0, 1) for pass-fail."""
        rng = scale_range(self.scale)
        assert rng is not None  # the validator accepted the scale
        return rng

    @property
    def is_pass_fail(self) -> bool:
        return self.scale == "pass-fail"

    @property
    def turn_scope(self) -> TurnScope | None:
        """How each turn is graded, for a rubric with ``scope: turn`` (None: whole conversations)."""
        return (self.turns or TurnScope()) if self.scope == "turn" else None

    @property
    def is_pairwise(self) -> bool:
        """Verdict A, B or tie on a pair of outputs (pair jobs)."""
        return self.scale == "pairwise"

    @property
    def threshold(self) -> float | None:
        """The pass threshold in force: the rubric's, else the scale's default
        (:func:`default_pass_threshold`: 7 of 1-10, 4 of 1-5, 6 of 0-9)."""
        if self.is_pass_fail or self.is_pairwise:
            return None
        if self.pass_threshold is not None:
            return self.pass_threshold
        return default_pass_threshold(self.lo, self.hi)

    @property
    def weights(self) -> dict[str, float]:
        return {d.name: d.weight for d in self.dimensions if d.weight is not None}

    @cached_property
    def fingerprint(self) -> str:
        """A short hash of everything that changes grading (not the source path). Cached in the
        instance (the rubric is frozen); a copy forgets it (:meth:`__copy__`)."""
        payload = self.model_dump_json(exclude={"source", "goldens"})
        return hashlib.sha256(payload.encode()).hexdigest()[:16]

    def __copy__(self) -> Self:
        # pydantic's model_copy(update=...) copies __dict__, cached properties included, then
        # changes fields: a copy keeping the fingerprint would keep its source's
        copied = super().__copy__()
        copied.__dict__.pop("fingerprint", None)
        return copied

    def __deepcopy__(self, memo: dict[int, Any] | None = None) -> Self:
        copied = super().__deepcopy__(memo)
        copied.__dict__.pop("fingerprint", None)
        return copied

    def with_pass_threshold(self, threshold: float, *, origin: str = "--pass-threshold") -> Rubric:
        """Return a copy with another pass threshold; validated against the scale."""
        if self.is_pass_fail or self.is_pairwise:
            raise RubricError(f"{origin}: rubric {self.name!r} ({self.scale}) has no pass threshold")
        if not self.lo <= threshold <= self.hi:
            raise RubricError(f"{origin}: {threshold:g} is outside the scale {self.scale}")
        return self.model_copy(update={"pass_threshold": float(threshold)})

    def with_weights(self, overrides: Mapping[str, float], *, origin: str = "--weights") -> Rubric:
        """Return a copy with some dimension weights replaced; validated again."""
        if not overrides:
            return self
        names = [d.name for d in self.dimensions]
        for key in overrides:
            if key not in names:
                raise RubricError(
                    f"{origin}: {key!r} is not a dimension of rubric {self.name!r} "
                    f"(dimensions: {', '.join(names) or 'none'})"
                )
        if self.is_pairwise:
            raise RubricError(f"{origin}: rubric {self.name!r} is pairwise: its dimensions take no weights")
        dims = [d.model_copy(update={"weight": overrides.get(d.name, d.weight)}) for d in self.dimensions]
        try:
            check_weight_sum({d.name: d.weight or 0.0 for d in dims})
        except ValueError as exc:
            raise RubricError(f"{origin}: {exc}") from None
        return self.model_copy(update={"dimensions": dims})


def check_weight_sum(weights: Mapping[str, float]) -> None:
    """Raise ValueError unless the weights are non-negative and sum to 1.0 within 0.001."""
    for name, w in weights.items():
        if not math.isfinite(w) or w < 0:
            raise ValueError(f"weight of {name!r} must be a non-negative number, got {w}")
    total = math.fsum(weights.values())
    if abs(total - 1.0) > WEIGHT_TOLERANCE:
        raise ValueError(
            f"dimension weights sum to {total:.4f}, they must sum to 1.0 (within {WEIGHT_TOLERANCE})"
        )


# -- loading ---------------------------------------------------------------------------


def split_frontmatter(text: str, source: str) -> tuple[str, str]:
    """Split ``---`` YAML ``---`` body; raise RubricError naming ``source`` otherwise."""
    text = text.removeprefix("\ufeff")
    lines = text.splitlines(keepends=True)
    if not lines or lines[0].strip() != "---":
        raise RubricError(f"{source}: frontmatter: the file must start with a '---' line")
    for i in range(1, len(lines)):
        if lines[i].strip() == "---":
            return "".join(lines[1:i]), "".join(lines[i + 1 :])
    raise RubricError(f"{source}: frontmatter: no closing '---' line")


def _loc(loc: tuple[Any, ...], data: Mapping[str, Any]) -> str:
    parts: list[str] = []
    cur: Any = data
    for item in loc:
        if isinstance(item, int) and isinstance(cur, list) and 0 <= item < len(cur):
            cur = cur[item]
            name = cur.get("name") if isinstance(cur, Mapping) else None
            parts.append(str(name) if name else str(item))
            continue
        if item in ("function-after[_consistent()]",) or str(item).startswith("function-"):
            continue
        parts.append(str(item))
        cur = cur.get(item) if isinstance(cur, Mapping) else None
    return ".".join(parts)


class _StrictSafeLoader(yaml.SafeLoader):  # type: ignore[misc]  # PyYAML ships no types
    """yaml.SafeLoader (no object tags) that also rejects duplicate keys."""


def _unique_mapping(loader: _StrictSafeLoader, node: yaml.MappingNode, deep: bool = False) -> Any:
    seen: set[Any] = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if key in seen:
            raise yaml.constructor.ConstructorError(None, None, f"duplicate key {key!r}", key_node.start_mark)
        seen.add(key)
    return loader.construct_mapping(node, deep=deep)


_StrictSafeLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _unique_mapping)


def parse_rubric(text: str, source: str = "<memory>") -> Rubric:
    """Parse and validate a rubric from its markdown text."""
    front, body = split_frontmatter(text, source)
    try:
        data = yaml.load(front, Loader=_StrictSafeLoader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (frontmatter line {mark.line + 1})" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise RubricError(f"{source}: frontmatter: invalid YAML{where}: {problem}") from None
    if not isinstance(data, dict):
        raise RubricError(f"{source}: frontmatter: must be a YAML mapping of fields")
    for reserved in ("body", "source"):
        if reserved in data:
            raise RubricError(f"{source}: {reserved}: not a frontmatter field")
    if source.startswith("builtin:") and data.get("name") != source.removeprefix("builtin:"):
        raise RubricError(f"{source}: name: {data.get('name')!r} does not match the file name")
    extra = {"body": body.strip("\n"), "source": source}
    try:
        return Rubric.model_validate({**data, **extra})
    except ValidationError as exc:
        lines = _problem_lines(exc, data, source)
        # the rubric-wide checks run only on valid fields: run them again without the fields
        # found wrong (required ones stood in for), so one pass reports every problem
        wrong = {err["loc"][0] for err in exc.errors() if err["loc"]}
        if wrong and "scale" not in wrong:  # (every rubric-wide check depends on the scale)
            rest = {k: v for k, v in data.items() if k not in wrong}
            rest.update({k: v for k, v in _STAND_INS.items() if k in wrong})
            try:
                Rubric.model_validate({**rest, **extra})
            except ValidationError as more:
                lines += _problem_lines(more, rest, source)
        raise RubricError("\n".join(dict.fromkeys(lines))) from None


_STAND_INS = {"name": "rubric", "version": "1.0.0", "description": "-"}
"""Valid values for the required fields found wrong, so the rubric-wide checks can run."""


def _problem_lines(exc: ValidationError, data: dict[str, Any], source: str) -> list[str]:
    """One ``source: field: problem`` line per problem of ``exc`` (a rubric-wide check's
    several lines each become one)."""
    out: list[str] = []
    for err in exc.errors():
        loc = _loc(err["loc"], data)
        msg = err["msg"].removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            msg = "unknown field"
        elif err["type"] == "missing":
            msg = "required field is missing"
        for part in msg.splitlines() or [msg]:
            where, text = loc, part
            if not where and ":" in part:
                where, text = (x.strip() for x in part.split(":", 1))
            out.append(f"{source}: {where or 'frontmatter'}: {text}")
    return out


def builtin_dir() -> Path:
    """The directory holding the built-in rubric library."""
    return Path(str(resources.files("judgeq.rubrics")))


def builtin_names() -> list[str]:
    return sorted(p.stem for p in builtin_dir().glob("*.md"))


def is_path_ref(ref: str) -> bool:
    """A reference is a path when it ends in .md, starts with '.', '/' or '~', or has a separator."""
    return ref.endswith(".md") or ref.startswith((".", "/", "~")) or "/" in ref or "\\" in ref


def resolve_rubric_path(ref: str) -> tuple[Path, str]:
    """Map a rubric reference to (file path, source label)."""
    if not ref:
        raise RubricError("rubric: the reference is empty")
    if is_path_ref(ref):
        path = Path(ref).expanduser() if ref.startswith("~/") or ref == "~" else Path(ref)
        return path, str(path)
    if not _NAME_RE.match(ref) or ref not in builtin_names():
        close = difflib.get_close_matches(ref.lower(), builtin_names(), n=1, cutoff=0.6)
        hint = f". Did you mean {close[0]!r}?" if close else ""
        raise RubricError(
            f"rubric: no built-in rubric named {ref!r} (available: {', '.join(builtin_names())}; "
            f"a path must end in .md or contain a '/'){hint}"
        )
    return builtin_dir() / f"{ref}.md", f"builtin:{ref}"


def read_rubric_text(ref: str) -> tuple[str, str]:
    """Resolve a reference and read the file: (text, source label)."""
    path, source = resolve_rubric_path(ref)
    try:
        return path.read_text(encoding="utf-8"), source
    except FileNotFoundError:
        raise RubricError(f"{source}: file not found") from None
    except IsADirectoryError:
        raise RubricError(f"{source}: is a directory, not a rubric file") from None
    except UnicodeDecodeError as exc:
        raise RubricError(f"{source}: not UTF-8 text (byte {exc.start})") from None
    except OSError as exc:
        raise RubricError(f"{source}: cannot read: {exc.strerror}") from None


def load_rubric(ref: str) -> Rubric:
    """Resolve a reference (built-in name or path) and load the rubric."""
    text, source = read_rubric_text(ref)
    return parse_rubric(text, source)


def parse_weights(spec: str, *, origin: str = "--weights") -> dict[str, float]:
    """Parse ``accuracy=0.4,clarity=0.15`` into a mapping."""
    out: dict[str, float] = {}
    for part in filter(None, (p.strip() for p in spec.split(","))):
        name, sep, value = part.partition("=")
        name = name.strip().lower()
        if not sep or not name:
            raise ConfigError(f"{origin}: {part!r} is not NAME=WEIGHT")
        try:
            weight = float(value)
        except ValueError:
            raise ConfigError(f"{origin}: weight of {name!r} is not a number: {value.strip()!r}") from None
        if not math.isfinite(weight) or weight < 0:
            raise ConfigError(f"{origin}: weight of {name!r} must be a non-negative number")
        out[name] = weight
    return out


def weights_from_env(environ: Mapping[str, str]) -> dict[str, float]:
    """Collect ``JUDGEQ_WEIGHT_<DIMENSION>`` variables (dimension name lower-cased)."""
    out: dict[str, float] = {}
    for key, value in environ.items():
        if key.startswith("JUDGEQ_WEIGHT_") and len(key) > len("JUDGEQ_WEIGHT_"):
            dim = key[len("JUDGEQ_WEIGHT_") :].lower()
            out.update(parse_weights(f"{dim}={value}", origin=key))
    return out

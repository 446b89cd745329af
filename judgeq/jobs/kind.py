"""What the jobs layer knows of a kind of job (:class:`JobKind`): its model, how an untagged
line is recognised as one, the built-in rubric suggested for it, how a rubric for it is told, a
sample line and the texts a report's table shows. One module per kind defines its own
(``response.py``, ``question.py``, ``pair.py``, ``conversation.py``); :mod:`judgeq.jobs.kinds`
registers them."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from judgeq.grading.result import Result
from judgeq.jobs.base import JobBase
from judgeq.rubric.model import RetrievalConfig, Rubric

__all__ = ["JobKind", "ReportShape", "Section", "narrowed"]

R = TypeVar("R", bound=Result)


def narrowed(r: Result, cls: type[R]) -> R:
    """``r`` as its kind's result class ``cls`` (a kind's section, counters and export are given
    results of their kind only); TypeError for another kind's."""
    if not isinstance(r, cls):
        raise TypeError(f"a {cls.__name__} expected, not a {r.kind}'s result")
    return r


class Section(Protocol):
    """A kind's own section of a report, folded one result of that kind at a time (streaming,
    bounded memory) and written into report.json under the kind's :attr:`JobKind.section`."""

    def add(self, r: Result) -> None: ...

    def to_dict(self) -> Mapping[str, Any] | None:
        """The section as report.json holds it (None: nothing to report): a kind types its
        section's keys (a TypedDict) so mypy checks what its readers ask of it."""
        ...


@dataclass(frozen=True, slots=True)
class ReportShape:
    """What a report knows of its run when it starts, as a kind's section needs it."""

    hit_k: tuple[int, ...] = (1, 3, 5, 10)
    lo: float = 1
    hi: float = 10
    pairwise: bool = False
    """The rubric's scale is pairwise."""
    judges: int = 1
    swap: bool = True


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
    result: type[Result] = Result
    """The class of its results (a kind whose results carry more than every result does
    subclasses :class:`~judgeq.grading.result.Result`, with ``kind`` its name)."""
    grades: Callable[[Rubric], bool] = lambda rubric: False
    """Whether ``rubric`` grades jobs of this kind (its scale, its sections or its ``job:`` say
    so); a rubric no kind claims grades the default kind (:func:`judgeq.jobs.kinds.kind_for`)."""
    least_units: Callable[[bool], int] = lambda swap: 1
    """The fewest judge calls each judge makes for a job of this kind that a judge grades (given
    whether the run swaps pairs' orders): what sizes every job of a run (a batch's share)."""
    null_fields: Callable[[str], dict[str, object]] = lambda ident: {}
    """What a null result of this kind whose job is gone (its payload missing) carries besides
    its id ``ident`` (a question's ``question_id``)."""
    section: str | None = None
    """Its own section's key in report.json (``retrieval``, ``pairwise``, ``conversation``)."""
    group_section: Callable[[ReportShape], Section] | None = None
    """A section in every group of results (the run's and each model's), made at a group's first
    result of this kind."""
    run_section: Callable[[ReportShape], Section | None] | None = None
    """A section of the whole run (None from it: not for this run)."""
    markdown: Callable[[Mapping[str, Any] | None], list[str]] | None = None
    """Its section's lines in report.md."""
    validity: bool = False
    """Its section says how far the grades can be trusted (report.md shows it with agreement and
    the council) rather than what the jobs scored."""
    html: Callable[[Mapping[str, Any] | None, Mapping[str, Mapping[str, str]]], str] | None = None
    """Its section's part of report.html, given the texts of the jobs it shows (by job id, from
    :attr:`texts`)."""
    cards: Callable[[Mapping[str, Any]], list[tuple[str, str]]] | None = None
    """report.html's headline figures for a run with its section (given the section), in place
    of the mean score and pass rate (the mean :attr:`score_name` follows them when the kind is
    :attr:`scored`, and agreement with pair labels when the run has it)."""
    charts: Callable[[Mapping[str, Any]], list[str]] | None = None
    """Its section's plots in report.html (SVG figures, :mod:`judgeq.figures.charts`)."""
    summary: Callable[[Mapping[str, Any]], list[str]] | None = None
    """Its section's lines in what the CLI prints when a run ends."""
    calibration: Callable[[Mapping[str, Any]], list[str]] | None = None
    """Its section's lines in ``rubrics calibrate``'s figures (a judge's consistency on it)."""
    scored: bool = True
    """Its results' overall score and pass rates are what a run of it is summed up by (a pair's
    are not: its win rates are)."""
    score_name: str = "overall"
    """What the CLI calls its overall score."""
    rates_of: str = "of all jobs"
    """What the CLI says its pass rates are over."""
    shown: Callable[[Mapping[str, Any] | None], set[str]] = lambda section: set()
    """The jobs whose texts its part of report.html shows (their lines are read back from the
    jobs file)."""
    shown_model: Callable[[Result], str | None] = lambda r: r.model
    """The system a result is of, as report.html's table shows it (a pair: both)."""
    counters: Callable[[Result], dict[str, float]] = lambda r: {}
    """What a stored result of this kind adds to its run's live counters besides what every
    result adds (a question's rank figures, for progress lines)."""
    export_columns: tuple[str, ...] = ()
    """Its results' own columns in an exported row (``judgeq export``): these result fields."""
    rescored: Callable[[Result, float, Rubric, RetrievalConfig], dict[str, object]] = (
        lambda r, overall, rubric, retrieval: {}
    )
    """What a result re-scored to ``overall`` under ``rubric`` updates besides its scores."""
    debug: Callable[[Result], str | None] = lambda r: None
    """A stored result's line in a worker's debug log (None: none)."""
    by_model: bool = True
    """Whether its results are grouped by the model that produced them (a pair's ``model`` is
    output A's: pairs are compared by model pair in their own section instead)."""

    def __post_init__(self) -> None:
        if self.result.model_fields["kind"].default != self.name:
            raise ValueError(f"job kind {self.name!r}: its result class's kind is not {self.name!r}")
        parts = (
            self.group_section,
            self.run_section,
            self.markdown,
            self.html,
            self.cards,
            self.charts,
            self.summary,
        )
        if self.section is None and any(part is not None for part in parts):
            raise ValueError(f"job kind {self.name!r}: a report section needs its key (section=...)")

    def export(self, r: Result) -> dict[str, Any]:
        """Its own columns of ``r``'s exported row."""
        return {key: getattr(r, key) for key in self.export_columns}

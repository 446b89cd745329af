"""The question kind: the chunks retrieved for one question, graded for retrieval (``question``,
``expected_answer``, ``retrieved``, ``needle_doc_id`` or ``relevant_doc_ids``)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypedDict, cast

from pydantic import Field, field_validator, model_validator

from judgeq.figures.charts import bars, curve, with_ci
from judgeq.figures.formatting import fmt, fmt_ci
from judgeq.figures.stats import Stats, pct, t_interval, wilson
from judgeq.grading.result import Result
from judgeq.grading.retrieval import first_relevant_rank, hits_at, llm_grade, total_score
from judgeq.jobs.base import JobBase
from judgeq.jobs.grade import Graded, Scoring, scored
from judgeq.jobs.kind import JobKind, narrowed
from judgeq.rubric.model import Chunk, RetrievalConfig, Rubric

__all__ = [
    "MAX_RETRIEVED",
    "QUESTION",
    "RETRIEVAL_PASS_THRESHOLDS",
    "QuestionJob",
    "QuestionResult",
    "RetrievalStats",
    "question_grade",
    "retrieval_markdown",
]

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
        rank = fields["rank"]
        assert isinstance(out["overall"], float) and (rank is None or isinstance(rank, int))
        extra = graded[0].verdict.extra
        out.update(
            question_grade(out["overall"], rank, scoring.rubric, scoring.retrieval or RetrievalConfig()),
            llm_reasoning=out["notes"],
            key_facts_present=extra.get("key_facts_present"),
            key_facts_missing=extra.get("key_facts_missing"),
        )
        return out


class QuestionResult(Result):
    """A question job's result: where the relevant chunk was found (no judge needed) and the
    question's grade on 1-10 weighted by that rank."""

    kind: Literal["question"] = "question"  # type: ignore[assignment]
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

    def reason(self) -> str | None:
        return self.notes or self.llm_reasoning or (self.raw if self.status == "null" else None)


RETRIEVAL_PASS_THRESHOLDS = {"pass_rate_8": 8.0, "pass_rate_7": 7.0, "pass_rate_6_5": 6.5}

Rate = float | None
"""A percentage (None: of no question)."""
Interval = list[float] | None


class RetrievalIntervals(TypedDict, total=False):
    """The 95% intervals of the retrieval figures (Wilson for rates, t for means)."""

    accuracy: Interval
    hit_at_1_rate: Interval
    hit_at_5_rate: Interval
    hit_at_k_rates: dict[str, Interval]
    mrr: Interval
    avg_llm_grade: Interval
    avg_total_score: Interval
    pass_rate_8: Interval
    pass_rate_7: Interval
    pass_rate_6_5: Interval
    coverage: Interval


class RetrievalSection(TypedDict):
    """The ``retrieval`` section of report.json (the run's, and each model's)."""

    questions: int
    accuracy: Rate
    hit_at_1_rate: Rate
    hit_at_5_rate: Rate
    hit_at_k_rates: dict[str, Rate]
    mrr: float | None
    avg_llm_grade: float | None
    avg_total_score: float | None
    pass_rate_8: Rate
    pass_rate_7: Rate
    pass_rate_6_5: Rate
    null: int
    coverage: Rate
    rank_counts: dict[str, int]
    ci95: RetrievalIntervals


def _section(section: Mapping[str, Any]) -> RetrievalSection:
    """A retrieval section as report.json holds it (its keys checked where it is read)."""
    return cast(RetrievalSection, section)


@dataclass(slots=True)
class RetrievalStats:
    """Rank and grade metrics over question jobs."""

    hit_k: tuple[int, ...]
    n: int = 0
    found: int = 0
    hits: Counter[int] = field(default_factory=Counter)
    rr_sum: float = 0.0
    rr_sq: float = 0.0
    grades: Stats = field(default_factory=Stats)
    totals: Stats = field(default_factory=Stats)
    passes: Counter[str] = field(default_factory=Counter)
    nulls: int = 0
    ranks: Counter[int] = field(default_factory=Counter)
    """Questions per rank of the first relevant chunk (ranks above 20 as 21; 0: not found)."""

    def add(self, result: Result) -> None:
        r = narrowed(result, QuestionResult)
        self.n += 1
        self.ranks[min(r.rank, 21) if r.rank is not None else 0] += 1
        if r.rank is not None:
            self.found += 1
            self.rr_sum += 1.0 / r.rank
            self.rr_sq += 1.0 / r.rank**2
            for k in {*self.hit_k, 1, 5}:
                if r.rank <= k:
                    self.hits[k] += 1
        if r.llm_grade is None:
            self.nulls += 1
        else:
            self.grades.add(r.llm_grade)
        if r.total_score is not None:
            self.totals.add(r.total_score)
            for name, t in RETRIEVAL_PASS_THRESHOLDS.items():
                if r.total_score >= t:
                    self.passes[name] += 1

    def to_dict(self) -> RetrievalSection:
        n = self.n
        return {
            "questions": n,
            "accuracy": pct(self.found, n),
            "hit_at_1_rate": pct(self.hits[1], n),
            "hit_at_5_rate": pct(self.hits[5], n),
            "hit_at_k_rates": {str(k): pct(self.hits[k], n) for k in self.hit_k},
            "mrr": round(self.rr_sum / n, 6) if n else None,
            "avg_llm_grade": round(self.grades.total / self.grades.n, 4) if self.grades.n else None,
            "avg_total_score": round(self.totals.total / self.totals.n, 4) if self.totals.n else None,
            "pass_rate_8": pct(self.passes["pass_rate_8"], n),
            "pass_rate_7": pct(self.passes["pass_rate_7"], n),
            "pass_rate_6_5": pct(self.passes["pass_rate_6_5"], n),
            "null": self.nulls,
            "coverage": pct(self.grades.n, n),
            "rank_counts": {
                ("not found" if k == 0 else ">20" if k == 21 else str(k)): v
                for k, v in sorted(self.ranks.items())
            },
            "ci95": {
                "accuracy": wilson(self.found, n),
                "hit_at_1_rate": wilson(self.hits[1], n),
                "hit_at_5_rate": wilson(self.hits[5], n),
                "hit_at_k_rates": {str(k): wilson(self.hits[k], n) for k in self.hit_k},
                "mrr": t_interval(n, self.rr_sum, self.rr_sq, 6),
                "avg_llm_grade": t_interval(self.grades.n, self.grades.total, self.grades.total_sq),
                "avg_total_score": t_interval(self.totals.n, self.totals.total, self.totals.total_sq),
                "pass_rate_8": wilson(self.passes["pass_rate_8"], n),
                "pass_rate_7": wilson(self.passes["pass_rate_7"], n),
                "pass_rate_6_5": wilson(self.passes["pass_rate_6_5"], n),
                "coverage": wilson(self.grades.n, n),
            },
        }


def question_grade(
    overall: float, rank: int | None, rubric: Rubric, retrieval: RetrievalConfig
) -> dict[str, object]:
    """A question's grade on 1-10 from the judge's overall score (``llm_grade``) and that grade
    weighted by the rank its relevant chunk was found at (``total_score``)."""
    grade = llm_grade(overall, rubric)
    return {"llm_grade": grade, "total_score": total_score(grade, rank, retrieval)}


def _cards(section: Mapping[str, Any]) -> list[tuple[str, str]]:
    """Accuracy, Hit@1, Hit@5 and MRR, with their intervals."""
    rt = _section(section)
    ci: RetrievalIntervals = rt.get("ci95") or {}
    cards = [
        ("accuracy (needle retrieved)", with_ci(rt.get("accuracy"), ci.get("accuracy"), "%")),
        ("Hit@1", with_ci(rt.get("hit_at_1_rate"), ci.get("hit_at_1_rate"), "%")),
        ("Hit@5", with_ci(rt.get("hit_at_5_rate"), ci.get("hit_at_5_rate"), "%")),
        ("MRR", with_ci(rt.get("mrr"), ci.get("mrr"), nd=3)),
    ]
    return cards


def _charts(section: Mapping[str, Any]) -> list[str]:
    """The rank of the first relevant chunk, and hit@k."""
    rt = _section(section)
    ranks = rt.get("rank_counts") or {}
    return [
        bars(
            "Rank of the first relevant chunk",
            list(ranks),
            list(ranks.values()),
            ylabel="questions",
            counts=True,
            categories=True,
        ),
        curve("hit@k (% of questions)", [(f"k={k}", v) for k, v in (rt.get("hit_at_k_rates") or {}).items()]),
    ]


def _summary(section: Mapping[str, Any]) -> list[str]:
    rt = _section(section)
    return [
        f"retrieval: accuracy (needle retrieved) {fmt(rt['accuracy'], '%')}, hit@1 "
        f"{fmt(rt['hit_at_1_rate'], '%')}, hit@5 {fmt(rt['hit_at_5_rate'], '%')}, MRR "
        f"{fmt(rt['mrr'], nd=3)}; mean LLM grade {fmt(rt['avg_llm_grade'])}, mean total score "
        f"(retrieval and grade) {fmt(rt['avg_total_score'])}, "
        f"total score >= 7: {fmt(rt['pass_rate_7'], '%')}"
    ]


def _counters(result: Result) -> dict[str, float]:
    """Questions, reciprocal ranks, hits at 1 and totals of 7 or more, for progress lines."""
    r = narrowed(result, QuestionResult)
    inc: dict[str, float] = {"questions": 1}
    if r.rank is not None:
        inc["rr_sum"] = 1.0 / r.rank
        if r.rank == 1:
            inc["hit1"] = 1
    if r.total_score is not None and r.total_score >= 7.0:
        inc["pass7"] = 1
    return inc


def _debug(result: Result) -> str:
    r = narrowed(result, QuestionResult)
    return (
        f"question {r.job_id} retrieved={r.retrieved_doc_ids} rank={r.rank} grade={r.llm_grade} "
        f"total={r.total_score} reasoning={(r.llm_reasoning or '')[:300]!r}"
    )


def retrieval_markdown(section: Mapping[str, Any] | None) -> list[str]:
    """The retrieval section as Markdown lines (none without it)."""
    if not section:
        return []
    rt = _section(section)
    ci: RetrievalIntervals = rt.get("ci95") or {}
    rows: list[tuple[str, float | None, Interval, str, int | None]] = [
        ("questions", rt["questions"], None, "", None),
        ("accuracy", rt["accuracy"], ci.get("accuracy"), "%", None),
        ("hit_at_1_rate", rt["hit_at_1_rate"], ci.get("hit_at_1_rate"), "%", None),
        ("hit_at_5_rate", rt["hit_at_5_rate"], ci.get("hit_at_5_rate"), "%", None),
        ("mrr", rt["mrr"], ci.get("mrr"), "", 3),
        ("avg_llm_grade", rt["avg_llm_grade"], ci.get("avg_llm_grade"), "", None),
        ("avg_total_score", rt["avg_total_score"], ci.get("avg_total_score"), "", None),
        ("pass_rate_8", rt["pass_rate_8"], ci.get("pass_rate_8"), "%", None),
        ("pass_rate_7", rt["pass_rate_7"], ci.get("pass_rate_7"), "%", None),
        ("pass_rate_6_5", rt["pass_rate_6_5"], ci.get("pass_rate_6_5"), "%", None),
        ("null", rt["null"], None, "", None),
    ]
    lines = ["", "## Retrieval", "", "| metric | value |", "|---|---:|"]
    lines += [f"| {name} | {fmt_ci(value, ci95, suffix, nd)} |" for name, value, ci95, suffix, nd in rows]
    at_k = ci.get("hit_at_k_rates") or {}
    for k, v in rt["hit_at_k_rates"].items():
        lines.append(f"| hit@{k} | {fmt_ci(v, at_k.get(k), '%')} |")
    return lines


def _texts(obj: Mapping[str, Any]) -> dict[str, str]:
    chunks = obj.get("retrieved") or []
    output = "\n".join(f"[{c.get('doc_id')}] {c.get('text', '')}" for c in chunks if isinstance(c, dict))
    return {"input": str(obj.get("question", "")), "output": output}


QUESTION = JobKind(
    name="question",
    model=QuestionJob,
    result=QuestionResult,
    grades=lambda rubric: rubric.retrieval is not None,
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
    markdown=retrieval_markdown,
    null_fields=lambda ident: {"question_id": ident},
    section="retrieval",
    cards=_cards,
    summary=_summary,
    score_name="LLM grade",
    rates_of="of all questions, on the LLM grade",
    charts=_charts,
    counters=_counters,
    export_columns=("rank", "hit_at_1", "llm_grade", "total_score"),
    rescored=lambda r, overall, rubric, retrieval: question_grade(
        overall, narrowed(r, QuestionResult).rank, rubric, retrieval
    ),
    debug=_debug,
    group_section=lambda shape: RetrievalStats(shape.hit_k),
)

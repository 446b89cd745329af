"""Retrieval metrics: rank, hit@k, MRR and recall@k against ir_measures (pytrec_eval backend),
the position-weighted total score, and the question fields of a graded QuestionJob.

Definitions under test (README, "Retrieval grading"):

* ``rank``: 1-based position of the first retrieved *chunk* whose ``doc_id`` is the needle or a
  relevant doc id; None when none was retrieved; several chunks of one document: the first counts.
* ``hit_at_k``: ``rank is not None and rank <= k``.
* MRR over a run: mean over ALL questions of ``1/rank`` (0 when not found).
* recall@k (not in the product; defined here and checked against ``R@k``):
  ``|relevant ∩ set(first k deduplicated doc ids)| / |relevant|``.

About duplicates: a TREC run cannot hold one doc twice, so two reference runs are built.

* The *chunk-level* run keeps every chunk position: the second and later chunks of a doc are
  renamed to a unique id that is not in the qrels (``d3#dup2``).  Only the first relevant chunk
  matters for RR and Success@k, so this run's ``RR`` gives exactly the product's chunk rank,
  and ``Success@k`` its ``hit_at_k``; it is the run the product is compared with for equality.
* The *deduplicated* run keeps the FIRST occurrence of each doc (the usual TREC conversion); it
  is the run for recall@k.  Its rank is a *document* rank, which equals judgeq's chunk rank
  only when no chunk before the first relevant one repeats an earlier doc; in general
  ``dedup_rank == rank - (number of repeated chunks before rank)``, which is asserted exactly.

ir_measures notes: queries without a run entry are silently left out of ``iter_calc``, so an
empty ranking gets one dummy non-relevant doc (it changes neither RR, Success, nor R), and every
mean is computed here from the per-query values over all questions.  ``RR`` is computed in a
call of its own: with ir_measures 0.4.3 + pytrec_eval, ``RR@k`` is not cut off and asking for
``RR`` and ``RR@k`` together swaps their labels (``test_reference_is_sane`` guards our use).
"""

from __future__ import annotations

import json
import math
import random
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import ir_measures
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from ir_measures import RR, R, Success

from judgeq import (
    JudgeAuthError,
    JudgeReply,
    JudgeRequest,
    QuestionJob,
    Result,
    RetrievalConfig,
    load_rubric,
)
from judgeq.grading.retrieval import first_relevant_rank, hits_at, position_weight, total_score
from judgeq.jobs.kinds import make_result
from judgeq.jobs.question import RetrievalStats
from judgeq.pipeline.job import GradingContext, grade_job
from judgeq.report.aggregate import Aggregator
from judgeq.testing.mock_messages import verdict_for_schema

KS = (1, 3, 5, 10)
RUBRIC = load_rubric("retrieval-relevance")
DUMMY = "__no_retrieval__"
PROVIDER = ir_measures.pytrec_eval
TOL = 1e-9


# ---------------------------------------------------------------------------------------------
# reference side


def dedup(doc_ids: Sequence[str]) -> list[str]:
    """Doc ids in order, keeping the FIRST occurrence of each."""
    return list(dict.fromkeys(doc_ids))


def recall_at_k(doc_ids: Sequence[str], relevant: Iterable[str], k: int) -> float:
    """|relevant ∩ set(first k deduplicated doc ids)| / |relevant| (the documented definition)."""
    rel = set(relevant)
    return len(rel & set(dedup(doc_ids)[:k])) / len(rel)


def chunk_level_ranking(doc_ids: Sequence[str]) -> list[str]:
    """Every chunk position kept; repeated docs renamed to unique ids absent from the qrels."""
    seen: dict[str, int] = {}
    out = []
    for d in doc_ids:
        seen[d] = seen.get(d, 0) + 1
        out.append(d if seen[d] == 1 else f"{d}#dup{seen[d]}")
    return out


def repeats_before(doc_ids: Sequence[str], rank: int) -> int:
    """How many of the chunks before position ``rank`` repeat an earlier doc."""
    return sum(1 for i in range(rank - 1) if doc_ids[i] in doc_ids[:i])


def as_run(rankings: dict[str, list[str]]) -> dict[str, dict[str, float]]:
    """Strictly decreasing scores by position (no ties for pytrec_eval to reorder)."""
    run = {}
    for qid, ranking in rankings.items():
        assert len(set(ranking)) == len(ranking), "a TREC run holds each doc once"
        run[qid] = {d: float(len(ranking) - i) for i, d in enumerate(ranking)} or {DUMMY: 1.0}
    return run


def per_query(measures: list[Any], qrels: dict[str, dict[str, int]], run: dict[str, dict[str, float]]):
    """{qid: {str(measure): value}} for every query of the qrels (fails if one is missing)."""
    out: dict[str, dict[str, float]] = {q: {} for q in qrels}
    for m in PROVIDER.iter_calc(measures, qrels, run):
        out[m.query_id][str(m.measure)] = m.value
    for q, values in out.items():
        assert set(values) == {str(m) for m in measures}, (q, values)
    return out


@dataclass
class Reference:
    rr: dict[str, float]  # chunk-level RR per query
    success: dict[str, dict[int, float]]  # chunk-level Success@k per query
    dedup_rr: dict[str, float]  # document-level RR on the deduplicated run
    recall: dict[str, dict[int, float]]  # R@k on the deduplicated run


def reference(cases: dict[str, tuple[list[str], set[str]]]) -> Reference:
    qrels = {q: dict.fromkeys(rel, 1) for q, (_, rel) in cases.items()}
    chunk_run = as_run({q: chunk_level_ranking(ids) for q, (ids, _) in cases.items()})
    dedup_run = as_run({q: dedup(ids) for q, (ids, _) in cases.items()})
    # RR alone: see the module docstring.
    rr = per_query([RR], qrels, chunk_run)
    succ = per_query([Success @ k for k in KS], qrels, chunk_run)
    drr = per_query([RR], qrels, dedup_run)
    rec = per_query([R @ k for k in KS], qrels, dedup_run)
    return Reference(
        rr={q: v[str(RR)] for q, v in rr.items()},
        success={q: {k: v[str(Success @ k)] for k in KS} for q, v in succ.items()},
        dedup_rr={q: v[str(RR)] for q, v in drr.items()},
        recall={q: {k: v[str(R @ k)] for k in KS} for q, v in rec.items()},
    )


def rank_from_rr(rr: float) -> int | None:
    if rr == 0:
        return None
    rank = round(1 / rr)
    assert 1 / rank == pytest.approx(rr, abs=TOL)
    return rank


# ---------------------------------------------------------------------------------------------
# scripted judge


class ScriptedJudge:
    """Answers by question text: a score (verdict JSON), an exception, or raw text."""

    provider, model = "test", "scripted"

    def __init__(self, answers: dict[str, Any] | None = None, default: Any = 7, pause: float = 0.0) -> None:
        self.answers = answers or {}
        self.default = default
        self.pause = pause
        self.calls = 0

    def complete(self, request: JudgeRequest, *, timeout: float) -> JudgeReply:
        self.calls += 1
        if self.pause:
            time.sleep(self.pause)
        answer = self.answers.get(request.fields["question"], self.default)
        if isinstance(answer, Exception):
            raise answer
        if isinstance(answer, RawText):
            return JudgeReply(text=answer.text, stop_reason="end_turn")
        verdict = verdict_for_schema(request.output_schema, answer)
        return JudgeReply(text=json.dumps(verdict), stop_reason="end_turn", input_tokens=10, output_tokens=5)


@dataclass
class RawText:
    text: str


def make_job(qid: str, doc_ids: Sequence[str], needle: str | None, relevant_ids: list[str] | None, **kw):
    return QuestionJob(
        id=qid,
        question=kw.pop("question", f"question {qid}?"),
        expected_answer=kw.pop("expected_answer", f"answer {qid}"),
        retrieved=[{"doc_id": d, "text": f"text of {d}"} for d in doc_ids],
        needle_doc_id=needle,
        relevant_doc_ids=relevant_ids,
        **kw,
    )


# ---------------------------------------------------------------------------------------------
# generated queries


@dataclass
class Case:
    qid: str
    doc_ids: list[str]
    needle: str | None
    relevant_ids: list[str] | None
    model: str
    answer: Any  # judge score, or an exception

    @property
    def relevant(self) -> set[str]:
        return set(self.relevant_ids or ()) | ({self.needle} if self.needle is not None else set())


UNIVERSE = [f"d{i}" for i in range(14)]


def targets(rng: random.Random, pool: list[str]) -> tuple[str | None, list[str] | None]:
    """needle only, relevant_doc_ids only, or both (possibly overlapping)."""
    style = rng.random()
    chosen = rng.sample(pool, rng.choice([1, 1, 1, 2, 3, 4]))
    if style < 0.4:
        return chosen[0], None
    if style < 0.7:
        return None, chosen
    return chosen[0], chosen[rng.randrange(len(chosen)) :] + rng.sample(pool, 1)


def edge_cases(prefix: str) -> list[tuple[str, list[str], str | None, list[str] | None]]:
    return [
        (f"{prefix}empty", [], "d1", None),
        (f"{prefix}empty-rel", [], None, ["d1", "d2"]),
        (f"{prefix}absent", ["d2", "d3", "d4"], "d1", None),
        (f"{prefix}absent-long", [f"d{i}" for i in range(2, 14)], None, ["d0", "d1"]),
        (f"{prefix}rank1", ["d1", "d2"], "d1", None),
        (f"{prefix}needle-twice", ["d2", "d1", "d3", "d1"], "d1", None),
        (f"{prefix}dup-before-hit", ["d2", "d2", "d3", "d2", "d1"], "d1", None),
        (f"{prefix}dup-before-absent", ["d2", "d2", "d3"], "d1", None),
        (f"{prefix}several-relevant", ["d5", "d4", "d3", "d2", "d1"], "d1", ["d3", "d9"]),
        (f"{prefix}short", ["d5", "d6"], None, ["d6"]),
        (f"{prefix}rank10", [f"d{i}" for i in range(2, 11)] + ["d1"], "d1", None),
        (f"{prefix}rank11", [f"d{i}" for i in range(2, 12)] + ["d1"], "d1", None),
        (f"{prefix}all-same", ["d3"] * 6, "d3", None),
    ]


def generate(seed: int, n: int) -> list[Case]:
    rng = random.Random(seed)
    answers: list[Any] = [*range(1, 11), 15, 0, JudgeAuthError("401 from the scripted judge")]
    cases = [
        Case(qid, ids, needle, rel, f"m{i % 3}", rng.choice(answers))
        for i, (qid, ids, needle, rel) in enumerate(edge_cases(f"s{seed}-"))
    ]
    while len(cases) < n:
        i = len(cases)
        length = rng.choice([0, 1, 2, 3, 4, 5, 6, 8, 10, 12, 15])
        pool = UNIVERSE[: rng.choice([4, 8, 14])]  # small pools give many duplicates
        ids = [rng.choice(pool) for _ in range(length)]
        needle, rel = targets(rng, UNIVERSE if rng.random() < 0.25 else pool)
        cases.append(Case(f"s{seed}-q{i}", ids, needle, rel, f"m{i % 3}", rng.choice(answers)))
    return cases


def grade_all(cases: list[Case]) -> list[Result]:
    judge = ScriptedJudge({f"question {c.qid}?": c.answer for c in cases})
    ctx = GradingContext(rubric=RUBRIC, judge=judge)
    results = [
        grade_job(ctx, make_job(c.qid, c.doc_ids, c.needle, c.relevant_ids, model=c.model), i)
        for i, c in enumerate(cases)
    ]
    assert judge.calls == len(cases)
    return results


def within_rounding(reported: float | None, exact: float, decimals: int) -> bool:
    """``reported`` is ``exact`` rounded to ``decimals`` (half a unit, plus float slack)."""
    assert reported is not None
    return round(reported, decimals) == reported and abs(reported - exact) <= 0.5 * 10**-decimals + TOL


# ---------------------------------------------------------------------------------------------
# 1. differential tests against ir_measures


def test_reference_is_sane() -> None:
    """The reference itself on hand-checked cases (guards against ir_measures quirks)."""
    cases = {
        "a": (["x", "y", "r"], {"r"}),  # rank 3
        "b": ([], {"r"}),  # empty
        "c": (["x", "x", "r", "s"], {"r", "s", "t"}),  # chunk rank 3, doc rank 2
        "d": (["r"], {"r"}),
    }
    ref = reference(cases)
    assert ref.rr == {"a": 1 / 3, "b": 0.0, "c": 1 / 3, "d": 1.0}
    assert ref.dedup_rr == {"a": 1 / 3, "b": 0.0, "c": 0.5, "d": 1.0}
    assert ref.success["a"] == {1: 0.0, 3: 1.0, 5: 1.0, 10: 1.0}
    assert ref.success["b"] == dict.fromkeys(KS, 0.0)
    assert ref.success["c"] == {1: 0.0, 3: 1.0, 5: 1.0, 10: 1.0}
    assert ref.recall["c"] == pytest.approx({1: 0.0, 3: 2 / 3, 5: 2 / 3, 10: 2 / 3}, abs=TOL)
    assert ref.recall["a"] == {1: 0.0, 3: 1.0, 5: 1.0, 10: 1.0}


@pytest.mark.parametrize("seed", [11, 2024, 31337])
def test_per_query_metrics_match_ir_measures(seed: int) -> None:
    cases = generate(seed, 400)
    ref = reference({c.qid: (c.doc_ids, c.relevant) for c in cases})
    results = grade_all(cases)
    seen = {"empty": 0, "absent": 0, "dup_before_hit": 0, "short": 0, "several": 0, "relevant_twice": 0}
    for c, res in zip(cases, results, strict=True):
        rank = first_relevant_rank(c.doc_ids, c.relevant)
        ref_rank = rank_from_rr(ref.rr[c.qid])
        assert rank == ref_rank, c
        # reciprocal rank, unrounded
        assert (0.0 if rank is None else 1.0 / rank) == pytest.approx(ref.rr[c.qid], abs=TOL)
        # hit@k == Success@k
        hits = hits_at(rank, KS)
        assert hits == {str(k): ref.success[c.qid][k] == 1.0 for k in KS}, c
        # the stored result carries the same values
        assert res.rank == rank and res.needle_found is (rank is not None)
        assert res.hit_at_k == hits and res.hit_at_1 is hits["1"] and res.hit_at_5 is hits["5"]
        # deduplicated (TREC) run: document rank == chunk rank minus the repeated chunks before it
        dedup_rank = rank_from_rr(ref.dedup_rr[c.qid])
        if rank is None:
            assert dedup_rank is None
        else:
            assert dedup_rank == rank - repeats_before(c.doc_ids, rank), c
            assert first_relevant_rank(dedup(c.doc_ids), c.relevant) == dedup_rank
        # recall@k: our documented definition == R@k
        for k in KS:
            assert recall_at_k(c.doc_ids, c.relevant, k) == pytest.approx(ref.recall[c.qid][k], abs=TOL), c
        # coverage of the edge cases
        seen["empty"] += not c.doc_ids
        seen["absent"] += bool(c.doc_ids) and rank is None
        seen["dup_before_hit"] += rank is not None and repeats_before(c.doc_ids, rank) > 0
        seen["short"] += 0 < len(c.doc_ids) < 10
        seen["several"] += len(c.relevant) > 1
        seen["relevant_twice"] += any(c.doc_ids.count(d) > 1 for d in c.relevant)
    assert all(v >= 10 for v in seen.values()), seen


@pytest.mark.parametrize("seed", [11, 2024, 31337])
def test_run_aggregates_match_ir_measures(seed: int) -> None:
    cases = generate(seed, 400)
    ref = reference({c.qid: (c.doc_ids, c.relevant) for c in cases})
    results = grade_all(cases)
    agg = Aggregator(hit_k=KS)
    for r in results:
        agg.add(r)
    report = agg.report(judge_model="scripted")

    def check(retrieval: dict[str, Any], group: list[Case], stats: RetrievalStats | None) -> None:
        n = len(group)
        rrs = [ref.rr[c.qid] for c in group]
        mrr = math.fsum(rrs) / n  # over ALL questions, a miss counting 0
        assert retrieval["questions"] == n
        assert within_rounding(retrieval["mrr"], mrr, 6), (retrieval["mrr"], mrr)
        if stats is not None:
            assert stats.rr_sum / stats.n == pytest.approx(mrr, abs=TOL)
        for k in KS:
            count = sum(int(ref.success[c.qid][k]) for c in group)
            assert retrieval["hit_at_k_rates"][str(k)] == round(100.0 * count / n, 2)
            assert within_rounding(retrieval["hit_at_k_rates"][str(k)], 100.0 * count / n, 2)
        assert retrieval["hit_at_1_rate"] == retrieval["hit_at_k_rates"]["1"]
        assert retrieval["hit_at_5_rate"] == retrieval["hit_at_k_rates"]["5"]
        found = sum(ref.rr[c.qid] > 0 for c in group)
        assert within_rounding(retrieval["accuracy"], 100.0 * found / n, 2)
        # grades: averages over non-null grades, pass rates over all questions
        by_qid = {r.question_id: r for r in results}
        grades = [by_qid[c.qid].llm_grade for c in group]
        totals = [by_qid[c.qid].total_score for c in group]
        graded = [g for g in grades if g is not None]
        assert retrieval["null"] == n - len(graded)
        assert within_rounding(retrieval["coverage"], 100.0 * len(graded) / n, 2)
        assert within_rounding(retrieval["avg_llm_grade"], math.fsum(graded) / len(graded), 4)
        scored = [t for t in totals if t is not None]
        assert within_rounding(retrieval["avg_total_score"], math.fsum(scored) / len(scored), 4)
        for name, t in (("pass_rate_8", 8.0), ("pass_rate_7", 7.0), ("pass_rate_6_5", 6.5)):
            assert within_rounding(retrieval[name], 100.0 * sum(s >= t for s in scored) / n, 2)

    check(report["retrieval"], cases, agg.run.sections.get("question"))  # type: ignore[arg-type]
    by_model = report["retrieval"]["by_model"]
    assert set(by_model) == {"m0", "m1", "m2"}
    for model, retrieval in by_model.items():
        check(retrieval, [c for c in cases if c.model == model], agg.by_model[model].sections.get("question"))  # type: ignore[arg-type]


def test_mrr_denominator_is_all_questions() -> None:
    """Two questions, one found at rank 2 and one not found: MRR 0.25, not 0.5."""
    cases = [Case("a", ["x", "r"], "r", None, "m", 9), Case("b", ["x"], "r", None, "m", 9)]
    agg = Aggregator()
    for r in grade_all(cases):
        agg.add(r)
    retrieval = agg.report(judge_model="scripted")["retrieval"]
    ref = reference({c.qid: (c.doc_ids, c.relevant) for c in cases})
    assert retrieval["mrr"] == 0.25 == math.fsum(ref.rr.values()) / 2
    assert retrieval["hit_at_k_rates"] == {"1": 0.0, "3": 50.0, "5": 50.0, "10": 50.0}
    assert retrieval["accuracy"] == 50.0


doc_lists = st.lists(st.sampled_from(UNIVERSE[:6]), max_size=14)


@given(
    doc_ids=doc_lists,
    needle=st.none() | st.sampled_from(UNIVERSE[:8]),
    relevant_ids=st.lists(st.sampled_from(UNIVERSE[:8]), max_size=4),
)
@settings(max_examples=300, deadline=None)
def test_single_query_property(doc_ids: list[str], needle: str | None, relevant_ids: list[str]) -> None:
    if needle is None and not relevant_ids:
        relevant_ids = ["d0"]
    job = make_job("q", doc_ids, needle, relevant_ids or None)
    fields = job.result_fields(None, RetrievalConfig())
    ref = reference({"q": (doc_ids, set(job.relevant))})
    rank = rank_from_rr(ref.rr["q"])
    assert fields["rank"] == rank == first_relevant_rank(doc_ids, job.relevant)
    assert fields["needle_found"] is (rank is not None)
    assert fields["hit_at_k"] == {str(k): ref.success["q"][k] == 1.0 for k in KS}
    assert fields["hit_at_1"] is fields["hit_at_k"]["1"] and fields["hit_at_5"] is fields["hit_at_k"]["5"]
    for k in KS:
        assert recall_at_k(doc_ids, job.relevant, k) == pytest.approx(ref.recall["q"][k], abs=TOL)


# ---------------------------------------------------------------------------------------------
# 2. total score, hand-checked


DEFAULT = RetrievalConfig()


@pytest.mark.parametrize(
    ("grade", "rank", "expected"),
    [
        (10, 1, 10.0),
        (10, 2, 9.5),
        (10, 3, 9.5),
        (10, 4, 8.5),
        (10, 5, 8.5),
        (10, None, 6.0),
        (10, 6, 6.0),
        (10, 100, 6.0),
        (9, 5, 7.65),  # 9 x 0.85 = 7.6499999… in binary, reported 7.65
        (7, 2, 6.65),
        (1, 1, 1.0),
        (3, None, 1.8),
    ],
)
def test_total_score_default_weights(grade: int, rank: int | None, expected: float) -> None:
    assert total_score(grade, rank, DEFAULT) == expected


def test_total_score_null_grade() -> None:
    assert total_score(None, 1, DEFAULT) is None
    assert total_score(None, None, DEFAULT) is None


def test_total_score_custom_weights() -> None:
    cfg = RetrievalConfig(position_weights={"1": 1.0, "2-10": 0.5}, default_weight=0.1)
    assert total_score(10, 1, cfg) == 10.0
    assert total_score(10, 2, cfg) == 5.0
    assert total_score(10, 10, cfg) == 5.0
    assert total_score(10, 11, cfg) == 1.0
    assert total_score(10, None, cfg) == 1.0
    assert total_score(7, 4, cfg) == 3.5
    assert total_score(7, 11, cfg) == 0.7
    assert total_score(None, 2, cfg) is None
    assert [position_weight(r, cfg) for r in (1, 2, 10, 11, None)] == [1.0, 0.5, 0.5, 0.1, 0.1]


def test_total_score_uses_the_context_weights_end_to_end() -> None:
    cfg = RetrievalConfig(position_weights={"1": 1.0, "2-10": 0.5}, default_weight=0.1)
    ctx = GradingContext(rubric=RUBRIC, judge=ScriptedJudge(default=8), retrieval=cfg)
    res = grade_job(ctx, make_job("q", ["x", "n"], "n", None), 0)
    assert (res.rank, res.llm_grade, res.total_score) == (2, 8, 4.0)
    res = grade_job(ctx, make_job("q", ["x"], "n", None), 1)
    assert (res.rank, res.llm_grade, res.total_score) == (None, 8, 0.8)


# ---------------------------------------------------------------------------------------------
# 3. question fields of a graded QuestionJob


LINE_KEYS = {
    "question_id",
    "question",
    "expected_answer",
    "needle_found",
    "rank",
    "hit_at_1",
    "hit_at_5",
    "llm_grade",
    "llm_reasoning",
    "total_score",
    "latency_ms",
    "grading_latency_ms",
}


def grade_one(job: QuestionJob, answer: Any, **ctx_kw: Any) -> Result:
    judge = ScriptedJudge(default=answer, pause=ctx_kw.pop("pause", 0.0))
    return grade_job(GradingContext(rubric=RUBRIC, judge=judge, **ctx_kw), job, 0)


@pytest.mark.parametrize(
    ("doc_ids", "rank", "hits", "total"),
    [
        (["n", "a", "b"], 1, (True, True, True, True), 9.0),
        (["a", "b", "n"], 3, (False, True, True, True), 8.55),
        (["a", "b", "c", "d", "n"], 5, (False, False, True, True), 7.65),
        (["a", "b", "c", "d", "e", "n"], 6, (False, False, False, True), 5.4),
        ([f"x{i}" for i in range(10)] + ["n"], 11, (False,) * 4, 5.4),
        (["a", "b"], None, (False,) * 4, 5.4),
        ([], None, (False,) * 4, 5.4),
    ],
)
def test_question_fields_end_to_end(
    doc_ids: list[str], rank: int | None, hits: tuple[bool, ...], total: float
) -> None:
    job = make_job("q-42", doc_ids, "n", None, latency_ms=123.4, model="rag-v2")
    res = grade_one(job, 9, pause=0.02)
    assert res.status == "graded" and res.kind == "question"
    assert res.question_id == "q-42" and res.job_id == "q-42" and res.model == "rag-v2"
    assert res.needle_found is (rank is not None)
    assert res.rank == rank
    assert res.hit_at_k == dict(zip(("1", "3", "5", "10"), hits, strict=True))
    assert (res.hit_at_1, res.hit_at_5) == (hits[0], hits[2])
    assert res.llm_grade == 9 and type(res.llm_grade) is int
    assert res.total_score == total
    assert res.latency_ms == 123.4
    assert res.grading_latency_ms >= 20.0 and round(res.grading_latency_ms, 1) == res.grading_latency_ms
    assert res.retrieved_doc_ids == doc_ids
    line = res.to_line()
    assert set(line) >= LINE_KEYS
    assert line["question"] == "question q-42?" and line["expected_answer"] == "answer q-42"
    assert line["llm_reasoning"] == "mock reasoning" and line["latency_ms"] == 123.4
    assert line["hit_at_k"] == res.hit_at_k
    assert json.loads(json.dumps(line)) == line


def test_relevant_doc_ids_and_needle_both_count() -> None:
    job = make_job("q", ["a", "r2", "n"], "n", ["r1", "r2"])
    res = grade_one(job, 10)
    assert (res.rank, res.hit_at_1, res.total_score) == (2, False, 9.5)
    job = make_job("q", ["a", "b", "r1"], None, ["r1"])
    assert grade_one(job, 10).rank == 3


def test_several_chunks_of_one_document_first_counts() -> None:
    res = grade_one(make_job("q", ["a", "n", "n", "b"], "n", None), 10)
    assert res.rank == 2 and res.total_score == 9.5
    # chunk positions, not document positions: a repeated non-relevant doc still takes a place
    res = grade_one(make_job("q", ["a", "a", "n"], "n", None), 10)
    assert res.rank == 3


def test_judge_score_above_the_scale_is_clamped() -> None:
    res = grade_one(make_job("q", ["n"], "n", None), 15)
    assert res.status == "graded"
    assert res.llm_grade == 10 and type(res.llm_grade) is int
    assert res.total_score == 10.0
    assert "clamped" in res.flags
    res = grade_one(make_job("q", ["a", "n"], "n", None), 15)
    assert (res.llm_grade, res.total_score) == (10, 9.5)


def test_judge_failure_gives_null_grade() -> None:
    job = make_job("q-fail", ["a", "n"], "n", None, latency_ms=50.0)
    res = grade_one(job, JudgeAuthError("401 bad key"))
    assert res.status == "null" and res.null_reason == "auth_error"
    assert res.llm_grade is None and res.total_score is None and res.llm_reasoning is None
    # the retrieval fields do not depend on the judge
    assert (res.question_id, res.rank, res.needle_found, res.hit_at_1, res.hit_at_5) == (
        "q-fail",
        2,
        True,
        False,
        True,
    )
    assert res.hit_at_k == {"1": False, "3": True, "5": True, "10": True}
    assert res.latency_ms == 50.0 and res.attempts == 1
    line = res.to_line()
    assert set(line) >= LINE_KEYS
    assert line["llm_grade"] is None and line["total_score"] is None and line["status"] == "null"


def test_unparseable_verdict_gives_null_grade() -> None:
    res = grade_one(make_job("q", ["n"], "n", None), RawText("I cannot grade this."))
    assert res.status == "null" and res.null_reason is not None
    assert res.llm_grade is None and res.total_score is None
    assert res.rank == 1 and res.hit_at_1 is True


def test_latency_ms_absent_stays_none() -> None:
    res = grade_one(make_job("q", ["n"], "n", None), 8)
    assert res.latency_ms is None and res.to_line()["latency_ms"] is None


def test_custom_hit_k_keys() -> None:
    cfg = RetrievalConfig(hit_k=[20, 2, 2])
    res = grade_one(make_job("q", ["a", "b", "c", "n"], "n", None), 8, retrieval=cfg)
    assert res.hit_at_k == {"2": False, "20": True}
    assert (res.hit_at_1, res.hit_at_5) == (False, True)  # always present


def test_response_line_has_no_question_fields() -> None:
    res = grade_one(make_job("q", ["n"], "n", None), 8)
    # the same result as a response's (a kind's results are its own class: a response's has none
    # of a question's fields, and none is written)
    common = {k: v for k, v in res.model_dump().items() if k in Result.model_fields and k != "kind"}
    response = make_result(**common)
    assert type(response) is Result and response.kind == "response"
    assert not (LINE_KEYS - {"grading_latency_ms"}) & set(response.to_line())
    assert set(res.to_line()) >= LINE_KEYS

"""Every registered kind of job holds the same contract (issue 30, point 8): its sample line is
recognised as it and validates, its suggested rubric grades it, a rubric that grades it is told
as such, its texts for a report's table are strings; graded through the kind protocol alone
(calls, result, null, its report section, export, live counters). A new kind is tested by
registering it. Outside judgeq/jobs/, no product module branches on a kind."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from judgeq import JudgeReply, JudgeRequest, builtin_names, load_rubric
from judgeq.grading.result import Result
from judgeq.jobs.kinds import DEFAULT, KINDS, infer_kind, kind_for, make_result, read_result, texts_of
from judgeq.jobs.models import JOB_MODELS
from judgeq.pipeline.job import GradingContext, call_count, grade_job, job_calls, null_result
from judgeq.report.aggregate import Aggregator
from judgeq.rubric.model import RetrievalConfig
from judgeq.store.base import live_increments
from judgeq.store.packing import deflate, pack_result, packing_dictionary, unpack_result
from judgeq.store.runfolder import EXPORT_FIXED, export_row
from judgeq.testing.fake_anthropic import generate_from_schema


@pytest.mark.parametrize("name", sorted(KINDS))
def test_each_kind_keeps_the_registrys_contract(name: str) -> None:
    kind = KINDS[name]
    sample = dict(kind.sample)
    assert infer_kind(sample) == name, "an untagged sample line is recognised as its kind"
    assert infer_kind({**sample, "kind": name}) == name
    job = JOB_MODELS[name].model_validate(sample)
    assert job.kind == name and JOB_MODELS[name] is kind.model
    assert kind_for(load_rubric(kind.rubric)) is kind, "the suggested built-in grades this kind"
    assert kind.rubric_is and kind.rubric_with
    texts = texts_of(sample)
    assert set(texts) >= {"input", "output"} and all(isinstance(v, str) for v in texts.values())
    assert texts["input"], "the table shows what the job was about"
    assert (kind.marks == ()) is (kind is DEFAULT), "every kind but the default is recognised by its fields"


@pytest.mark.parametrize("name", builtin_names())
def test_each_rubric_grades_one_kind_which_the_kind_itself_says(name: str) -> None:
    """Which kind a rubric grades is each kind's own rule (JobKind.grades): at most one kind
    claims a rubric (none: the default kind), and the registry asks them."""
    rubric = load_rubric(name)
    claims = [k for k in KINDS.values() if k.grades(rubric)]
    assert len(claims) <= 1, (name, [k.name for k in claims])
    assert kind_for(rubric) is (claims[0] if claims else DEFAULT)
    assert DEFAULT.grades(rubric) is False, "the default kind claims no rubric: it is what is left"


def test_an_untagged_line_of_no_kinds_fields_is_the_default_and_an_unknown_kind_shows_no_text() -> None:
    assert infer_kind({"id": "x"}) == DEFAULT.name
    assert infer_kind({"kind": "essay"}) == "essay"
    assert texts_of({"kind": "essay"}) == {"input": "", "output": ""}


# -- the grading and report seam (issue 30, point 8) ----------------------------------------

DICTIONARY = packing_dictionary({"rubric_name": "r"}, [])
COMMON = {
    "job_id": "j",
    "index": 0,
    "status": "graded",
    "rubric_name": "r",
    "rubric_version": "1",
    "judge_model": "m",
}


@pytest.mark.parametrize("name", sorted(KINDS))
def test_a_kinds_results_are_its_own_class_and_hold_only_its_fields(name: str) -> None:
    """A result of a kind is its kind's class (every result's fields, and its own); a field of
    another kind is refused, never kept; a stored line is read back as its kind's class."""
    kind = KINDS[name]
    result = make_result(kind=name, **COMMON)
    assert type(result) is kind.result and issubclass(kind.result, Result)
    assert result.kind == name == read_result(json.dumps(result.to_line())).kind
    others = {f for k in KINDS.values() for f in k.result.model_fields} - set(kind.result.model_fields)
    for field in sorted(others):
        with pytest.raises(ValueError, match=field):
            make_result(kind=name, **COMMON, **{field: None})


FLAT = Path(__file__).resolve().parents[1] / "fixtures" / "results" / "flat_before_kinds.jsonl"


def test_results_stored_before_each_kind_had_its_class_read_as_their_kinds() -> None:
    """The flat form of before (every kind's fields, other kinds' null), as Redis holds it in
    plain JSON for a week: read as its kind's class, every value it had kept; a non-null value of
    another kind's field is still refused."""
    lines = FLAT.read_text(encoding="utf-8").splitlines()
    assert {json.loads(line)["kind"] for line in lines} == set(KINDS)
    for line in lines:
        old = json.loads(line)
        for read in (read_result(line), unpack_result(line.encode(), DICTIONARY)):
            assert type(read) is KINDS[old["kind"]].result
            assert {k: v for k, v in old.items() if v is not None} == {
                k: v for k, v in read.model_dump(mode="json").items() if v is not None
            }
    response = json.loads(next(line for line in lines if '"kind":"response"' in line))
    with pytest.raises(ValueError, match="winner"):
        read_result(json.dumps({**response, "winner": "a"}))


def test_a_packed_result_without_its_kind_is_the_default_kinds() -> None:
    """Packed entries leave out fields at their defaults: a response's ``kind`` was one."""
    result = make_result(**COMMON, notes="fine")
    blob = deflate(json.dumps({**COMMON, "notes": "fine"}).encode(), DICTIONARY)
    again = unpack_result(blob, DICTIONARY)
    assert (type(again), again.to_line()) == (DEFAULT.result, result.to_line())


def test_every_exported_column_is_a_results_field_or_a_kinds_own() -> None:
    own = {c for k in KINDS.values() for c in k.export_columns}
    assert set(EXPORT_FIXED) <= set(Result.model_fields) | own
    pair = make_result(kind="pair", **COMMON, winner="a", model_b="m2")
    row, plain = export_row(pair), export_row(make_result(**COMMON))
    assert list(row)[: len(EXPORT_FIXED)] == list(plain)[: len(EXPORT_FIXED)] == list(EXPORT_FIXED)
    assert (row["winner"], row["model_b"], plain["winner"], plain["model_b"]) == ("a", "m2", None, None)


def test_a_stored_result_of_an_unknown_kind_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="essay"):
        read_result(json.dumps({**COMMON, "kind": "essay"}))
    with pytest.raises(KeyError):
        make_result(kind="essay", **COMMON)
    untagged = read_result(json.dumps(COMMON))  # a line of before kinds: the default kind's
    assert type(untagged) is DEFAULT.result and untagged.kind == DEFAULT.name


class SchemaJudge:
    """Answers every request with a verdict made from its output schema (deterministic in the
    request's text): a judge for any rubric."""

    provider = "inhouse"

    def __init__(self, model: str = "schema-judge") -> None:
        self.model = model

    def complete(self, request: JudgeRequest, *, timeout: float) -> JudgeReply:
        verdict = generate_from_schema(request.output_schema, request.user, seed=self.model)
        return JudgeReply(
            tool_input=verdict, input_tokens=10, output_tokens=5, model=self.model, stop_reason="tool_use"
        )


def _context(name: str, judges: int) -> GradingContext:
    rubric = load_rubric(KINDS[name].rubric)
    council = tuple((SchemaJudge(f"judge-{i}"), None) for i in range(1, judges))
    return GradingContext(rubric=rubric, judge=SchemaJudge(), council=council)


@pytest.mark.parametrize("judges", [1, 2])
@pytest.mark.parametrize("name", sorted(KINDS))
def test_each_kind_grades_through_the_protocol_alone(name: str, judges: int) -> None:
    """A kind's sample graded by one judge and by a council: its calls are judges x its units
    (the one rule, asked by the calls made, the count and the dry run alike), its result and its
    null carry its kind and fields, its section of the report is there and prints."""
    kind = KINDS[name]
    ctx = _context(name, judges)
    job = JOB_MODELS[name].model_validate(dict(kind.sample))
    units = job.units(ctx.rubric, swap=ctx.swap)
    calls = job_calls(ctx, job)
    assert len(calls) == call_count(ctx, job) == judges * len(units) >= judges
    assert [c.unit for c in calls] == list(units) * judges
    assert {c.judge for c in calls} == set(range(judges))
    result = grade_job(ctx, job, 0)
    assert (result.status, result.kind, result.job_id) == ("graded", name, job.id), result.raw
    assert result.attempts == len(calls)
    assert result.input_key == job.input_key()
    assert (result.judge_scores is not None) is (judges > 1), "a council keeps each judge's score"
    for key, value in job.result_fields(ctx.rubric, RetrievalConfig()).items():
        assert getattr(result, key) == value, key
    null = null_result(index=1, reason="timeout", why="slow", job=job, rubric=ctx.rubric)
    assert (null.kind, null.status, null.input_key) == (name, "null", result.input_key)
    gone = null_result(index=2, reason="lost", why="gone", job_id="g", kind=name)
    assert gone.kind == name and all(getattr(gone, k) == v for k, v in kind.null_fields("g").items())

    agg = Aggregator(
        dimensions=[d.name for d in ctx.rubric.dimensions],
        pass_fail=ctx.rubric.is_pass_fail,
        scale=ctx.rubric.scale,
        judges=[j.model for j, _ in ctx.judges],
    )
    for r in (result, null):
        agg.add(r)
    report = agg.report(judge_model=ctx.judge.model)
    assert report["counts"]["total"] == 2 and report["counts"]["graded"] == 1
    if kind.section is not None:
        assert kind.section in report, "a kind with a section reports it"
        if kind.markdown is not None:
            lines = kind.markdown(report[kind.section])
            assert any(line.startswith("## ") for line in lines)
            assert not any("None" in line or "nan" in line for line in lines), lines
    assert ("by_model" in report) is (kind.by_model and result.model is not None)
    assert type(result) is type(null) is type(gone) is kind.result, "each of its results is its kind's class"
    for r in (result, null, gone):  # stored and read back (a line, Redis's packed form): the same
        assert type(read_result(json.dumps(r.to_line()))) is kind.result
        again = unpack_result(pack_result(r, DICTIONARY), DICTIONARY)
        assert (type(again), again.to_line()) == (kind.result, r.to_line())
    row = export_row(result)
    assert all(row[k] == v for k, v in kind.export(result).items())
    counters = live_increments(result)
    assert all(counters[k] == v for k, v in kind.counters(result).items())


def test_a_kinds_section_is_fed_its_own_results_only() -> None:
    """Every kind's results in one report: each section counts only its kind's (a pair's
    results never reach the retrieval section, a question's never the conversation one)."""
    agg = Aggregator(scale="1-10", hit_k=(1, 3))
    results = []
    for i, name in enumerate(sorted(KINDS)):
        ctx = _context(name, 1)
        job = JOB_MODELS[name].model_validate({**KINDS[name].sample, "id": f"j{i}"})
        results.append(grade_job(ctx, job, i))
    for r in results:
        agg.add(r)
    report = agg.report(judge_model="schema-judge")
    assert report["retrieval"]["questions"] == 1
    assert report["conversation"]["jobs"] == 1
    assert "pairwise" not in report, "a pairwise section belongs to a pairwise rubric's run"


KIND_WORDS = {*KINDS, *(k.model.__name__ for k in KINDS.values())}
SECTION_KEYS = {k.section for k in KINDS.values() if k.section}
KIND_FIELDS = {
    f
    for k in KINDS.values()
    for model in (k.model, k.result)
    for f in model.model_fields
    if f not in DEFAULT.model.model_fields and f not in Result.model_fields
} - {"kind", "question", "messages", "tools", "reference", "checks", "retrieved", "latency_ms"}
"""Fields only some kinds' jobs or results have (a pair's ``winner``, a question's ``rank``);
names that are words elsewhere too (a rubric's ``checks``) are left to the other scans."""
SEAM_EXCEPTIONS = {
    # the rubric format's own vocabulary: ``job: conversation`` and a conversation rubric's fields
    # (checks, scope, goldens with messages), checked where a rubric is read, below the kinds
    # (which kind a rubric grades is each kind's JobKind.grades)
    "judgeq/rubric/model.py",
}


def _constants(node: ast.AST) -> list[str]:
    """The strings a node is or holds (a tuple, list or set of them)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return [s for e in node.elts for s in _constants(e)]
    return []


def _kind_branches(tree: ast.AST) -> list[tuple[int, str]]:
    """Where code branches on a kind: a comparison (==, in) with a kind's name, a match case on
    one, isinstance on a kind's model, or a kind's report section read by its key."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            for side in (node.left, *node.comparators):
                found += [(node.lineno, f"compares with {c!r}") for c in _constants(side) if c in KIND_WORDS]
        elif isinstance(node, ast.MatchValue):
            found += [(node.lineno, f"matches {c!r}") for c in _constants(node.value) if c in KIND_WORDS]
        elif isinstance(node, ast.Call) and getattr(node.func, "id", None) == "isinstance":
            names = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
            found += [(node.lineno, f"isinstance on {n}") for n in sorted(names & KIND_WORDS)]
        elif isinstance(node, ast.Attribute) and node.attr in KIND_FIELDS and isinstance(node.ctx, ast.Load):
            found.append((node.lineno, f"reads a kind's own field .{node.attr}"))
        elif isinstance(node, ast.Subscript):
            found += [(node.lineno, f"reads [{c!r}]") for c in _constants(node.slice) if c in SECTION_KEYS]
        elif isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "get" and node.args:
            found += [
                (node.lineno, f"reads .get({c!r})") for c in _constants(node.args[0]) if c in SECTION_KEYS
            ]
    return found


def test_outside_the_kinds_package_no_product_module_branches_on_a_kind() -> None:
    """No comparison or match with a kind's name, no isinstance on a kind's model and no read of
    a kind's report section by its key outside judgeq/jobs/ (each kind's module and the
    registry), but in the exceptions listed, which say why."""
    root = Path(__file__).resolve().parents[2]
    found = []
    paths = [*root.glob("judgeq/**/*.py"), *root.glob("producer/**/*.py"), *root.glob("workers/**/*.py")]
    for path in sorted(paths):
        rel = path.relative_to(root).as_posix()
        if rel.startswith(("judgeq/jobs/", "judgeq/testing/")) or rel in SEAM_EXCEPTIONS:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        found += [f"{rel}:{line}: {what}" for line, what in _kind_branches(tree)]
    assert found == []


@pytest.mark.parametrize(
    "code",
    [
        'if job.kind == "pair": pass',
        'if kind in ("question", "pair"): pass',
        'match kind:\n    case "conversation": pass',
        "if isinstance(job, PairJob): pass",
        'x = report["retrieval"]',
        'x = report.get("pairwise")',
        "x = r.winner",
        "x = result.turn_scores",
    ],
)
def test_the_scan_finds_each_way_of_branching_on_a_kind(code: str) -> None:
    assert _kind_branches(ast.parse(code)), code


@pytest.mark.parametrize("swap", [True, False])
@pytest.mark.parametrize("name", sorted(KINDS))
def test_the_fewest_calls_a_run_sizes_by_are_its_kinds_own(name: str, swap: bool) -> None:
    """call_count without a job (the batch lane's sizes) asks the run's kind: never more than a
    job of it that a judge grades makes."""
    ctx = _context(name, 2)
    ctx.swap = swap
    job = JOB_MODELS[name].model_validate(dict(KINDS[name].sample))
    assert 2 <= call_count(ctx) <= call_count(ctx, job)
    assert call_count(ctx) == 2 * KINDS[name].least_units(swap)

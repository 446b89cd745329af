"""Rubric files: loading, validation errors, resolution and weight overrides."""

from __future__ import annotations

from pathlib import Path

import pytest

from judgeq import RubricError, builtin_names, load_rubric, parse_rubric
from judgeq.errors import ConfigError
from judgeq.rubric.model import is_path_ref, parse_weights, resolve_rubric_path, weights_from_env

FIX = Path(__file__).parent.parent / "fixtures" / "rubrics"

REQUIRED_BUILTINS = {
    "quality",
    "retrieval-relevance",
    "groundedness",
    "helpfulness",
    "instruction-following",
    "refusal-correctness",
    "tool-use-appropriateness",
}


def rubric_text(front: str, body: str = "Grade it.") -> str:
    return f"---\n{front}\n---\n{body}\n"


BASE = "name: r\nversion: 1.0.0\nscale: 1-10\ndescription: d"


def test_builtin_library_is_complete_and_valid() -> None:
    names = set(builtin_names())
    assert names >= REQUIRED_BUILTINS
    for name in names:
        r = load_rubric(name)
        assert r.name == name
        assert r.source == f"builtin:{name}"
        outcomes = {
            g.expected if r.is_pass_fail or r.is_pairwise else g.expected >= (r.threshold or 0)  # type: ignore[operator]
            for g in r.goldens
        }
        assert len(outcomes) == (3 if r.is_pairwise else 2), f"{name}: goldens must cover every outcome"


def test_quality_rubric_matches_spec() -> None:
    q = load_rubric("quality")
    assert q.scale == "1-10"
    assert q.weights == {
        "accuracy": 0.35,
        "relevance": 0.10,
        "completeness": 0.20,
        "conciseness": 0.15,
        "clarity": 0.20,
    }
    for d in q.dimensions:
        assert set(d.anchors) == {"9-10", "7-8", "5-6", "3-4", "1-2"}, d.name
    assert q.ceiling is not None and q.ceiling.dimension == "accuracy"
    assert sorted((r.below, r.cap) for r in q.ceiling.rules) == [(5, 4.0), (7, 7.0)]


def test_retrieval_relevance_has_retrieval_config() -> None:
    r = load_rubric("retrieval-relevance")
    assert r.retrieval is not None
    assert r.retrieval.position_weights == {"1": 1.0, "2-3": 0.95, "4-5": 0.85}
    assert r.retrieval.default_weight == 0.6


def test_minimal_passfail_form_loads_unchanged() -> None:
    r = load_rubric(str(FIX / "minimal-passfail.md"))
    assert r.scale == "pass-fail" and r.version == "0.3.1"
    assert "submit_grade" in r.body
    assert [g.expected for g in r.goldens] == ["pass", "fail"]


@pytest.mark.parametrize(
    ("fixture", "expected"),
    [
        ("weights-0.9.md", "dimensions: dimension weights sum to 0.9000"),
        ("object-tag.md", "frontmatter: invalid YAML"),
        ("broken-frontmatter.md", "frontmatter: invalid YAML (frontmatter line"),
        ("bad-semver.md", "version: 'v1.2' is not semver"),
        ("unknown-scale.md", "scale: Input should be 'pass-fail', 'pairwise', '1-5' or '1-10'"),
        ("negative-weight.md", "dimensions.clarity.weight: weight must be a non-negative number"),
        ("no-frontmatter.md", "frontmatter: the file must start with a '---' line"),
        ("empty-body.md", "body: must not be empty"),
    ],
)
def test_invalid_rubric_files_give_one_clear_line(fixture: str, expected: str) -> None:
    path = FIX / fixture
    with pytest.raises(RubricError) as info:
        load_rubric(str(path))
    message = str(info.value)
    first = message.splitlines()[0]
    assert first.startswith(f"{path}: "), message
    assert expected in message, message
    assert "Traceback" not in message


def test_object_tag_is_never_constructed(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    text = rubric_text(
        f"name: x\nversion: 1.0.0\nscale: pass-fail\n"
        f'description: !!python/object/apply:os.system ["touch {marker}"]'
    )
    with pytest.raises(RubricError, match="could not determine a constructor"):
        parse_rubric(text, "evil.md")
    assert not marker.exists()


@pytest.mark.parametrize(
    ("front", "expected"),
    [
        (BASE.replace("name: r\n", ""), "name: required field is missing"),
        (BASE + "\npass_treshold: 7", "pass_treshold: unknown field"),
        (BASE + "\npass_threshold: 11", "pass_threshold: 11.0 is outside the scale 1-10"),
        (
            "name: r\nversion: 1.0.0\nscale: pass-fail\ndescription: d\npass_threshold: 0.5",
            "pass_threshold: a pass-fail rubric has no threshold",
        ),
        (
            BASE + "\ndimensions:\n  - {name: a, weight: 1.0, anchors: {'9-12': x}}",
            "dimensions.a.anchors: band '9-12' is not within the scale 1-10",
        ),
        (
            BASE + "\ndimensions:\n  - {name: a, weight: 0.5}\n  - {name: a, weight: 0.5}",
            "dimensions: duplicate name 'a'",
        ),
        (
            BASE + "\ndimensions:\n  - {name: a, weight: 1.0}\nceiling: {dimension: b, rules: "
            "[{below: 5, cap: 4}]}",
            "ceiling.dimension: 'b' is not a dimension",
        ),
        (
            BASE + "\ngoldens:\n  - {name: g, input: i, output: o, expected: pass}",
            "goldens.g.expected: must be a number from 1 to 10",
        ),
        ("- just\n- a list", "frontmatter: must be a YAML mapping"),
        (BASE + "\nversion: 2.0.0", "invalid YAML"),
    ],
)
def test_field_errors_name_the_field(front: str, expected: str) -> None:
    with pytest.raises(RubricError) as info:
        parse_rubric(rubric_text(front), "f.md")
    assert expected in str(info.value)
    assert all(line.startswith("f.md: ") for line in str(info.value).splitlines())


@pytest.mark.parametrize(
    ("total", "ok"),
    [(1.0, True), (1.0009, True), (0.9991, True), (1.0011, False), (0.9989, False), (0.9, False)],
)
def test_weight_sum_tolerance(total: float, ok: bool) -> None:
    front = BASE + f"\ndimensions:\n  - {{name: a, weight: {total - 0.5!r}}}\n  - {{name: b, weight: 0.5}}"
    if ok:
        parse_rubric(rubric_text(front), "f.md")
    else:
        with pytest.raises(RubricError, match=f"sum to {total:.4f}"):
            parse_rubric(rubric_text(front), "f.md")


# -- resolution ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("ref", "is_path"),
    [
        ("quality", False),
        ("quality.md", True),
        ("./quality", True),
        ("/abs/x", True),
        ("~/x.md", True),
        ("~name", True),
        ("dir/x", True),
        ("a\\b", True),
        ("retrieval-relevance", False),
    ],
)
def test_reference_kinds(ref: str, is_path: bool) -> None:
    assert is_path_ref(ref) is is_path


def test_tilde_slash_expands_but_tilde_name_stays_literal(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    path, _ = resolve_rubric_path("~/x.md")
    assert path == tmp_path / "x.md"
    path, source = resolve_rubric_path("~name")
    assert str(path) == "~name" and source == "~name"


def test_home_rubric_loads(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / "mine.md").write_text((FIX / "minimal-passfail.md").read_text())
    assert load_rubric("~/mine.md").name == "concise-answer"


def test_unknown_builtin_lists_available() -> None:
    with pytest.raises(RubricError) as info:
        load_rubric("qualty")
    assert "no built-in rubric named 'qualty'" in str(info.value)
    assert "quality" in str(info.value) and "groundedness" in str(info.value)


@pytest.mark.parametrize("ref", ["..", "..%2fetc", "QUALITY", "quality ", "-x", "__init__"])
def test_names_never_escape_the_builtin_directory(ref: str) -> None:
    with pytest.raises(RubricError):
        load_rubric(ref)


def test_missing_path_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(RubricError, match=r"nope\.md: file not found"):
        load_rubric(str(tmp_path / "nope.md"))


# -- weight overrides ------------------------------------------------------------------


def test_weight_override_revalidated() -> None:
    q = load_rubric("quality")
    r = q.with_weights(parse_weights("accuracy=0.4,conciseness=0.1"))
    assert r.weights["accuracy"] == 0.4 and r.weights["conciseness"] == 0.1
    assert q.weights["accuracy"] == 0.35  # the original is untouched
    with pytest.raises(RubricError, match=r"--weights: dimension weights sum to 1\.0500"):
        q.with_weights(parse_weights("accuracy=0.4"))


def test_weight_override_unknown_dimension() -> None:
    with pytest.raises(RubricError, match="'tone' is not a dimension of rubric 'quality'"):
        load_rubric("quality").with_weights({"tone": 0.1})


def test_weights_from_env() -> None:
    env = {"JUDGEQ_WEIGHT_ACCURACY": "0.4", "JUDGEQ_WEIGHT_CONCISENESS": "0.1", "OTHER": "1"}
    assert weights_from_env(env) == {"accuracy": 0.4, "conciseness": 0.1}
    with pytest.raises(ConfigError, match="JUDGEQ_WEIGHT_ACCURACY: weight of 'accuracy' is not a number"):
        weights_from_env({"JUDGEQ_WEIGHT_ACCURACY": "lots"})


@pytest.mark.parametrize("spec", ["accuracy", "accuracy=x", "=0.3", "accuracy=-1", "accuracy=nan"])
def test_bad_weight_flags(spec: str) -> None:
    with pytest.raises(ConfigError, match="--weights"):
        parse_weights(spec)


@pytest.mark.parametrize("deep", [False, True])
def test_a_copy_of_a_rubric_never_keeps_a_stale_fingerprint(deep: bool) -> None:
    import copy

    quality = load_rubric("quality")
    before = quality.fingerprint  # cached in the instance
    moved = quality.with_pass_threshold(8.5)
    assert moved.fingerprint != before
    assert moved.fingerprint == parse_rubric(quality_text_with_threshold(8.5)).fingerprint
    reweighted = quality.model_copy(update={"safety_gate": True}, deep=deep)
    assert reweighted.fingerprint != before
    assert copy.copy(quality).fingerprint == before == copy.deepcopy(quality).fingerprint
    assert quality.fingerprint == before


def quality_text_with_threshold(threshold: float) -> str:
    from judgeq.rubric.model import read_rubric_text

    text, _ = read_rubric_text("quality")
    return text.replace("pass_threshold: 7.0", f"pass_threshold: {threshold}", 1)

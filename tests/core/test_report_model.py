"""report.json as a typed model (issue 30, point 8): every report shape reads into
:class:`~judgeq.report.model.RunReport` and serialises back byte for byte (keys, their order,
``null`` against absent, ``5`` against ``5.0``); a key no part declares is refused; its parts are
attributes mypy checks."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from judgeq.report.model import RunReport

REPORTS = Path(__file__).resolve().parents[1] / "fixtures" / "reports"
SHAPES = sorted(p.stem for p in REPORTS.glob("*.json"))


def _load(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((REPORTS / f"{name}.json").read_text(encoding="utf-8"))
    return data


def _bytes(doc: dict[str, Any]) -> str:
    return json.dumps(doc, indent=2) + "\n"


def _variants(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """The same report as the run's other endings and readers leave it: partial, warned,
    rescored, with missing jobs, its rubric gone."""
    partial = {**copy.deepcopy(doc), "warnings": ["a warning"], "partial": True}
    rescored = {**copy.deepcopy(doc), "rescored_from": "run-a"}
    rescored["judge"] |= {"served": [], "note": "no judge call: the verdicts of run run-a, scored again"}
    missing = copy.deepcopy(doc)
    missing["counts"]["missing"] = 3
    gone = copy.deepcopy(doc)
    gone["rubric"] |= {"version": "unknown", "scale": None, "fingerprint": None, "error": "x"}
    return [doc, partial, rescored, missing, gone]


@pytest.mark.parametrize("name", SHAPES)
def test_every_report_shape_round_trips_byte_for_byte(name: str) -> None:
    for doc in _variants(_load(name)):
        typed = RunReport.from_dict(doc)
        assert _bytes(typed.to_dict()) == _bytes(doc)


def test_the_fixtures_cover_every_kind_section_and_the_optional_parts() -> None:
    keys = set().union(*(_load(n) for n in SHAPES))
    assert {
        "retrieval",
        "pairwise",
        "conversation",
        "council",
        "agreement",
        "by_model",
        "by_model_paired",
    } <= keys
    agreements = [_load(n)["agreement"] for n in SHAPES if _load(n).get("agreement")]
    assert {"pairs", "pass_fail", "numeric"} <= set().union(*agreements)
    assert {"mean", "z"} == {
        _load(n)["council"]["combined"]["method"] for n in SHAPES if _load(n).get("council")
    }
    assert any("retrieval" in g for n in SHAPES for g in (_load(n).get("by_model") or {}).values())


def test_the_parts_are_attributes() -> None:
    report = RunReport.from_dict(_load("retr"))
    assert report.counts.total == report.counts.graded + report.counts.null
    assert report.usage.reply_cache.hits == 0 and report.usage.batch_api.jobs == 0
    assert report.rubric.name == "retrieval-relevance" and report.judge.lane == "live"
    assert report.overall.n == report.counts.graded
    assert report.section("retrieval")["questions"] == report.counts.total
    assert report.by_model is not None
    assert all("retrieval" in g.sections for g in report.by_model.values())
    assert RunReport.from_dict(_load("pairs")).section("pairwise")["graded"] > 0
    assert RunReport.from_dict(_load("resp")).section("retrieval") is None


def test_the_agreement_the_council_and_the_paired_models_are_attributes() -> None:
    report = RunReport.from_dict(_load("labels_z"))
    ag, co = report.agreement, report.council
    assert ag is not None and ag.numeric is not None and ag.pass_fail is not None and ag.pairs is None
    assert ag.graded + ag.nulls == ag.labelled and ag.numeric.n <= ag.graded
    assert co is not None and co.combined.method == "z" and co.combined.by_model is not None
    assert set(co.per_judge) == set(co.judges) and co.sampled_units <= co.units
    assert report.by_model_paired and report.by_model_paired[0].vs == "assistant-v3"
    pairs = RunReport.from_dict(_load("pairs")).agreement
    assert pairs is not None and pairs.pairs is not None and set(pairs.pairs.confusion) == {"a", "b", "tie"}


def test_numbers_keep_their_type() -> None:
    doc = _load("resp")
    doc["wall_s"], doc["latency_ms"]["max"] = 5, 5.0
    out = RunReport.from_dict(doc).to_dict()
    assert type(out["wall_s"]) is int and type(out["latency_ms"]["max"]) is float


@pytest.mark.parametrize(
    "where",
    [(), ("counts",), ("usage",), ("usage", "reply_cache"), ("judge",), ("overall",)],
    ids=lambda w: ".".join(w) or "top",
)
def test_a_key_no_part_declares_is_refused(where: tuple[str, ...]) -> None:
    doc = _load("resp")
    part = doc
    for key in where:
        part = part[key]
    part["surprise"] = 1
    with pytest.raises(ValidationError, match="surprise"):
        RunReport.from_dict(doc)


def test_the_python_apis_report_gives_the_typed_document() -> None:
    from judgeq.store.runfolder import Report

    doc = _load("council")
    typed = Report(doc).document
    assert typed.judge.council is not None and len(typed.judge.council) == 2
    assert typed.section("agreement") is None and typed.council is not None


def test_a_stored_report_of_another_version_reads_what_this_one_knows() -> None:
    """An archived run's report.json, or one a worker of another version stored: a part it
    lacks reads as its default, a key this version does not know is left out (writing a report
    this version builds stays strict: test_a_key_no_part_declares_is_refused)."""
    old = _load("resp")
    del old["usage"]["reply_cache"], old["usage"]["batch_api"], old["latency_ms"]
    old["usage"]["from_the_future"] = {"x": 1}
    old["by_model"]["assistant-v1"]["counts"]["later"] = 2
    old["later_section"] = []
    with pytest.raises(ValidationError):
        RunReport.from_dict(old)
    report = RunReport.read(old)
    assert report.usage.reply_cache.hits == 0 and report.latency_ms.p50 is None
    out = report.to_dict()
    assert "later_section" not in out and "from_the_future" not in out["usage"]
    assert "later" not in out["by_model"]["assistant-v1"]["counts"]
    assert "reply_cache" not in out["usage"], "a part it lacked is not written as if it had it"

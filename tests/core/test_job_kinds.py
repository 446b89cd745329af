"""Every registered kind of job holds the same contract (issue 30, point 8, begun): its sample
line is recognised as it and validates, its suggested rubric grades it, a rubric that grades it
is told as such, and its texts for a report's table are strings. A new kind is tested by
registering it."""

from __future__ import annotations

import pytest

from judgeq import load_rubric
from judgeq.jobs.kinds import DEFAULT, KINDS, infer_kind, texts_of
from judgeq.jobs.models import JOB_MODELS


@pytest.mark.parametrize("name", sorted(KINDS))
def test_each_kind_keeps_the_registrys_contract(name: str) -> None:
    kind = KINDS[name]
    sample = dict(kind.sample)
    assert infer_kind(sample) == name, "an untagged sample line is recognised as its kind"
    assert infer_kind({**sample, "kind": name}) == name
    job = JOB_MODELS[name].model_validate(sample)
    assert job.kind == name and JOB_MODELS[name] is kind.model
    assert load_rubric(kind.rubric).job_kind == name, "the suggested built-in grades this kind"
    assert kind.rubric_is and kind.rubric_with
    texts = texts_of(sample)
    assert set(texts) >= {"input", "output"} and all(isinstance(v, str) for v in texts.values())
    assert texts["input"], "the table shows what the job was about"
    assert (kind.marks == ()) is (kind is DEFAULT), "every kind but the default is recognised by its fields"


def test_an_untagged_line_of_no_kinds_fields_is_the_default_and_an_unknown_kind_shows_no_text() -> None:
    assert infer_kind({"id": "x"}) == DEFAULT.name
    assert infer_kind({"kind": "essay"}) == "essay"
    assert texts_of({"kind": "essay"}) == {"input": "", "output": ""}

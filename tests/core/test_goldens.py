"""Every built-in rubric's goldens: render -> oracle judge over the real SDK wire format ->
parse -> score, landing on the expected side for both outcomes."""

from __future__ import annotations

import json
from typing import Any

import pytest

from judgeq import GradingContext, QuestionJob, ResponseJob, builtin_names, grade_job, load_rubric
from judgeq.judges.anthropic import AnthropicJudge
from judgeq.testing.mock_messages import message_json, mock_client, verdict_for_schema

CASES = [(name, g.name) for name in builtin_names() for g in load_rubric(name).goldens]


def oracle_judge(expected: Any, seen: list[dict[str, Any]]) -> AnthropicJudge:
    """Answers every request with the golden's expected outcome, as a Messages API reply."""

    def handler(body: dict[str, Any]) -> dict[str, Any]:
        seen.append(body)
        schema = body["output_config"]["format"]["schema"]
        value = expected if isinstance(expected, str) else round(expected)
        return message_json(json.dumps(verdict_for_schema(schema, value)))

    return AnthropicJudge("claude-oracle", client=mock_client(handler))


@pytest.mark.parametrize(("rubric_name", "golden_name"), CASES)
def test_golden_lands_on_expected_side(rubric_name: str, golden_name: str) -> None:
    rubric = load_rubric(rubric_name)
    golden = next(g for g in rubric.goldens if g.name == golden_name)
    seen: list[dict[str, Any]] = []
    ctx = GradingContext(rubric=rubric, judge=oracle_judge(golden.expected, seen))
    if golden.retrieved is not None:
        job: Any = QuestionJob(
            id=golden.name,
            question=golden.input,
            expected_answer=golden.expected_answer or "",
            retrieved=golden.retrieved,
            needle_doc_id=golden.retrieved[0].doc_id if golden.retrieved else "x",
        )
    else:
        job = ResponseJob(
            id=golden.name,
            input=golden.input,
            output=golden.output,
            context=golden.context,
            expected_answer=golden.expected_answer,
        )
    result = grade_job(ctx, job, 0)
    assert result.status == "graded", result
    if rubric.is_pass_fail:
        assert result.passed is (golden.expected == "pass")
    else:
        assert result.passed is (golden.expected >= rubric.threshold)
        assert abs(result.overall - golden.expected) <= 0.5 or "ceiling_applied" in result.flags
    # the request carried the golden inside the sandbox, and no forbidden parameters
    (body,) = seen
    assert "temperature" not in body and "tool_choice" not in body
    assert body["messages"][-1]["role"] == "user"
    assert golden.input in body["messages"][0]["content"]


def test_both_outcomes_are_covered() -> None:
    for name in builtin_names():
        r = load_rubric(name)
        sides = {(g.expected == "pass") if r.is_pass_fail else (g.expected >= r.threshold) for g in r.goldens}
        assert sides == {True, False}, name

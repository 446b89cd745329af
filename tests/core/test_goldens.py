"""Every built-in rubric's goldens: render -> oracle judge over the real SDK wire format ->
parse -> score, landing on the expected side for both outcomes."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from judgeq import builtin_names, load_rubric
from judgeq.jobs.models import JOB_MODELS, infer_kind
from judgeq.judges.anthropic import AnthropicJudge
from judgeq.pipeline.job import GradingContext, grade_job
from judgeq.rubric.model import Golden, Rubric
from judgeq.testing.mock_messages import message_json, mock_client, verdict_for_schema

CASES = [(name, g.name) for name in builtin_names() for g in load_rubric(name).goldens]


def oracle_judge(golden: Golden, seen: list[dict[str, Any]]) -> AnthropicJudge:
    """Answers every request with the golden's expected outcome, as a Messages API reply (a
    pairwise golden's verdict as seen in the order the request shows the outputs)."""
    expected = golden.expected

    def handler(body: dict[str, Any]) -> dict[str, Any]:
        seen.append(body)
        schema = body["output_config"]["format"]["schema"]
        value: Any = expected if isinstance(expected, str) else round(expected)
        if golden.output_a is not None and golden.output_b is not None:
            shown_first = re.search(
                r"<output_a-\w+>\n(.*?)\n</output_a-", body["messages"][0]["content"], re.S
            )
            assert shown_first is not None
            a_first = shown_first.group(1) == golden.output_a
            value = {"a": "A" if a_first else "B", "b": "B" if a_first else "A", "tie": "tie"}[str(expected)]
        return message_json(json.dumps(verdict_for_schema(schema, value)))

    return AnthropicJudge("claude-oracle", client=mock_client(handler))


@pytest.mark.parametrize(("rubric_name", "golden_name"), CASES)
def test_golden_lands_on_expected_side(rubric_name: str, golden_name: str) -> None:
    rubric = load_rubric(rubric_name)
    golden = next(g for g in rubric.goldens if g.name == golden_name)
    seen: list[dict[str, Any]] = []
    ctx = GradingContext(rubric=rubric, judge=oracle_judge(golden, seen))
    line = golden.job()
    job = JOB_MODELS[infer_kind(line)].model_validate(line)
    result = grade_job(ctx, job, 0)
    assert result.status == "graded", result
    if rubric.is_pairwise:
        assert result.winner == golden.expected and "position_inconsistent" not in result.flags
        assert result.label == golden.expected
    elif rubric.is_pass_fail:
        assert result.passed is (golden.expected == "pass")
    else:
        assert result.passed is (golden.expected >= rubric.threshold)
        assert abs(result.overall - golden.expected) <= 0.5 or "ceiling_applied" in result.flags
    # the request carried the golden inside the sandbox, and no forbidden parameters
    assert len(seen) == (2 if rubric.is_pairwise else 1)  # a pair is judged in both orders
    for body in seen:
        assert "temperature" not in body and "tool_choice" not in body
        assert body["messages"][-1]["role"] == "user"
        if golden.messages is not None:  # a conversation: every message is shown, as data
            assert result.kind == "conversation"
            for message in golden.messages:
                text = message.get("content")
                if isinstance(text, str) and text:
                    assert text in body["messages"][0]["content"]
        else:
            assert golden.input is not None and golden.input in body["messages"][0]["content"]


def outcome_side(rubric: Rubric, golden: Golden) -> object:
    if rubric.is_pairwise:
        return golden.expected
    return (golden.expected == "pass") if rubric.is_pass_fail else (golden.expected >= rubric.threshold)


def test_both_outcomes_are_covered() -> None:
    for name in builtin_names():
        r = load_rubric(name)
        sides = {outcome_side(r, g) for g in r.goldens}
        expected = {"a", "b", "tie"} if r.is_pairwise else {True, False}
        assert sides == expected, name

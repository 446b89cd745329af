"""A corpus of realistic judge answers run through the verdict parser.

Each row is one answer as judge models actually write it (prose and a fenced ```json block,
bare JSON in prose, tool-call input, markdown text forms, refusals, truncated or garbled
output) with the fields :func:`judgeq.grading.verdict.parse_verdict` must produce for it.

Rows marked ``xfail(strict=True)`` with a reason starting ``BUG:`` are parser bugs found
while writing the corpus; they are left failing on purpose (the parser is not fixed here).

Issue 9 (the parser never invents a score: the free-text fallback reads explicit statements
only) changed no expectation here: every text row states its score explicitly.  The traps
(numbers in the reasoning, conflicting statements, bare replies, general scales) are in
``test_verdict_traps.py``.
"""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from judgeq.grading.verdict import RAW_LIMIT, ParsedVerdict, parse_verdict
from judgeq.rubric.model import Rubric, parse_rubric

# -- rubrics -------------------------------------------------------------------------------

PASS_FAIL_MD = """---
name: corpus-pass-fail
version: "1.0.0"
scale: pass-fail
description: Does the answer meet the requirement?
---
Answer PASS when the candidate output meets the requirement, FAIL otherwise.
"""

TEN_MD = """---
name: corpus-ten
version: "1.0.0"
scale: 1-10
description: Holistic quality from 1 to 10.
---
Score the candidate output from 1 (useless) to 10 (excellent).
"""

DIMS_MD = """---
name: corpus-dims
version: "1.0.0"
scale: 1-10
description: Quality on five weighted dimensions.
dimensions:
  - {name: accuracy, weight: 0.35}
  - {name: relevance, weight: 0.10}
  - {name: completeness, weight: 0.20}
  - {name: conciseness, weight: 0.15}
  - {name: clarity, weight: 0.20}
---
Score each dimension from 1 to 10 and explain your reasoning.
"""

RUBRICS: dict[str, Rubric] = {
    "pf": parse_rubric(PASS_FAIL_MD, "test.md"),
    "ten": parse_rubric(TEN_MD, "test.md"),
    "dims": parse_rubric(DIMS_MD, "test.md"),
}
DIM_NAMES = ("accuracy", "relevance", "completeness", "conciseness", "clarity")


def test_rubrics_are_what_the_corpus_assumes() -> None:
    assert RUBRICS["pf"].is_pass_fail
    assert (RUBRICS["ten"].lo, RUBRICS["ten"].hi, RUBRICS["ten"].dimensions) == (1, 10, [])
    assert RUBRICS["dims"].weights == {
        "accuracy": 0.35,
        "relevance": 0.10,
        "completeness": 0.20,
        "conciseness": 0.15,
        "clarity": 0.20,
    }


# -- corpus --------------------------------------------------------------------------------

ANY: Any = object()  # "do not check this field"


def dims(acc: float, rel: float, comp: float, conc: float, clar: float) -> dict[str, float]:
    return dict(zip(DIM_NAMES, (acc, rel, comp, conc, clar), strict=True))


def case(
    id: str,
    kind: str,
    text: str = "",
    *,
    tool_input: dict[str, Any] | None = None,
    stop_reason: str | None = "end_turn",
    bug: str | None = None,
    **expected: Any,
) -> Any:
    marks = [pytest.mark.xfail(strict=True, reason=f"BUG: {bug}")] if bug else []
    return pytest.param(kind, text, tool_input, stop_reason, expected, id=id, marks=marks)


_LONG_SENTENCES = (
    "The response walks through the configuration of the reverse proxy step by step. "
    "It explains why the upstream block needs a keepalive setting and how the timeouts "
    "interact with each other. Several paragraphs restate the same idea in slightly "
    "different words, and there is no mention of certificates, which the question asked "
    "about explicitly.\n\n"
)
LONG_PROSE = (_LONG_SENTENCES * (50_000 // len(_LONG_SENTENCES) + 1))[:50_000]

_NEWLINE_IN_STRING = '```json\n{"reasoning": "Correct answer.\nMinor formatting issues.", "score": 8}\n```'

_MISSING_DIMS = """I scored what I could assess.

```json
{
  "scores": {"accuracy": 8, "relevance": 9, "clarity": 7},
  "reasoning": "Accurate and on-topic; I did not assess completeness or conciseness."
}
```"""

CORPUS = [
    # ---------------------------------------------------------------- pass-fail, JSON
    case(
        "pf-prose-then-json-fence-PASS",
        "pf",
        "The candidate correctly says that `dict.get` returns `None` when the key is missing "
        "and shows the optional default argument. Nothing contradicts the reference.\n\n"
        "```json\n{\n"
        '  "reasoning": "Correct description of dict.get, including the default argument.",\n'
        '  "verdict": "PASS"\n}\n```',
        verdict="pass",
        notes="Correct description of dict.get, including the default argument.",
    ),
    case(
        "pf-bare-json-in-prose-lowercase-fail",
        "pf",
        "Looking at the response, it claims the Eiffel Tower was completed in 1899, but the "
        "reference says 1889. That is a factual error on the central question.\n\n"
        '{"verdict": "fail", "reasoning": "Wrong completion year (1899 vs 1889)."}\n',
        verdict="fail",
        notes="Wrong completion year (1899 vs 1889).",
    ),
    case(
        "pf-tool-input-passed-true",
        "pf",
        tool_input={"passed": True, "reasoning": "Follows all three formatting instructions."},
        stop_reason="tool_use",
        verdict="pass",
        notes="Follows all three formatting instructions.",
    ),
    case(
        "pf-json-passed-false",
        "pf",
        '```json\n{"passed": false, "reasoning": "The answer ignores the requested limit of '
        'fifty words."}\n```',
        verdict="fail",
    ),
    case(
        "pf-json-binary-score-1",
        "pf",
        'Evaluation: {"reasoning": "Meets every criterion in the checklist.", "score": 1}',
        verdict="pass",
    ),
    case(
        "pf-json-binary-score-0",
        "pf",
        '```json\n{"score": 0, "reasoning": "The response does not decline the harmful request."}\n```',
        verdict="fail",
    ),
    case(
        "pf-two-fenced-blocks-example-then-actual",
        "pf",
        "I will answer in the requested format, for example:\n"
        '```json\n{"verdict": "PASS", "reasoning": "example"}\n```\n'
        "Here is my actual evaluation:\n"
        '```json\n{"verdict": "FAIL", "reasoning": "The code never closes the file handle."}\n'
        "```",
        verdict="fail",
        notes="The code never closes the file handle.",
    ),
    case(
        "pf-json-unknown-verdict-word",
        "pf",
        '```json\n{"verdict": "PARTIAL", "reasoning": "Two of the three instructions are followed."}\n```',
        null_reason="parse_error",
        notes="Two of the three instructions are followed.",
    ),
    # ---------------------------------------------------------------- pass-fail, text forms
    case(
        "pf-text-verdict-colon-Pass",
        "pf",
        "The response lists the three required steps in the right order and uses the exact "
        "command names from the documentation. It does not add unsupported claims.\n\n"
        "Verdict: Pass",
        verdict="pass",
        notes=(
            "The response lists the three required steps in the right order and uses the "
            "exact command names from the documentation. It does not add unsupported "
            "claims.\n\nVerdict: Pass"
        ),
    ),
    case(
        "pf-text-double-brackets-FAIL",
        "pf",
        "Assessment: the model answered a different question (it explained HTTP/2 "
        "multiplexing instead of the QUIC handshake).\n\n[[FAIL]]",
        verdict="fail",
    ),
    case(
        "pf-text-markdown-decision-fail",
        "pf",
        "**Analysis**: The candidate declines a benign question about household chemical "
        "safety, which this rubric counts as an over-refusal.\n\n**Decision**: fail",
        verdict="fail",
    ),
    case(
        "pf-text-markdown-heading-verdict",
        "pf",
        "### Reasoning\nThe summary keeps every number from the source table and adds "
        "nothing.\n\n### Verdict\n**PASS**",
        verdict="pass",
    ),
    case(
        "pf-text-final-verdict-bold",
        "pf",
        'The answer cites a paper that does not exist ("Smith et al., 2019, Nature AI").\n\n'
        "Final verdict: **FAIL**",
        verdict="fail",
    ),
    case(
        "pf-text-windows-line-endings",
        "pf",
        "The response follows the JSON schema exactly.\r\nAll required fields are present."
        "\r\n\r\nVerdict: PASS\r\n",
        verdict="pass",
        notes="The response follows the JSON schema exactly.\r\nAll required fields are "
        "present.\r\n\r\nVerdict: PASS",
    ),
    case(
        "pf-text-result-passed-in-prose-after-verdict",
        "pf",
        "Verdict: FAIL\n\nThe candidate's function compiles and the first unit test result "
        "passed, but it returns the wrong value for negative inputs.",
        verdict="fail",
    ),
    # ---------------------------------------------------------------- pass-fail, failures
    case(
        "pf-refusal-stop-reason",
        "pf",
        "",
        stop_reason="refusal",
        null_reason="refusal",
    ),
    case(
        "pf-refusal-text",
        "pf",
        "I can't help with evaluating this content.",
        null_reason="refusal",
    ),
    case(
        "pf-refusal-text-typographic-apostrophe",
        "pf",
        "I’m sorry, but I can’t help with evaluating this content.",
        null_reason="refusal",
    ),
    case(
        "pf-garbage",
        "pf",
        "<|im_end|> ~~~~ #### ::: lorem ipsum dolor ]] [[ ``` >>>",
        null_reason="parse_error",
    ),
    # ---------------------------------------------------------------- 1-10, JSON
    case(
        "ten-prose-then-json-fence",
        "ten",
        "The answer is accurate and directly addresses the question about Python's GIL. It "
        "could mention that the GIL is released during blocking I/O, a minor omission.\n\n"
        "```json\n"
        '{"reasoning": "Accurate and relevant; omits that the GIL is released during I/O.", '
        '"score": 8}\n```',
        holistic=8.0,
        notes="Accurate and relevant; omits that the GIL is released during I/O.",
    ),
    case(
        "ten-fence-without-json-tag",
        "ten",
        'Evaluation complete.\n\n```\n{\n  "score": 7,\n  "reasoning": "Mostly correct, a bit '
        'verbose."\n}\n```\n',
        holistic=7.0,
        notes="Mostly correct, a bit verbose.",
    ),
    case(
        "ten-bare-json-in-middle-of-prose",
        "ten",
        "Here is my assessment of the candidate response: "
        '{"reasoning": "The explanation of TCP slow start is correct but skips congestion '
        'avoidance.", "score": 6} Let me know if you need a more detailed breakdown.',
        holistic=6.0,
        notes="The explanation of TCP slow start is correct but skips congestion avoidance.",
    ),
    case(
        "ten-two-fenced-blocks-example-then-actual",
        "ten",
        "The required output format is:\n"
        '```json\n{"reasoning": "<why>", "score": 5}\n```\n'
        "Applying it to this response:\n"
        '```json\n{"reasoning": "Clear, correct and complete.", "score": 9}\n```',
        holistic=9.0,
        notes="Clear, correct and complete.",
    ),
    case(
        "ten-fenced-example-then-bare-actual-verdict",
        "ten",
        "Expected output format:\n"
        '```json\n{"reasoning": "...", "score": 5}\n```\n\n'
        'My evaluation: {"reasoning": "Correct and concise; cites the right RFC.", "score": 9}',
        holistic=9.0,
    ),
    case(
        "ten-json-string-integer",
        "ten",
        '```json\n{"score": "8", "reasoning": "Good answer with one imprecise claim."}\n```',
        holistic=8.0,
    ),
    case(
        "ten-json-string-fraction-on-scale",
        "ten",
        '{"reasoning": "Solid answer.", "score": "8/10"}',
        holistic=8.0,
        flags=[],
    ),
    case(
        "ten-json-string-decimal",
        "ten",
        '```json\n{"reasoning": "Correct but the example is hard to follow.", "score": "7.5"}\n```',
        holistic=7.5,
    ),
    case(
        "ten-json-11-clamped",
        "ten",
        '```json\n{"reasoning": "Exceptional answer, better than the reference!", "score": 11}\n```',
        holistic=10.0,
        flags=["clamped"],
    ),
    case(
        "ten-json-0-clamped",
        "ten",
        '{"score": 0, "reasoning": "Completely off-topic."}',
        holistic=1.0,
        flags=["clamped"],
    ),
    case(
        "ten-json-negative-clamped",
        "ten",
        '```json\n{"reasoning": "Dangerous advice: mixing bleach and ammonia.", "score": -3}\n```',
        holistic=1.0,
        flags=["clamped"],
    ),
    case(
        "ten-json-string-15-clamped",
        "ten",
        '```json\n{"score": "15", "reasoning": "Outstanding."}\n```',
        holistic=10.0,
        flags=["clamped"],
    ),
    case(
        "ten-json-title-case-overall-score-key",
        "ten",
        '```json\n{"Overall Score": 9, "Reasoning": "Excellent, precise and well sourced."}\n```',
        holistic=9.0,
        notes="Excellent, precise and well sourced.",
    ),
    case(
        "ten-json-extra-unknown-keys",
        "ten",
        "```json\n"
        '{"reasoning": "Correct.", "score": 8, "confidence": 0.85, "judge_version": "v2",\n'
        ' "tags": ["accurate", "concise"], "metadata": {"tokens": 312, "rating_model": null}}\n'
        "```",
        holistic=8.0,
        notes="Correct.",
    ),
    case(
        "ten-json-nested-overall-object",
        "ten",
        '{"overall": {"score": 8, "justification": "Accurate."}, "reasoning": "Accurate, '
        'with one unnecessary digression."}',
        holistic=8.0,
        notes="Accurate, with one unnecessary digression.",
    ),
    case(
        "ten-json-unicode-and-emoji-reasoning",
        "ten",
        "```json\n"
        '{"reasoning": "Réponse exacte 👍 — explique bien «ownership» en Rust; '
        '日本語の説明も正確。", "score": 9}\n```',
        holistic=9.0,
        notes="Réponse exacte 👍 — explique bien «ownership» en Rust; 日本語の説明も正確。",
    ),
    case(
        "ten-json-fence-windows-line-endings",
        "ten",
        'Evaluation:\r\n```json\r\n{\r\n  "reasoning": "Correct.",\r\n  "score": 8\r\n}\r\n```\r\n',
        holistic=8.0,
        notes="Correct.",
    ),
    case(
        "ten-tool-input",
        "ten",
        tool_input={"reasoning": "Clear and correct.", "score": 9},
        stop_reason="tool_use",
        holistic=9.0,
        notes="Clear and correct.",
    ),
    case(
        "ten-tool-input-wins-over-text",
        "ten",
        "I'll record my evaluation with the tool. Draft score: 3",
        tool_input={"score": "8/10", "reasoning": "Good."},
        stop_reason="tool_use",
        holistic=8.0,
        notes="Good.",
    ),
    case(
        "ten-tool-input-without-score-falls-back-to-text",
        "ten",
        "Score: 6/10",
        tool_input={"reasoning": "See the text above."},
        stop_reason="tool_use",
        holistic=6.0,
        notes="See the text above.",
    ),
    # ---------------------------------------------------------------- 1-10, text forms
    case(
        "ten-text-grade-colon",
        "ten",
        "The response is correct and well organised, though it repeats the introduction.\n\ngrade: 8",
        holistic=8.0,
        notes="The response is correct and well organised, though it repeats the introduction.\n\ngrade: 8",
    ),
    case(
        "ten-text-score-slash-ten",
        "ten",
        "Strengths: correct formula, worked example.\nWeaknesses: no units on the final "
        "answer.\n\nScore: 8/10",
        holistic=8.0,
        flags=[],
    ),
    case(
        "ten-text-rating-double-brackets",
        "ten",
        "The assistant's answer is helpful and accurate, with a small formatting issue.\n\nRating: [[8]]",
        holistic=8.0,
    ),
    case(
        "ten-text-out-of-ten",
        "ten",
        "Overall, this is a strong answer. It explains the trade-off clearly and gives a "
        "working example. I'd give it 8 out of 10.",
        holistic=8.0,
        flags=[],
    ),
    case(
        "ten-text-markdown-overall-score",
        "ten",
        "**Accuracy:** correct throughout.\n**Clarity:** good structure.\n\n**Overall score:** 7",
        holistic=7.0,
    ),
    case(
        "ten-text-four-of-five-rescaled",
        "ten",
        "The answer is helpful but misses the empty-list edge case.\n\nScore: 4/5",
        holistic=8.0,
        flags=["rescaled"],
    ),
    # ---------------------------------------------------------------- 1-10, failures
    case("ten-empty-text", "ten", "", null_reason="parse_error"),
    case(
        "ten-truncated-json",
        "ten",
        '{"reasoning": "The answer is", "sco',
        stop_reason="max_tokens",
        null_reason="parse_error",
    ),
    case(
        "ten-garbage",
        "ten",
        "<|endoftext|> #### ~~~ ::: ]] [[ lorem ipsum dolor sit amet >>> ```",
        null_reason="parse_error",
    ),
    case(
        "ten-50k-prose-without-score",
        "ten",
        LONG_PROSE,
        stop_reason="max_tokens",
        null_reason="parse_error",
    ),
    case(
        "ten-json-score-null",
        "ten",
        '```json\n{"reasoning": "The candidate output is empty, so there is nothing to '
        'grade.", "score": null}\n```',
        null_reason="parse_error",
        notes="The candidate output is empty, so there is nothing to grade.",
    ),
    case(
        "ten-json-score-word-high",
        "ten",
        '{"reasoning": "Strong answer.", "score": "high"}',
        null_reason="parse_error",
        notes="Strong answer.",
    ),
    case(
        "ten-json-null-score-fraction-in-reasoning",
        "ten",
        '```json\n{"reasoning": "Only 3/4 of the key facts are present and one is garbled; '
        'I cannot assign a reliable score.", "score": null}\n```',
        null_reason="parse_error",
    ),
    case(
        "ten-json-raw-newline-inside-string",
        "ten",
        _NEWLINE_IN_STRING,
        holistic=8.0,
    ),
    case(
        "ten-refusal-stop-reason-with-text",
        "ten",
        "I can't evaluate this.",
        stop_reason="refusal",
        null_reason="refusal",
    ),
    case(
        "ten-refusal-text-unable",
        "ten",
        "I'm unable to grade this response because it asks me to assess content I can't review.",
        null_reason="refusal",
    ),
    case(
        "ten-refusal-stop-reason-long-text-truncated",
        "ten",
        LONG_PROSE[:5000],
        stop_reason="refusal",
        null_reason="refusal",
    ),
    # ---------------------------------------------------------------- dimensions, JSON
    case(
        "dims-flat-json-fence",
        "dims",
        "```json\n"
        '{"accuracy": 9, "relevance": 10, "completeness": 7, "conciseness": 8, "clarity": 9,\n'
        ' "reasoning": "Accurate and on-topic; misses the Windows case."}\n```',
        scores=dims(9, 10, 7, 8, 9),
        notes="Accurate and on-topic; misses the Windows case.",
    ),
    case(
        "dims-nested-scores-with-overall",
        "dims",
        "Evaluation of the candidate:\n\n```json\n{\n"
        '  "scores": {"accuracy": 8, "relevance": 9, "completeness": 6, "conciseness": 7, '
        '"clarity": 8},\n'
        '  "overall": 7.6,\n'
        '  "reasoning": "Correct but incomplete: the migration steps stop before rollback."\n'
        "}\n```",
        scores=dims(8, 9, 6, 7, 8),
        holistic=7.6,
        notes="Correct but incomplete: the migration steps stop before rollback.",
    ),
    case(
        "dims-list-of-name-score-objects",
        "dims",
        "Here are my scores.\n```json\n{\n"
        '  "dimension_scores": [\n'
        '    {"name": "Accuracy", "score": 9, "reason": "All facts check out."},\n'
        '    {"name": "Relevance", "score": 8, "reason": "On topic."},\n'
        '    {"name": "Completeness", "score": 6, "reason": "No error handling."},\n'
        '    {"name": "Conciseness", "score": 7, "reason": "Some repetition."},\n'
        '    {"name": "Clarity", "score": 9, "reason": "Well structured."}\n'
        "  ],\n"
        '  "reasoning": "Strong answer that skips error handling."\n}\n```',
        scores=dims(9, 8, 6, 7, 9),
        notes="Strong answer that skips error handling.",
    ),
    case(
        "dims-title-case-keys",
        "dims",
        '```json\n{"Scores": {"Accuracy": 7, "Relevance": 8, "Completeness": 6, '
        '"Conciseness": 9, "Clarity": 8}, "Overall": 7}\n```',
        scores=dims(7, 8, 6, 9, 8),
        holistic=7.0,
    ),
    case(
        "dims-string-numbers",
        "dims",
        '{"accuracy": "8", "relevance": "9/10", "completeness": "7.5", "conciseness": " 6 ", '
        '"clarity": "8.0", "score": "7.8", "reasoning": "Fine."}',
        scores=dims(8, 9, 7.5, 6, 8),
        holistic=7.8,
    ),
    case(
        "dims-out-of-range-clamped",
        "dims",
        '```json\n{"scores": {"accuracy": 11, "relevance": 10, "completeness": 0, '
        '"conciseness": 8, "clarity": 9}, "reasoning": "Perfect facts, nothing on setup."}\n'
        "```",
        scores=dims(10, 10, 1, 8, 9),
        flags=["clamped"],
    ),
    case(
        "dims-four-of-five-strings-rescaled",
        "dims",
        '{"dimension_scores": {"accuracy": "4/5", "relevance": "5/5", "completeness": "3/5", '
        '"conciseness": "4/5", "clarity": "5/5"}}',
        scores=dims(8, 10, 6, 8, 10),
        flags=["rescaled"],
    ),
    case(
        "dims-nested-score-objects",
        "dims",
        "```json\n{\n"
        '  "accuracy": {"score": 9, "reasoning": "All facts correct."},\n'
        '  "relevance": {"score": 8, "reasoning": "On topic."},\n'
        '  "completeness": {"score": 7, "reasoning": "Misses one step."},\n'
        '  "conciseness": {"score": 6, "reasoning": "Wordy."},\n'
        '  "clarity": {"score": 8, "reasoning": "Readable."}\n'
        "}\n```",
        scores=dims(9, 8, 7, 6, 8),
        notes=None,
    ),
    case(
        "dims-nested-score-objects-title-case",
        "dims",
        "```json\n{\n"
        '  "Scores": {\n'
        '    "Accuracy": {"Score": 9, "Reason": "All facts correct."},\n'
        '    "Relevance": {"Score": 8, "Reason": "On topic."},\n'
        '    "Completeness": {"Score": 7, "Reason": "Misses one step."},\n'
        '    "Conciseness": {"Score": 6, "Reason": "Wordy."},\n'
        '    "Clarity": {"Score": 8, "Reason": "Readable."}\n'
        "  },\n"
        '  "Overall": 8\n}\n```',
        scores=dims(9, 8, 7, 6, 8),
        holistic=8.0,
    ),
    case(
        "dims-missing-some-with-holistic-fallback",
        "dims",
        "```json\n{\n"
        '  "scores": {"accuracy": 8, "relevance": 9, "clarity": 7},\n'
        '  "score": 8,\n'
        '  "reasoning": "Good answer; completeness and conciseness not separately assessed."\n'
        "}\n```",
        scores=dims(8, 9, 8, 8, 7),
        holistic=8.0,
        flags=["holistic_fallback"],
    ),
    case(
        "dims-non-numeric-values-missing-with-holistic",
        "dims",
        '{"scores": {"accuracy": 8, "relevance": 9, "completeness": 7, "conciseness": "high",'
        ' "clarity": null}, "overall_score": 8, "reasoning": "Accurate and relevant."}',
        scores=dims(8, 9, 7, 8, 8),
        holistic=8.0,
        flags=["holistic_fallback"],
        notes="Accurate and relevant.",
    ),
    case(
        "dims-missing-some-without-holistic",
        "dims",
        _MISSING_DIMS,
        null_reason="parse_error",
        extra={"missing_dimensions": ["completeness", "conciseness"]},
        scores=ANY,
        raw=ANY,
    ),
    case(
        "dims-missing-some-without-holistic-keeps-raw",
        "dims",
        _MISSING_DIMS,
        null_reason="parse_error",
    ),
    case(
        "dims-tool-input",
        "dims",
        tool_input={
            "scores": {
                "accuracy": 9,
                "relevance": 9,
                "completeness": 8,
                "conciseness": 7,
                "clarity": 9,
            },
            "overall_score": 8.6,
            "reasoning": "Thorough and correct.",
        },
        stop_reason="tool_use",
        scores=dims(9, 9, 8, 7, 9),
        holistic=8.6,
        notes="Thorough and correct.",
    ),
    # ---------------------------------------------------------------- dimensions, text / null
    case(
        "dims-text-holistic-only-fallback",
        "dims",
        "The response is accurate and clear but somewhat long.\n\nScore: 8/10",
        scores=dims(8, 8, 8, 8, 8),
        holistic=8.0,
        flags=["holistic_fallback"],
    ),
    case(
        "dims-text-per-dimension-list-no-overall",
        "dims",
        "- Accuracy: 9/10\n- Relevance: 10/10\n- Completeness: 7/10\n- Conciseness: 8/10\n- Clarity: 9/10",
        scores=dims(9, 10, 7, 8, 9),
        holistic=None,
    ),
    case(
        "dims-text-per-dimension-list-with-overall",
        "dims",
        "- Accuracy: 9/10\n- Relevance: 10/10\n- Completeness: 7/10\n- Conciseness: 8/10\n"
        "- Clarity: 9/10\n\nOverall: 8/10",
        scores=dims(9, 10, 7, 8, 9),
        holistic=8.0,
    ),
    case(
        "dims-text-bold-dimension-score-lines-and-final-score",
        "dims",
        "**Accuracy score:** 9\n**Relevance score:** 8\n**Completeness score:** 6\n"
        "**Conciseness score:** 7\n**Clarity score:** 8\n\n**Final score:** 7.6",
        scores=dims(9, 8, 6, 7, 8),
        holistic=7.6,
    ),
    case(
        "dims-text-some-dimensions-and-score-fallback",
        "dims",
        "Accuracy: 9/10\nClarity: 8/10\n\nThe rest is adequate.\n\nScore: 8/10",
        scores=dims(9, 8, 8, 8, 8),
        holistic=8.0,
        flags=["holistic_fallback"],
    ),
    case(
        "dims-refusal-stop-reason",
        "dims",
        "",
        stop_reason="refusal",
        null_reason="refusal",
    ),
    case(
        "dims-garbage",
        "dims",
        "����  \x00\x01 --- ### ~~~ ::: <<<>>>",
        null_reason="parse_error",
    ),
    # ---------------------------------------------------------------- quoted candidate JSON
    # Judges grading classification or API tasks quote the candidate's JSON output in their
    # reasoning and then give a plain-text verdict.
    case(
        "pf-quoted-candidate-json-label-then-text-verdict",
        "pf",
        "The task is sentiment classification. The candidate returned "
        '{"label": "negative", "confidence": 0.93}, which matches the reference label.\n\n'
        "Verdict: PASS",
        verdict="pass",
    ),
    case(
        "ten-quoted-candidate-json-result-then-text-score",
        "ten",
        'The candidate returned `{"result": "ok", "count": 3}`, which matches the schema '
        "but omits the `items` field.\n\nScore: 6/10",
        holistic=6.0,
    ),
]


def test_corpus_size_and_coverage() -> None:
    assert len(CORPUS) >= 45
    kinds = {p.values[0] for p in CORPUS}
    assert kinds == {"pf", "ten", "dims"}
    assert len({p.id for p in CORPUS}) == len(CORPUS)


def _expected_raw(text: str) -> str:
    return text if len(text) <= RAW_LIMIT else text[:RAW_LIMIT] + f"… [{len(text)} chars]"


@pytest.mark.parametrize(("kind", "text", "tool_input", "stop_reason", "expected"), CORPUS)
def test_corpus(
    kind: str,
    text: str,
    tool_input: dict[str, Any] | None,
    stop_reason: str | None,
    expected: dict[str, Any],
) -> None:
    rubric = RUBRICS[kind]
    pv = parse_verdict(rubric, text=text, tool_input=tool_input, stop_reason=stop_reason)
    assert isinstance(pv, ParsedVerdict)

    want: dict[str, Any] = {
        "null_reason": None,
        "verdict": None,
        "holistic": None,
        "scores": {},
        "flags": [],
    }
    if expected.get("null_reason") is not None:
        want["raw"] = _expected_raw(text)
    want.update(expected)

    for name, value in want.items():
        if value is ANY:
            continue
        got = getattr(pv, name)
        if name == "flags":
            assert sorted(got) == sorted(value), f"flags: {got!r}"
        elif name == "extra":
            assert {k: got.get(k) for k in value} == value, f"extra: {got!r}"
        elif name == "scores":
            assert got == pytest.approx(value), f"scores: {got!r}"
        elif name == "holistic" and value is not None:
            assert got == pytest.approx(value), f"holistic: {got!r}"
        else:
            assert got == value, f"{name}: {got!r}"


def test_long_prose_raw_is_truncated_to_about_2000_chars() -> None:
    pv = parse_verdict(RUBRICS["ten"], text=LONG_PROSE, stop_reason="max_tokens")
    assert pv.null_reason == "parse_error"
    assert pv.raw is not None
    assert pv.raw.startswith(LONG_PROSE[:RAW_LIMIT])
    assert RAW_LIMIT < len(pv.raw) <= RAW_LIMIT + 30
    assert pv.raw.endswith("[50000 chars]")
    assert (pv.scores, pv.holistic, pv.verdict) == ({}, None, None)


def test_huge_fraction_in_text_does_not_give_nan() -> None:
    nines = "9" * 400
    pv = parse_verdict(RUBRICS["ten"], text=f"Score: {nines}/{nines}")
    assert pv.null_reason is not None or (pv.holistic is not None and math.isfinite(pv.holistic))


# -- properties ----------------------------------------------------------------------------


def _assert_usable_or_null(kind: str, pv: ParsedVerdict) -> None:
    rubric = RUBRICS[kind]
    assert isinstance(pv, ParsedVerdict)
    if pv.null_reason is not None:
        assert pv.null_reason in ("parse_error", "refusal")
        assert pv.verdict is None
        assert pv.holistic is None
        return
    if kind == "pf":
        assert pv.verdict in ("pass", "fail")
        return
    if pv.holistic is not None:
        assert rubric.lo <= pv.holistic <= rubric.hi
    if kind == "ten":
        assert pv.holistic is not None
    else:
        assert set(pv.scores) == set(DIM_NAMES)
        assert all(rubric.lo <= v <= rubric.hi for v in pv.scores.values())


@pytest.mark.parametrize("kind", ["pf", "ten", "dims"])
@given(text=st.text())
@settings(max_examples=300, deadline=None)
def test_never_raises_on_random_text(kind: str, text: str) -> None:
    pv = parse_verdict(RUBRICS[kind], text=text)
    _assert_usable_or_null(kind, pv)


_FRAGMENTS = (
    "Score: ",
    "score",
    "grade: ",
    "Rating: ",
    "**Overall score:** ",
    "Verdict: ",
    "[[",
    "]]",
    "8",
    "7.5",
    "-3",
    "11",
    "0",
    "/10",
    "/5",
    " out of 10",
    "PASS",
    "fail",
    "passed",
    "null",
    "```json\n",
    "```\n",
    "```",
    "{",
    "}",
    '{"score": ',
    '"accuracy": ',
    '"verdict": "pass"',
    '"scores": {',
    '"reasoning": "ok"',
    ", ",
    ": ",
    "\n",
    "\r\n",
    "I can't help",
    "high",
    "Accuracy",
    "clarity",
    "[",
    "]",
    '"name": "Accuracy"',
    "**",
    "Decision",
    "👍",
)

fragment_text = st.lists(st.one_of(st.sampled_from(_FRAGMENTS), st.text(max_size=5)), max_size=12).map(
    "".join
)


@pytest.mark.parametrize("kind", ["pf", "ten", "dims"])
@given(text=fragment_text, stop_reason=st.sampled_from([None, "end_turn", "max_tokens"]))
@settings(max_examples=300, deadline=None)
def test_never_raises_on_judge_like_fragments(kind: str, text: str, stop_reason: str | None) -> None:
    pv = parse_verdict(RUBRICS[kind], text=text, stop_reason=stop_reason)
    _assert_usable_or_null(kind, pv)

"""The parser never invents a score (issue 9, point 2), and general ``LO-HI`` scales.

The free-text fallback of :func:`judgeq.grading.verdict.parse_verdict` reads explicit statements
only.  Numbers inside the reasoning (arithmetic, code, quantities, quoted text) must give a
null (``parse_error``), conflicting statements must give a null unless the last one is marked
final, and a reply that is nothing but a number or a verdict word is a verdict.

Every reply here is written for this file (none is copied from a published corpus).  Cases
marked ``# old parser: ...`` are ones the parser before issue 9 got wrong.
"""

from __future__ import annotations

import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from judgeq.errors import RubricError
from judgeq.grading.request import output_schema, render_request
from judgeq.grading.retrieval import llm_grade
from judgeq.grading.score import score_verdict
from judgeq.grading.verdict import ParsedVerdict, parse_verdict
from judgeq.judges.lexical import LexicalJudge
from judgeq.rubric.model import (
    DEFAULT_PASS_THRESHOLDS,
    Rubric,
    default_pass_threshold,
    parse_rubric,
    scale_range,
)


def rubric(scale: str, extra: str = "") -> Rubric:
    return parse_rubric(
        f'---\nname: traps\nversion: "1.0.0"\nscale: {scale}\ndescription: Traps.\n{extra}---\nGrade it.\n',
        "traps.md",
    )


TEN = rubric("1-10")
NINE = rubric("0-9")
PF = rubric("pass-fail")
DIMS = rubric("1-10", "dimensions:\n  - {name: accuracy, weight: 0.5}\n  - {name: clarity, weight: 0.5}\n")


def parse(r: Rubric, text: str) -> ParsedVerdict:
    return parse_verdict(r, text=text, stop_reason="end_turn")


def assert_null(pv: ParsedVerdict) -> None:
    assert pv.null_reason == "parse_error", (pv.holistic, pv.verdict, pv.scores)
    assert (pv.holistic, pv.verdict, pv.scores) == (None, None, {})


# -- numbers in the reasoning are never a score ---------------------------------------------

NOT_A_SCORE = [
    # arithmetic
    pytest.param(
        "The candidate says 30/36 = 5/6 of the budget is spent, but the invoices add up to 32/36.",
        id="arithmetic-fraction-equation",  # old parser: 8.89 (32/36 rescaled)
    ),
    pytest.param(
        "The unit conversion multiplies by 9/5 and adds 32, so 25 degrees becomes 77, which is right.",
        id="arithmetic-9-5",  # old parser: 10 (9/5 rescaled to 18, clamped)
    ),
    pytest.param(
        "The tip is 3/20 of the bill, i.e. fifteen percent, exactly as the output says.",
        id="arithmetic-tip-fraction",  # old parser: 1.5 (3/20 rescaled)
    ),
    # code
    pytest.param(
        "The loop accumulates correctly:\n\n```python\ntotal = 0\nfor item in basket:\n"
        "    total += item.price\n```\n\nbut it never applies the discount.",
        id="code-fenced-total-0",  # old parser: 1 (total = 0, clamped)
    ),
    pytest.param(
        "The function sets total = 0 before the loop and never resets it between calls.",
        id="code-unfenced-total-0",  # old parser: 1
    ),
    pytest.param(
        "It initialises `score = 0` and adds one point per matching keyword.",
        id="code-inline-score-0",  # old parser: 1
    ),
    pytest.param(
        "The candidate's config is:\n```yaml\nscore: 5\ngrade: 3\n```\nwhich is what the user asked for.",
        id="code-yaml-score-key",  # old parser: 3
    ),
    # quantities
    pytest.param(
        "The answer names 5 of the 8 items (5/8) the user asked for and invents two more.",
        id="quantity-5-of-8",  # old parser: 6.25 (5/8 rescaled)
    ),
    pytest.param(
        "The reading list suits a grade 3 class and avoids long chapters.",
        id="quantity-grade-3-class",  # old parser: 3
    ),
    pytest.param(
        "The recipe has a total of 7 steps and bakes for forty minutes.",
        id="quantity-total-of-7-steps",  # old parser: 7
    ),
    pytest.param(
        "The character sheet gives the hero 12/12 hit points, as the game rules require.",
        id="quantity-12-of-12-hit-points",  # old parser: 10
    ),
    pytest.param(
        "The review it wrote gives the film a score of 8.5 out of 10, which fits the requested "
        "enthusiastic tone.",
        id="quantity-score-inside-the-candidate-text",  # old parser: 8.5
    ),
    pytest.param(
        'The candidate ends with "I would rate this phone 9 out of 10" as the prompt asked.',
        id="quoted-first-person-rating",  # old parser: 9
    ),
    pytest.param(
        "Only 3 out of 4 key facts appear and one of them is garbled.",
        id="quantity-3-out-of-4-facts",  # old parser: 7.5
    ),
    pytest.param("Grade: 3 of the 5 criteria are met.", id="label-followed-by-a-quantity"),  # old: 3
    pytest.param("Score: 85% of the steps are correct.", id="label-followed-by-a-percentage"),  # old: 10
    pytest.param("Score: 7-8, depending on how strictly you read the brief.", id="score-range"),  # old: 7
    pytest.param("We give 2 examples below; neither compiles.", id="first-person-quantity"),
]


@pytest.mark.parametrize("text", NOT_A_SCORE)
@pytest.mark.parametrize("r", [TEN, NINE], ids=["1-10", "0-9"])
def test_numbers_in_the_reasoning_are_not_a_score(r: Rubric, text: str) -> None:
    assert_null(parse(r, text))


def test_dimension_line_followed_by_a_quantity_is_not_a_score() -> None:
    # old parser: accuracy 5 (the count of correct facts)
    pv = parse(DIMS, "Accuracy: 5 of the 8 facts are right.\nClarity: 9/10\n\nScore: 7")
    assert pv.null_reason is None
    assert pv.scores == {"accuracy": 7.0, "clarity": 9.0}
    assert "holistic_fallback" in pv.flags


def test_a_dict_in_a_code_block_is_not_a_json_verdict() -> None:
    # old parser: 3 (the dict literal in the candidate's Python code, read as a JSON verdict)
    text = (
        "The candidate's module sets its defaults as asked:\n\n```python\n"
        'DEFAULTS = {"score": 3, "count": 0}\n```\n\nRating: [[8]]'
    )
    assert parse(TEN, text).holistic == 8.0
    assert parse(TEN, '```json\n{"score": 7, "reasoning": "Fine."}\n```').holistic == 7.0


_QUANTITY_SENTENCES = (
    "The answer computes {a}/{b} = {c}.",
    "It lists {a} of the {b} items ({a}/{b}).",
    "The plan fits a grade {a} class.",
    "There is a total of {a} steps.",
    "The code sets total = {a} first.",
    "The candidate scored {a} out of {b} on its own quiz.",
    "About {a}% of the claims are sourced.",
    "Version {a}.{b} is the one the question names.",
    "It takes {a} minutes and {b} seconds.",
    "{a} + {b} = {c}, which the output gets right.",
)


@given(
    parts=st.lists(
        st.tuples(
            st.sampled_from(_QUANTITY_SENTENCES),
            st.integers(0, 120),
            st.integers(1, 120),
            st.integers(0, 120),
            st.sampled_from([" ", "\n", "\n\n", "\n- "]),
        ),
        min_size=1,
        max_size=6,
    )
)
@settings(max_examples=300, deadline=None)
def test_prose_made_of_quantities_is_never_a_score(parts: list[tuple[str, int, int, int, str]]) -> None:
    text = "".join(sep + tpl.format(a=a, b=b, c=c) for tpl, a, b, c, sep in parts)
    for r in (TEN, NINE, DIMS):
        assert_null(parse(r, text))
    assert_null(parse(PF, text))


# A label on a line of its own, then a list or a sentence: the label heads the reasoning, the
# number starts a list item or a quantity. A value on the line after its label must be the
# whole line ("### Score" + newline + "8").
LABEL_THEN_LIST = [
    pytest.param("### Evaluation\n1. Accuracy: the facts are right.\n2. Clarity: good.", id="heading-list"),
    pytest.param("**Assessment:**\n\n1. The response answers the question.\n2. It is short.", id="bold-list"),
    pytest.param("Verdict:\n1. It is correct.", id="verdict-list"),
    pytest.param("Evaluation:\n\n10/10 unit tests pass, but edge cases are not.", id="fraction-sentence"),
    pytest.param("Rating:\n3 bugs remain in the parser.", id="quantity-sentence"),
    pytest.param("Overall:\n3. The third point is weak.", id="overall-list"),
]


@pytest.mark.parametrize("text", LABEL_THEN_LIST)
def test_a_label_line_followed_by_a_list_or_a_sentence_is_not_a_score(text: str) -> None:
    # old parser: 1, 1, 1, 10, 3, 3
    assert_null(parse(TEN, text))
    assert parse(TEN, "### Score\n8\n\nClear and correct.").holistic == 8.0
    assert parse(TEN, "Final rating:\n\n**7/10**").holistic == 7.0


def test_json_the_judge_quotes_is_data_not_a_verdict() -> None:
    # old parser: 1 (total clamped), 3, 3 -- the candidate's JSON, read as the verdict
    text = '{"total": 0, "items": []} is what the function returns on empty input. Score: 8'
    assert parse(TEN, text).holistic == 8.0
    text = 'The candidate returns `{"score": 3}` as the spec says. Rating: [[8]]'
    assert parse(TEN, text).holistic == 8.0
    # a score key says "verdict" whatever else the object holds: against the text, a conflict
    # (a null, never a guess between the two)
    text = 'The candidate returned:\n```\n{"score": 3, "id": 1}\n```\nas required. Rating: [[8]]'
    assert_null(parse(TEN, text))
    # with nothing else stated, such JSON gives no score at all
    assert_null(parse(TEN, 'The function returns {"total": 0, "items": []} on empty input.'))
    # a verdict-shaped object in prose is a statement: against another statement, a conflict
    pv = parse(TEN, 'The candidate wrote {"score": 3} in its output. I rate it 9.')
    assert_null(pv)
    assert "conflicting_scores" in pv.flags


@pytest.mark.parametrize(
    ("r", "text"),
    [
        pytest.param(TEN, '{"score": 9}\nOn reflection the code is wrong.\n{"score": 4}', id="two-json"),
        pytest.param(TEN, '{"reasoning": "Good.", "score": 9}\n\nScore: 4', id="json-then-text"),
        pytest.param(TEN, 'Score: 4\n\n```json\n{"reasoning": "Fine.", "score": 9}\n```', id="text-json"),
        pytest.param(
            PF, '{"verdict": "pass", "reasoning": "ok"} {"verdict": "fail", "reasoning": "no"}', id="pf"
        ),
    ],
)
def test_json_verdicts_follow_the_conflict_rule(r: Rubric, text: str) -> None:
    # old parser: 4, 9, 9, fail -- the last (or only the) JSON object won, unmarked
    pv = parse(r, text)
    assert_null(pv)
    assert "conflicting_scores" in pv.flags


def test_json_and_text_that_agree_or_a_final_statement_settle() -> None:
    text = '```json\n{"reasoning": "Clear.", "score": 8}\n```\n\nScore: 8/10'
    assert (parse(TEN, text).holistic, parse(TEN, text).notes) == (8.0, "Clear.")
    assert parse(TEN, '{"reasoning": "ok", "score": 9}\n\nFinal score: 4').holistic == 4.0
    # a format example (placeholder reasoning) before the verdict is not a statement
    text = (
        'Format:\n```json\n{"reasoning": "<why>", "score": 5}\n```\nMine: {"reasoning": "Good.", "score": 9}'
    )
    assert parse(TEN, text).holistic == 9.0


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("Rating: 9. Actually, upon reflection, Rating: 6.", id="after-a-comma"),
        pytest.param("I'd rate this a 10, no wait, a 6.", id="comma-then-another-number"),
        pytest.param("Score: 8, or 6 if the typo matters.", id="score-comma-alternative"),
    ],
)
def test_a_second_value_after_a_comma_is_not_missed(text: str) -> None:
    # old parser: 9, 10, 8 -- the first value, as if nothing had contradicted it
    assert_null(parse(TEN, text))
    assert parse(TEN, "Score: 8, because every step is right.").holistic == 8.0


# -- conflicting statements ------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        # old parser: 8 (the last one)
        pytest.param("Score: 6\n\nOn reflection the examples are solid.\n\nScore: 8", id="two-scores"),
        # old parser: 6 (the bracket form first)
        pytest.param("Rating: [[6]]\n\nI'd give it 8 out of 10.", id="bracket-and-first-person"),
        # old parser: 6 (the last one; the final one came first)
        pytest.param("Final score: 8\n\nScore: 6", id="final-then-unmarked"),
        # old parser: 8
        pytest.param("Final score: 7\n\nFinal score: 8", id="two-finals-disagree"),
        # old parser: 8 -- "overall" says holistic (not per dimension), not "final"
        pytest.param("Overall rating: 6\n\nOverall rating: 8", id="overall-is-not-final"),
        # old parser: 8
        pytest.param("Score: 11\n\nScore: 8", id="out-of-scale-and-in-scale"),
        # "final" names the candidate's answer here, not the verdict
        pytest.param("Score: 5\n\nI would give the final answer a 3.", id="final-answer-is-not-a-marker"),
    ],
)
def test_conflicting_statements_without_a_final_marker_are_null(text: str) -> None:
    pv = parse(TEN, text)
    assert_null(pv)
    assert "conflicting_scores" in pv.flags


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("Score: 6\n\nOn reflection it is better.\n\nFinal score: 8", 8.0, id="final-score"),
        pytest.param("Rating: [[6]]\n\nFinal verdict: [[8]]", 8.0, id="final-verdict-bracket"),
        pytest.param("**Score:** 5\n\n**Final rating:** 7/10", 7.0, id="final-rating-bold"),
        pytest.param("Score: 5\n\nMy final score is 9.", 9.0, id="my-final-score-is"),
        pytest.param(
            "Rating: 4\n\nI would give it a final score of 6 out of 10.", 6.0, id="first-person-final"
        ),
    ],
)
def test_the_last_statement_wins_when_marked_final(text: str, expected: float) -> None:
    pv = parse(TEN, text)
    assert pv.null_reason is None
    assert pv.holistic == expected


def test_statements_that_agree_are_fine() -> None:
    pv = parse(TEN, "Score: 8/10\n\nRating: [[8]]\n\nI'd give it 8 out of 10.")
    assert (pv.null_reason, pv.holistic, pv.flags) == (None, 8.0, [])
    pv = parse(TEN, "Score: 4/5\n\nRating: [[8]]")  # the same score, once rescaled
    assert (pv.null_reason, pv.holistic, pv.flags) == (None, 8.0, ["rescaled"])


@pytest.mark.parametrize(
    ("r", "text", "expected", "flags"),
    [
        (TEN, "4/5", 8.0, ["rescaled"]),  # old parser: 8.0 without the flag (mypy, issue 19)
        (TEN, "  4/5\n", 8.0, ["rescaled"]),
        (TEN, "8/10", 8.0, []),  # on the rubric's own scale: nothing rescaled
        (NINE, "8/10", 7.2, ["rescaled"]),
    ],
)
def test_a_bare_fraction_keeps_its_rescaled_flag(
    r: Rubric, text: str, expected: float, flags: list[str]
) -> None:
    pv = parse(r, text)
    assert (pv.null_reason, pv.holistic, pv.flags) == (None, expected, flags)


def test_conflicting_dimension_lines_leave_the_dimension_missing() -> None:
    # old parser: accuracy 9 (the last line)
    pv = parse(DIMS, "Accuracy: 6/10\nClarity: 8/10\n\nOn second thought:\nAccuracy: 9/10")
    assert pv.null_reason == "parse_error"
    assert pv.extra["missing_dimensions"] == ["accuracy"]
    assert "conflicting_scores" in pv.flags


# -- pass-fail: the same rules for verdict words ----------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        # old parser: fail (the last one)
        pytest.param("Verdict: PASS\n\nLooking again at the edge cases:\n\nVerdict: FAIL", id="conflict"),
        # old parser: pass (a key inside the candidate's build log)
        pytest.param(
            "```\nresult: passed\n```\nThe log above is the candidate's; its answer is still wrong.",
            id="code-block",
        ),
        # old parser: fail (a count of checks, not the verdict)
        pytest.param("The outcome: failed 2 of 10 checks, which the rubric allows.", id="quantity"),
        pytest.param("The first unit test result passed; the second failed.", id="prose"),
    ],
)
def test_pass_fail_words_in_the_reasoning_or_in_conflict_are_null(text: str) -> None:
    assert_null(parse(PF, text))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("PASS", "pass", id="bare-PASS"),  # old parser: null
        pytest.param(" fail.\n", "fail", id="bare-fail"),  # old parser: null
        pytest.param("**FAIL**", "fail", id="bare-bold-FAIL"),  # old parser: null
        pytest.param("[[PASS]]", "pass", id="bare-bracket"),
        pytest.param("Verdict: FAIL\n\nOn reflection:\n\nFinal verdict: PASS", "pass", id="final-wins"),
        pytest.param("Verdict: PASS\n\n[[PASS]]", "pass", id="agree"),
        pytest.param("### Verdict\n**FAIL**", "fail", id="heading"),
    ],
)
def test_explicit_pass_fail_verdicts(text: str, expected: str) -> None:
    pv = parse(PF, text)
    assert (pv.null_reason, pv.verdict) == (None, expected)


# -- explicit numeric statements ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("9", 9.0, id="bare-9"),  # old parser: null
        pytest.param(" 7\n", 7.0, id="bare-7-blanks"),  # old parser: null
        pytest.param("**8**", 8.0, id="bare-bold"),  # old parser: null
        pytest.param("8.", 8.0, id="bare-with-full-stop"),  # old parser: null
        pytest.param("6/10", 6.0, id="bare-fraction"),
        pytest.param("[[5]]", 5.0, id="bare-bracket"),
        pytest.param(
            "The answer is correct and concise. I'd give it 8 out of 10.", 8.0, id="id-give-8-of-10"
        ),
        pytest.param("I would rate this response 7 out of 10.", 7.0, id="i-would-rate-7-of-10"),
        pytest.param("Clear and correct; this response deserves a 6/10.", 6.0, id="deserves-6-of-10"),
        pytest.param("Mostly right.\n\nScore: 8 out of 10", 8.0, id="score-8-out-of-10"),
        pytest.param("Mostly right.\n\nscore: 8/10", 8.0, id="score-slash-10"),
        pytest.param("Mostly right. Score: 8", 8.0, id="score-after-a-sentence"),
        pytest.param("Therefore, the final score is 7.", 7.0, id="connective-final-score-is"),
        pytest.param("- Score (1-10): 9", 9.0, id="bullet-with-parenthetical"),
        pytest.param("### Score\n\n**4**", 4.0, id="heading-then-bold-value"),
        pytest.param("Rating: 8 - solid but verbose", 8.0, id="score-then-dash-comment"),
        pytest.param(
            'Hence I rate it as follows: "Rating: [[9]]".', 9.0, id="judge-quotes-its-own-verdict-format"
        ),
    ],
)
def test_explicit_score_statements(text: str, expected: float) -> None:
    pv = parse(TEN, text)
    assert (pv.null_reason, pv.holistic) == (None, expected)


@pytest.mark.parametrize(
    "text", ["PASS", "Verdict: PASS", "[[A]]", "Final Verdict: [[B]]", "Output (a) is better."]
)
def test_a_numeric_rubric_reads_no_score_from_words_or_letters(text: str) -> None:
    assert_null(parse(TEN, text))


@pytest.mark.parametrize("text", ["9", "Score: 8/10", "[[1]]"])
def test_a_pass_fail_rubric_reads_no_verdict_from_numbers(text: str) -> None:
    assert_null(parse(PF, text))


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("Score: 11", id="above"),  # old parser: 10 (clamped)
        pytest.param("Rating: [[0]]", id="below"),  # old parser: 1 (clamped)
        pytest.param("Score: 12/10", id="fraction-above"),  # old parser: 10 (clamped)
        pytest.param("-2", id="bare-negative"),
    ],
)
def test_a_stated_number_outside_the_scale_is_null_not_clamped(text: str) -> None:
    pv = parse(TEN, text)
    assert_null(pv)
    assert pv.flags == ["out_of_scale"]


def test_json_scores_outside_the_scale_are_still_clamped() -> None:
    pv = parse(TEN, '{"reasoning": "Better than the reference.", "score": 11}')
    assert (pv.holistic, pv.flags) == (10.0, ["clamped"])


@pytest.mark.parametrize(
    "text",
    [
        " " * 100_000,
        '"' + "a " * 50_000,
        "I would rate " * 10_000,
        "Score: " * 15_000,
        "[[" * 50_000,
        "*" * 100_000,
        "1 " * 50_000,
        "Accuracy: " * 10_000,
        "```" * 30_000,
        "- " * 50_000,
        "Score:\n" * 20_000,
        "8 out of " * 10_000,
    ],
    ids=lambda t: repr(t[:12]),
)
def test_hostile_text_parses_quickly(text: str) -> None:
    for r in (TEN, DIMS, PF):
        started = time.perf_counter()
        pv = parse(r, text)
        assert time.perf_counter() - started < 5.0
        assert pv.null_reason is not None or pv.holistic is not None or pv.verdict is not None


# -- general integer scales ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("scale", "lo", "hi", "threshold"),
    [
        ("1-10", 1, 10, 7.0),
        ("1-5", 1, 5, 4.0),
        ("0-9", 0, 9, 6.0),
        ("0-10", 0, 10, 7.0),
        ("1-7", 1, 7, 5.0),
        ("0-5", 0, 5, 4.0),  # 0.7 x 5 = 3.5: halves round up, computed without float error
        ("0-4", 0, 4, 3.0),
        ("0-1", 0, 1, 1.0),
        ("0-100", 0, 100, 70.0),
    ],
)
def test_general_scales_and_their_default_threshold(scale: str, lo: int, hi: int, threshold: float) -> None:
    r = rubric(scale)
    assert (r.scale, r.lo, r.hi, r.threshold, r.is_pass_fail) == (scale, lo, hi, threshold, False)
    assert scale_range(scale) == (lo, hi)
    assert default_pass_threshold(lo, hi) == threshold


def test_builtin_defaults_follow_the_rule() -> None:
    assert DEFAULT_PASS_THRESHOLDS == {"1-5": 4.0, "1-10": 7.0}
    assert rubric("pass-fail").threshold is None and rubric("pass-fail").scale_range == (0, 1)


def test_scale_is_stored_in_canonical_form() -> None:
    assert rubric('" 0 - 9 "').scale == "0-9"
    assert rubric("01-07").scale == "1-7"


@pytest.mark.parametrize(
    "scale",
    ["0-101", "5-3", "3-3", "-1-5", "1.5-7", "1-10-2", "likert", "10", "1 to 10", "Pass-Fail", "'٠-٩'"],
)
def test_invalid_scales_give_one_clear_line(scale: str) -> None:
    with pytest.raises(RubricError) as info:
        rubric(scale)
    message = str(info.value)
    assert message.startswith("traps.md: scale: Input should be 'pass-fail', 'pairwise', '1-5' or '1-10'"), (
        message
    )
    assert "0 <= LO < HI <= 100" in message and len(message.splitlines()) == 1


def test_general_scale_bounds_validate_threshold_anchors_and_goldens() -> None:
    with pytest.raises(RubricError, match=r"pass_threshold: 9.5 is outside the scale 0-9"):
        rubric("0-9", "pass_threshold: 9.5\n")
    with pytest.raises(RubricError, match=r"band '8-10' is not within the scale 0-9"):
        rubric("0-9", "dimensions:\n  - {name: a, weight: 1.0, anchors: {'8-10': x}}\n")
    with pytest.raises(RubricError, match=r"must be a number from 0 to 9"):
        rubric("0-9", "goldens:\n  - {name: g, input: i, output: o, expected: 10}\n")
    r = rubric("0-9", "pass_threshold: 5\ndimensions:\n  - {name: a, weight: 1.0, anchors: {'0-2': x}}\n")
    assert r.threshold == 5.0
    assert (
        rubric("0-9", "goldens:\n  - {name: g, input: i, output: o, expected: 0}\n").goldens[0].expected == 0
    )


@pytest.mark.parametrize(
    ("text", "expected", "flags"),
    [
        ("0", 0.0, []),  # not clamped up to 1 (the reason 0-based scales exist)
        ("9", 9.0, []),
        ("Score: 7/9", 7.0, []),
        ("Score: 8/10", 7.2, ["rescaled"]),
        ('{"score": 0, "reasoning": "Off-topic."}', 0.0, []),
        ('{"score": 10, "reasoning": "Perfect."}', 9.0, ["clamped"]),
    ],
)
def test_parsing_on_a_zero_based_scale(text: str, expected: float, flags: list[str]) -> None:
    pv = parse(NINE, text)
    assert (pv.null_reason, pv.holistic, pv.flags) == (None, expected, flags)


@pytest.mark.parametrize("text", ["10", "Score: 10", "Rating: [[10]]"])
def test_a_stated_ten_is_null_on_a_zero_to_nine_scale(text: str) -> None:
    pv = parse(NINE, text)
    assert_null(pv)
    assert pv.flags == ["out_of_scale"]


@given(lo=st.integers(0, 99), span=st.integers(1, 100), n=st.integers(-5, 110))
@settings(max_examples=300, deadline=None)
def test_stated_integers_on_any_scale(lo: int, span: int, n: int) -> None:
    hi = min(lo + span, 100)
    r = rubric(f"{lo}-{hi}")
    inside = lo <= n <= hi
    for text in (str(n), f"Score: {n}", f"Rating: [[{n}]]", f"The answer is fine.\n\nFinal score: {n}"):
        pv = parse(r, text)
        if inside:
            assert (pv.null_reason, pv.holistic) == (None, float(n)), text
        else:
            assert (pv.null_reason, pv.holistic) == ("parse_error", None), text
    pv = parse(r, f'{{"score": {n}}}')
    assert pv.holistic == float(min(max(n, lo), hi))


def test_scoring_rendering_and_grades_on_a_zero_based_scale() -> None:
    pv = parse(NINE, "0")
    score = score_verdict(NINE, pv)
    assert (score.overall, score.passed) == (0.0, False)
    assert score_verdict(NINE, parse(NINE, "6")).passed
    assert not score_verdict(NINE, parse(NINE, "5")).passed
    assert "an integer from 0 to 9" in output_schema(NINE)["properties"]["score"]["description"]
    assert (llm_grade(0.0, NINE), llm_grade(9.0, NINE), llm_grade(4.5, NINE)) == (1, 10, 6)


@pytest.mark.parametrize("scale", ["0-9", "1-7", "0-100"])
def test_the_lexical_judge_answers_on_a_general_scale(scale: str) -> None:
    r = rubric(scale)
    request = render_request(
        r, input="What is the capital of France?", output="Paris.", expected_answer="Paris"
    )
    reply = LexicalJudge().complete(request, timeout=1.0)
    pv = parse_verdict(r, text=reply.text)
    assert pv.null_reason is None and pv.holistic == float(r.hi)


# -- found by a second review: what the rules above must not break --------------------------------


@pytest.mark.parametrize(
    ("r", "text"),
    [
        pytest.param(
            TEN, "For a perfect answer, the score is 10. This answer misses the derivation.", id="cond"
        ),
        pytest.param(TEN, "Had all criteria been met, the grade is 10. Only two were.", id="counterfactual"),
        pytest.param(TEN, "The candidate claims, the score is 10. I disagree.", id="claim"),
        pytest.param(
            PF, "For a fully correct answer, the verdict is PASS. This one misses two steps.", id="pf"
        ),
    ],
)
def test_a_clause_after_a_comma_is_not_a_verdict(r: Rubric, text: str) -> None:
    assert_null(parse(r, text))


@pytest.mark.parametrize(
    ("r", "text", "expected"),
    [
        pytest.param(PF, "Verdict: PASS, although 1 of the tests is flaky.", "pass", id="pf-although"),
        pytest.param(PF, "Final verdict: FAIL, because step 3 is wrong.", "fail", id="pf-because"),
        pytest.param(TEN, "Score: 6, since 2 of the 5 requirements are missing.", 6.0, id="since-quantity"),
        pytest.param(TEN, "I would rate it a 7, given that it misses 2 edge cases.", 7.0, id="given-that"),
        pytest.param(TEN, 'Here it is:\n{"reason": "ok", "score": 7}', 7.0, id="json-reason-key"),
        pytest.param(TEN, 'Here it is:\n```json\n{"score": 7, "issues": []}\n```', 7.0, id="json-extra-key"),
        pytest.param(TEN, '```json\n{"score": 7, "issues": []}\n```\nThanks.', 7.0, id="json-then-thanks"),
        pytest.param(PF, 'Here:\n{"verdict": "PASS", "reason": "ok"}', "pass", id="pf-json-reason"),
        pytest.param(TEN, '{"reasoning": "", "score": 7}', 7.0, id="empty-reasoning"),
        pytest.param(TEN, '```json\n{"reasoning": "...", "score": 7}\n```', 7.0, id="dots-reasoning-whole"),
        pytest.param(TEN, '```{"reasoning":"ok","score":7}```', 7.0, id="one-line-fence"),
        pytest.param(TEN, '```json {"reasoning":"ok","score":7}```', 7.0, id="one-line-json-fence"),
        pytest.param(TEN, '`{"reasoning":"ok","score":7}`', 7.0, id="inline-span-whole"),
        pytest.param(TEN, "### Score\n8 - a solid answer", 8.0, id="next-line-dash"),
    ],
)
def test_explicit_verdicts_with_a_reason_or_extra_keys_are_read(
    r: Rubric, text: str, expected: object
) -> None:
    pv = parse(r, text)
    assert pv.null_reason is None, (pv.raw, pv.flags)
    assert (pv.verdict if isinstance(expected, str) else pv.holistic) == expected


def test_pairwise_json_with_a_reason_key_and_dimensions_on_one_line() -> None:
    pair = rubric("pairwise")
    assert parse(pair, 'Here:\n{"winner": "A", "reason": "ok"}').verdict == "A"
    pv = parse(DIMS, "Accuracy: 9, Clarity: 8\nOverall: 8.5")
    assert pv.scores == {"accuracy": 9.0, "clarity": 8.0}
    pv = parse(DIMS, "- Accuracy: 9, it handles all 3 cases\n- Clarity: 8\nOverall: 8.5")
    assert pv.scores == {"accuracy": 9.0, "clarity": 8.0}


def test_a_pair_preference_after_a_comma_counts_only_as_the_replys_last_words() -> None:
    pair = rubric("pairwise")
    assert parse(pair, "Both are correct, but on balance, Output (b) is better.").verdict == "B"
    for text in (
        "If brevity were the only goal, Output (a) is better. But the task asks for accuracy.",
        "Judged on tone alone, Output (a) is better. On accuracy the two are level.",
    ):
        assert_null(parse(pair, text))

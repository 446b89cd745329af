"""Parsing a judge's answer into scores.

Accepted, in order of preference:

1. a tool call's input (a dict), for older models and other providers;
2. JSON verdicts in the text, fenced or bare, and explicit statements in free text (below),
   read together: each JSON verdict is one more statement, at its place in the reply.

A JSON object is a verdict when it is the whole reply (bare or alone in a fenced block), has a
reasoning key (``reasoning``, ``explanation``, ``strengths``, ...), or has only keys a verdict
has (``score``, ``verdict``, the rubric's dimensions, ...).  Other JSON is data the judge
quotes (the candidate's ``{"total": 0, "items": []}``), and so is JSON in inline code or in a
code block tagged with another language; a format example whose reasoning is a placeholder
(``{"reasoning": "<why>", "score": 5}``) is not a statement either.  A JSON verdict's own
strings are never read as free text.

**The parser never invents a score.**  A null is counted and visible; a wrong number is
neither.  The free-text fallback therefore reads *explicit statements* only, and nothing
else in the text is ever read as a score:

* a labelled statement, at the start of a line (after list bullets, heading marks, bold) or
  of a sentence, optionally after a connective ("Therefore, "): a label ``score``,
  ``rating``, ``grade``, ``mark``, ``verdict``, ``evaluation``, ``judgement``,
  ``assessment``, ``decision`` (optionally after ``the``/``my``/``our``/``final``/
  ``overall``/``holistic``/``total``), or ``final``/``overall`` alone, then ``:``, `` is``,
  a spaced dash or a line break, then the value: ``Score: 8``, ``score: 8/10``,
  ``**Overall score:** 7``, ``Rating: [[8]]``, ``The final score is 7.``, ``### Score``
  + newline + ``8`` (a value on the line after its label must be that whole line:
  ``Evaluation:`` + newline + ``1. The answer ...`` starts a list); a statement may also
  follow a comma (``Actually, upon reflection, Rating: 6``);
* a first-person verdict: ``I'd give it 8 out of 10``, ``I would rate this response a 7``,
  ``we rate it 6/10``, and ``deserves``/``merits``/``warrants a 6/10``;
* a value in double brackets anywhere: ``[[8]]``, ``[[8/10]]`` (the MT-Bench convention);
* a reply that is nothing but a number (``9``, ``**8**``, ``8/10``; blanks around it are fine).

A value is a number, optionally ``/D`` or ``out of D``.  A plain number must end its
statement: what follows it is the end of the line, punctuation that does not lead to another
number (a comma: no other number in the rest of the sentence, so ``I'd rate it a 10, no
wait, a 6`` states nothing), or ``because``/``since``; so ``Grade: 3 of the 5 criteria``, ``Score: 85%``,
``Score: 7-8`` and ``I give 2 examples`` are not statements.  Never read: numbers in fenced
code blocks and inline code (``total = 0``), in quoted passages that contain a blank (the
candidate's words; a quoted passage that is itself a statement, ``"Rating: [[9]]"``, is
kept), after ``out of`` or ``/`` (a denominator), arithmetic (``30/36 = 5/6``, ``9/5``),
quantities (``5 of the 8 items (5/8)``, ``a grade 3 class``, ``a total of 7 steps``,
``12/12 hit points``) and scores the candidate states (``the review gives it 8.5 out of 10``).
Such a reply is ``parse_error``.

Several statements (JSON verdicts included): when they all state the same value they
agree.  When they conflict, the last statement wins only when it is **marked final** --
``final`` qualifies the verdict in its label or first-person phrase (``Final score: 8``,
``Final: 8``, ``Final verdict: [[8]]``, ``My final score is 8``, ``I would give it a final
score of 8``; not ``the final answer``)
-- and no other final statement disagrees.  ``Overall`` is *not* a final marker (it means
holistic as opposed to per dimension, not "after reconsideration"), nor are ``Finally,``,
``Therefore,`` or the ``[[N]]`` form.  An unsettled conflict is null with the flag
``conflicting_scores`` (``extra["conflicting"]`` lists the stated values).  Per-dimension
lines (``Accuracy: 8/10``, ``**Clarity score:** 7``, at the start of a line or sentence)
follow the same rules; a dimension whose lines conflict is missing (holistic fallback, else
``parse_error``).

Pass-fail rubrics: the same rules with the words ``pass``/``passed``/``fail``/``failed``
(``Verdict: PASS``, ``**Decision**: fail``, ``[[FAIL]]``, a reply that is only ``PASS``,
``Final verdict: PASS`` settling a conflict); ``Result: passed 3 of 5 tests`` is not one.

Pairwise rubrics: the verdict is ``A``, ``B`` or ``tie``. JSON: ``verdict`` (or ``winner``,
``preference``, ``choice``, …) with ``A``/``B``/``tie`` (``Output (a)``, ``[[B]]``, ``draw``
and MT-Bench's ``C`` for a tie are read too), and one such field per dimension. Free text:
``[[A]]``/``[[B]]``/``[[C]]`` anywhere (MT-Bench), ``Output (a) is better.`` as a whole
statement (LLMBar), a labelled statement (``Verdict: B``, ``Final verdict: [[A]]``,
``Winner: Output A``), or a reply that is only ``A``, ``B``, ``tie`` or ``Output (b)``;
``Output (a) is better at formatting, but ...`` is reasoning, not a verdict. Conflicts follow
the rules above (``Final verdict`` settles).

Scale: ``N/D`` with ``D`` different from the scale's top is rescaled (flag ``rescaled``).  A
JSON or tool score outside the scale is clamped (flag ``clamped``): the key says it is the
score.  A number *stated in free text* outside the scale is not clamped: it is null with the
flag ``out_of_scale`` (``10`` on a 0-9 scale, ``Score: 85``), since clamping it would guess.
Non-numeric JSON values count as missing.  Missing dimension scores fall back to the
holistic score when there is one (flag ``holistic_fallback``); a numeric verdict missing a
dimension with no holistic score to fall back on is unusable (``parse_error``): a weighted
overall over the remaining dimensions would silently change the rubric.  Nothing parseable
gives ``parse_error`` (or ``refusal`` when the judge declined) with the raw text kept,
truncated.  :func:`parse_verdict` never raises.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from judgeq.rubric.model import Rubric

__all__ = ["RAW_LIMIT", "ParsedVerdict", "Stated", "parse_verdict"]

RAW_LIMIT = 2000

_HOLISTIC_KEYS = ("score", "overall", "overall_score", "final_score", "grade", "rating", "total")
_VERDICT_KEYS = ("verdict", "result", "decision", "outcome", "pass", "passed", "label", "grade")
_SCORES_KEYS = ("scores", "dimension_scores", "dimensions", "criteria", "ratings")
_NOTES_KEYS = (
    "reasoning",
    "notes",
    "rationale",
    "explanation",
    "justification",
    "comment",
    "reason",
    "critique",
    "thoughts",
    "analysis",
    "feedback",
    "comments",
)
_PASS_WORDS = {"pass", "passed", "yes", "true", "acceptable", "correct", "good"}
_FAIL_WORDS = {"fail", "failed", "no", "false", "unacceptable", "incorrect", "bad"}

_NUM = r"([-+]?\d+(?:\.\d+)?)"
_REFUSAL_RE = re.compile(
    r"\b(?:I\s+(?:can(?:no|['’])?t|cannot|won['’]?t|will\s+not|am\s+(?:not\s+able|unable))\s+"
    r"(?:help|assist|evaluate|grade|score|comply|provide|do\s+that|engage)|"
    r"I['’]?m\s+(?:not\s+able|unable)\s+to\s+(?:help|assist|evaluate|grade))",
    re.I,
)


@dataclass(slots=True)
class ParsedVerdict:
    """What the judge said, on the rubric's scale. ``null_reason`` set means unusable."""

    scores: dict[str, float] = field(default_factory=dict)
    holistic: float | None = None
    verdict: str | None = None
    notes: str | None = None
    flags: list[str] = field(default_factory=list)
    null_reason: str | None = None
    raw: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def flag(self, name: str) -> None:
        if name not in self.flags:
            self.flags.append(name)


def _truncate(text: str) -> str:
    return text if len(text) <= RAW_LIMIT else text[:RAW_LIMIT] + f"… [{len(text)} chars]"


_DECODER = json.JSONDecoder(strict=False)  # models put raw newlines inside strings


# A fenced block tagged with a language other than JSON holds code: a dict literal in it
# (``results = {"score": 5}``) is data, not the judge's verdict.
_TAGGED_FENCE_RE = re.compile(
    r"^[ \t]{0,3}(```|~~~)[ \t]{0,4}([A-Za-z][\w+#.-]*)[^\n]*\n[\s\S]*?(?:^[ \t]{0,3}\1|\Z)", re.M
)
_JSON_TAGS = frozenset({"json", "jsonc", "json5", "jsonl", "javascript", "js"})


_INLINE_CODE_RE = re.compile(r"(?<!`)`(?!`)[^`\n]+`(?!`)")
"""A single-backtick span on one line (a fence's three backticks are not one)."""


def _json_objects(text: str) -> list[tuple[int, int, dict[str, Any]]]:
    """Every top-level JSON object in the text, in order (fenced or bare alike) with its span,
    except those inside inline code or a code block tagged with a language other than JSON
    (what the candidate wrote, quoted: data, not the judge's verdict)."""
    code = [m.span() for m in _TAGGED_FENCE_RE.finditer(text) if m.group(2).lower() not in _JSON_TAGS]
    whole = text.strip()
    code += [
        m.span() for m in _INLINE_CODE_RE.finditer(text) if "{" in m.group(0) and m.group(0) != whole
    ]  # a reply that is nothing but `{...}` is the verdict itself
    code.sort()
    found: list[tuple[int, int, dict[str, Any]]] = []
    k = 0  # code spans are in order and ``i`` only grows
    i = text.find("{")
    while i != -1:
        while k < len(code) and code[k][1] <= i:
            k += 1
        if k < len(code) and code[k][0] <= i:
            i = text.find("{", code[k][1])
            continue
        try:
            obj, end = _DECODER.raw_decode(text, i)
        except ValueError:
            i = text.find("{", i + 1)
            continue
        if isinstance(obj, dict):
            found.append((i, end, obj))
            i = text.find("{", end)
        else:
            i = text.find("{", i + 1)
    return found


def _number(value: Any, lo: float, hi: float, pv: ParsedVerdict) -> float | None:
    """A score from a JSON value: numbers, numeric strings, ``"8/10"``; else None."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, Mapping):
        lowered = _lower_keys(value)
        for key in ("score", "value", "rating", "grade"):
            if key in lowered:
                return _number(lowered[key], lo, hi, pv)
        return None
    denom: float | None = None
    if isinstance(value, str):
        m = re.fullmatch(r"\s*" + _NUM + r"\s*(?:(?:/|out\s+of)\s*(\d+(?:\.\d+)?))?\s*", value, re.I)
        if not m:
            return None
        num = float(m.group(1))
        denom = float(m.group(2)) if m.group(2) else None
    elif isinstance(value, (int, float)):
        num = float(value)
    else:
        return None
    if not math.isfinite(num):
        return None
    return _fit(num, denom, lo, hi, pv)


def _fit(num: float, denom: float | None, lo: float, hi: float, pv: ParsedVerdict) -> float | None:
    if not math.isfinite(num) or (denom is not None and not math.isfinite(denom)):
        return None
    if denom is not None and denom > 0 and denom != hi:
        num = round(num / denom * hi, 2)
        pv.flag("rescaled")
    if num < lo or num > hi:
        pv.flag("clamped")
        num = float(min(max(num, lo), hi))
    return num


def _lower_keys(obj: Mapping[str, Any]) -> dict[str, Any]:
    return {str(k).strip().lower().replace(" ", "_").replace("-", "_"): v for k, v in obj.items()}


def _verdict_word(value: Any) -> str | None:
    if isinstance(value, bool):
        return "pass" if value else "fail"
    if isinstance(value, (int, float)) and value in (0, 1):
        return "pass" if value == 1 else "fail"
    if isinstance(value, str):
        word = value.strip().strip(".!*\"'").lower()
        if word in _PASS_WORDS:
            return "pass"
        if word in _FAIL_WORDS:
            return "fail"
    return None


_PAIR_KEYS = ("verdict", "winner", "preference", "preferred", "better", "better_output", "choice")
_PAIR_WORD_RE = re.compile(
    r"(?:(?:output|response|assistant|answer|model|candidate)[ \t]*)?\(?(?P<side>[ab])\)?"
    r"|(?P<tie>tie|draw|equal|both|neither|same|c)",
    re.I,
)


def _pair_word(value: Any) -> str | None:
    """A pairwise verdict from a JSON value: ``A``, ``B`` or ``tie`` (also ``Output (a)``,
    ``[[B]]``, ``draw``, the MT-Bench tie ``C``); None for anything else."""
    if not isinstance(value, str):
        return None
    word = value.strip().strip(".!*\"'`").strip()
    if word.startswith("[[") and word.endswith("]]"):
        word = word[2:-2].strip()
    m = _PAIR_WORD_RE.fullmatch(word)
    if m is None:
        return None
    return "tie" if m.group("tie") else m.group("side").upper()


def _from_object(obj: Mapping[str, Any], rubric: Rubric, pv: ParsedVerdict) -> bool:
    """Fill ``pv`` from a JSON object; True when it carried a usable score or verdict."""
    keys = _lower_keys(obj)
    for k in _NOTES_KEYS:
        if isinstance(keys.get(k), str):
            pv.notes = keys[k]
            break
    for k in ("key_facts_present", "key_facts_missing"):
        if isinstance(keys.get(k), list):
            pv.extra[k] = [str(x) for x in keys[k]][:50]
    if rubric.is_pairwise:
        for d in rubric.dimensions:
            if (word := _pair_word(keys.get(d.name))) is not None:
                pv.extra.setdefault("dimension_verdicts", {})[d.name] = word
        for k in _PAIR_KEYS:
            if k in keys and (word := _pair_word(keys[k])) is not None:
                pv.verdict = word
                return True
        return False
    if rubric.is_pass_fail:
        for k in _VERDICT_KEYS:
            if k in keys and (word := _verdict_word(keys[k])) is not None:
                pv.verdict = word
                return True
        for k in _HOLISTIC_KEYS:
            if k in keys and (word := _verdict_word(keys[k])) is not None:
                pv.verdict = word
                return True
        return False
    lo, hi = rubric.lo, rubric.hi
    for k in _HOLISTIC_KEYS:
        if k in keys:
            pv.holistic = _number(keys[k], lo, hi, pv)
            if pv.holistic is not None:
                break
    nested: dict[str, Any] = {}
    for k in _SCORES_KEYS:
        if isinstance(keys.get(k), Mapping):
            nested = _lower_keys(keys[k])
            break
        if isinstance(keys.get(k), list):  # [{"name": "accuracy", "score": 8}, ...]
            nested = {
                str(item.get("name", "")).lower(): item for item in keys[k] if isinstance(item, Mapping)
            }
            break
    for d in rubric.dimensions:
        value = nested.get(d.name, keys.get(d.name))
        score = _number(value, lo, hi, pv) if value is not None else None
        if score is not None:
            pv.scores[d.name] = score
    return pv.holistic is not None or bool(pv.scores)


# -- free text ------------------------------------------------------------------------------
# The fallback for a reply without a usable JSON verdict.  It reads explicit statements only
# (the rules are in the module docstring); every other number is reasoning, never a score.

_T_NUM = r"[-+]?[0-9]+(?:\.[0-9]+)?"
_T_DEN = r"[0-9]+(?:\.[0-9]+)?"
# Every run of blanks inside a pattern is bounded (or possessive), so no input can make the
# patterns backtrack for long (a reply of 100,000 spaces parses in milliseconds).
_S = r"[ \t]{0,4}"
_S1 = r"[ \t]{1,4}"
# Where a statement begins: the start of a line (indented at most 3 blanks, or after a list
# bullet or number) or just after a sentence's end; then heading or quote marks, bold, and an
# optional connective ("Therefore, ", "In conclusion, ").
_START = (
    r"(?:^(?:[ \t]{0,12}(?:[-*+•]|[0-9]{1,2}[.)])" + _S1 + r"|[ \t]{0,3})(?:[#>]{1,6}" + _S + ")?"
    r"|(?<=[.!?])" + _S1 + r"|(?<=[.!?]\*\*)" + _S1 + r"|(?<=[.!?][\"”')])" + _S1 + ")"
    r"[*_]{0,3}"
    r"(?:(?:therefore|thus|hence|so|accordingly|overall|finally|in[ \t](?:conclusion|summary|short)"
    r"|all[ \t]in[ \t]all),?" + _S1 + ")?"
)
# Between a label and its value: ``:``, `` is``, a spaced dash or the end of a heading line;
# bold on either side; an optional short parenthetical first ("Score (1-10): 8").
_SEP = (
    r"[*_]{0,3}(?:" + _S + r"\([^()\n]{0,40}\))?" + _S + r"[*_]{0,3}"
    r"(?::|(?<=[ \t])(?:is|[-–—])(?=[ \t])|(?=[ \t]*+\n))"
    r"[*_]{0,3}(?:" + _S + r"\n){0,2}" + _S + r"[#>]{0,6}"
)
_DIM_SEP = r"[*_]{0,3}(?:" + _S + r"\([^()\n]{0,40}\))?" + _S + r"[*_]{0,3}" + _S + r"[:\-–—][*_]{0,3}"
# fmt: off
_VALUE = (
    _S + r"(?P<open>\[\[|\*\*|__|\*|_)?" + _S + r"(?P<num>" + _T_NUM + ")"
    + r"(?:" + _S + r"(?:/|out" + _S1 + "of)" + _S + r"(?P<den>" + _T_DEN + "))?"
    + _S + r"(?P<close>\]\]|\*\*|__|\*|_)?"
)
_WORD_VALUE = (
    _S + r"(?P<open>\[\[|\*\*|__|\*|_|\")?" + _S + r"(?P<word>pass(?:ed)?|fail(?:ed)?)\b"
    + _S + r"(?P<close>\]\]|\*\*|__|\*|_|\")?"
)
# fmt: on
_QUALIFIERS = r"(?:(?:the|my|our|final|overall|holistic|total)" + _S1 + "){0,3}"
_SCORE_LABEL = (
    r"(?P<label>" + _QUALIFIERS + r"(?:score|rating|grade|mark|verdict|evaluation|judge?ment"
    r"|assessment|decision)|final|overall)"
)
_VERDICT_LABEL = (
    r"(?P<label>" + _QUALIFIERS + r"(?:verdict|result|decision|grade|outcome|judge?ment"
    r"|evaluation|assessment|rating|conclusion))"
)
# A first-person verdict ("I'd give it 8 out of 10", "I would rate this response a 7") or a
# judgement verb ("it deserves a 6/10").  The words between the verb and the value hold no
# digit and do not end the sentence.
# fmt: off
_VERB = (
    r"\b(?P<label>(?:(?:I|we)(?:['’]d|['’]ll|" + _S1 + r"(?:would|will|shall|can|must|should|could))?"
    + "(?:" + _S1 + r"(?:therefore|thus|hence|then|now|definitely|confidently))?"
    + _S1 + r"(?:give|rate|score|grade|award|assign|mark)|deserves|merits|warrants)\b"
    + r"[^\n.!?:;0-9\[\]*_]{0,80}?)"
)
# fmt: on
# After a comma, only a bare label and a colon ("Actually, upon reflection, Rating: 6"): "For a
# perfect answer, the score is 10" is a condition, not a verdict.
_COMMA_START = r"(?<=,)" + _S1 + r"[*_]{0,3}"
_COLON = r"[*_]{0,3}" + _S + r":[*_]{0,3}"
_SCORE_STATEMENT_RES = (
    re.compile(_START + _SCORE_LABEL + _SEP + _VALUE, re.I | re.M),
    re.compile(_VERB + _VALUE, re.I | re.M),
    re.compile(
        _COMMA_START + r"(?P<label>(?:final[ \t]+)?(?:score|rating|grade|verdict))" + _COLON + _VALUE, re.I
    ),
)
_VERDICT_STATEMENT_RES = (
    re.compile(_START + _VERDICT_LABEL + _SEP + _WORD_VALUE, re.I | re.M),
    re.compile(_VERB + _WORD_VALUE, re.I | re.M),
    re.compile(
        _COMMA_START + r"(?P<label>(?:final[ \t]+)?(?:verdict|result|decision))" + _COLON + _WORD_VALUE, re.I
    ),
)
# fmt: off
_BRACKET_SCORE_RE = re.compile(
    r"(?P<open>\[\[)" + _S + r"(?P<num>" + _T_NUM + ")" + _S
    + r"(?:/" + _S + r"(?P<den>" + _T_DEN + ")" + _S + r")?(?P<close>\]\])"
)
# fmt: on
_BRACKET_VERDICT_RE = re.compile(
    r"(?P<open>\[\[)" + _S + r"(?P<word>pass(?:ed)?|fail(?:ed)?)" + _S + r"(?P<close>\]\])", re.I
)
# A reply that is nothing but a number or a verdict word (matched against the stripped reply).
# fmt: off
_BARE_SCORE_RE = re.compile(
    r"[*_\"'`]{0,3}" + _S + r"(?P<num>" + _T_NUM + ")"
    + r"(?:" + _S + r"(?:/|out" + _S1 + "of)" + _S + r"(?P<den>" + _T_DEN + "))?"
    + _S + r"[*_\"'`]{0,3}\.?",
    re.I,
)
# fmt: on
_BARE_VERDICT_RE = re.compile(
    r"[*_\"'`]{0,3}" + _S + r"(?P<word>pass(?:ed)?|fail(?:ed)?)" + _S + r"[*_\"'`]{0,3}[.!]?", re.I
)
# Pairwise verdicts: "[[A]]" / "[[B]]" / "[[C]]" (tie; MT-Bench) anywhere; "Output (a) is better."
# (LLMBar) as a whole statement; "Verdict: B", "Winner: Output A", "Final verdict: tie"; a reply
# that is only "A", "B", "tie" or "Output (b)".
_PAIR_VALUE = r"(?:output|response|assistant|answer)?[ \t]{0,2}\(?[ab]\)?|tie|draw"
_PAIR_END = r"[ \t]*+[*_]{0,3}[ \t]*+(?:[.!]|(?=\n)|\Z)"
_PAIR_BETTER = (
    r"(?P<word>(?:output|response|assistant|answer)[ \t]{0,2}\(?[ab]\)?)[*_]{0,3}[ \t]+is[ \t]+"
    r"(?:the[ \t]+)?(?:better|preferred|superior)(?:[ \t]+(?:one|output|response|answer))?"
)
_PAIR_STATEMENT_RES = (
    re.compile(_START + _PAIR_BETTER + _PAIR_END, re.I | re.M),
    # after a comma only as the reply's last words ("..., Output (a) is better."): earlier, a
    # clause like "If brevity were the only goal, Output (a) is better." is a condition
    re.compile(r"(?<=,)" + _S1 + _PAIR_BETTER + r"[ \t]*+[*_]{0,3}[ \t]*+[.!]?[ \t]*+\Z", re.I),
    re.compile(
        _START
        + r"(?P<label>"
        + _QUALIFIERS
        + r"(?:verdict|winner|decision|preference|choice|better[ \t]+(?:output|response|answer)))"
        + _SEP
        + r"[ \t]*(?:\[\[|\*\*|\")?[ \t]*(?P<word>"
        + _PAIR_VALUE
        + r"|c(?=\]\]))[ \t]*(?:\]\]|\*\*|\")?"
        + _PAIR_END,
        re.I | re.M,
    ),
)
_BRACKET_PAIR_RE = re.compile(r"\[\[" + _S + r"(?P<word>[abc]|tie)" + _S + r"\]\]", re.I)
_BARE_PAIR_RE = re.compile(
    r"[*_\"'`]{0,3}(?:\[\[)?" + _S + r"(?P<word>" + _PAIR_VALUE + r")" + _S + r"(?:\]\])?[*_\"'`]{0,3}[.!]?",
    re.I,
)
# Code (fenced blocks, inline spans) and quoted passages that contain a blank (what the
# candidate or the question said) are not the judge's statements.
_CODE_RE = re.compile(r"(```|~~~)[\s\S]*?(?:\1|\Z)|`[^`\n]*`")
_QUOTE_RE = re.compile(r"\"[^\"\n]*\"|“[^”\n]*”")
_QUOTED_STATEMENT_RES = (
    re.compile(r"[*_]{0,3}(?:" + _SCORE_LABEL + _SEP + r")?" + _VALUE, re.I),
    re.compile(r"[*_]{0,3}(?:" + _VERDICT_LABEL + _SEP + r")?" + _WORD_VALUE, re.I),
)
# "final" marks a statement when it qualifies the verdict itself ("Final score", "Final:",
# "a final rating of"), not when it names something else ("the final answer").
_FINAL_RE = re.compile(
    r"\bfinal(?:[ \t]+(?:overall|holistic))?(?:[ \t]+(?:score|rating|grade|mark|verdict|evaluation"
    r"|judge?ment|assessment|decision|result|outcome|conclusion)\b|[ \t]*\Z)",
    re.I,
)
# A second value in the rest of the sentence, in the forms a score takes ("a 10, no wait, a 6",
# "8, or 6 if ...", "8, maybe 8/10"): after a comma, the first value is not the whole statement.
# Quantities in a reason ("6, since 2 of the 5 requirements are missing") are not values.
_ANOTHER = (
    r"[^\n.!?]*?\b(?:an?|or|maybe|perhaps|rather|actually|make[ \t]+it|say)[ \t]+[0-9]"
    r"|[^\n.!?]*?[0-9][ \t]*(?:/|out[ \t]+of)[ \t]*[0-9]"
)
# What may follow a plain number or word (no ``/D``, no ``[[ ]]``, no closing bold): the end
# of the line, punctuation that does not lead to another number ("7-8", "8, 9"), or a reason
# ("PASS because ...").
_WEAK_END_RE = re.compile(
    r"[ \t]*+(?:\n|\Z|[.;!?)(\]—–-](?![ \t]*+[0-9])|,(?![ \t]*+[0-9])(?!" + _ANOTHER + r")"
    r"|(?:because|since)\b)",
    re.I,
)
# A value given on the line after its label ("### Score" + newline + "8") is the whole line:
# "Evaluation:" + newline + "1. The answer ..." starts a list, it states nothing.
_LINE_END_RE = re.compile(
    r"[ \t]*+(?:[.!]?[ \t]*+(?:\n|\Z)|[-–—][ \t]+(?![0-9])|,?[ \t]*(?:because|since)\b)", re.I
)
# What never follows a value: more digits, a fraction bar, a percent sign, an equals sign.
_BAD_TAIL_RE = re.compile(r"[ \t]*+[=≈]|[0-9/%]")
# A value right after "out of" or "/" is a denominator ("rated a [[9]] out of 10", bracket lost).
_DENOMINATOR_BEFORE_RE = re.compile(r"(?:\bout[ \t]+of|/)[ \t]*(?:\[\[|\*\*|__|\*|_)?[ \t]*\Z", re.I)


@dataclass(slots=True)
class _Statement:
    """One explicit score or verdict statement of a free-text reply."""

    pos: int
    value: float | str | None  # None: a number outside the scale
    final: bool = False
    flags: tuple[str, ...] = ()


def _prose(text: str, blank: Sequence[tuple[int, int]] = ()) -> tuple[str, list[int]]:
    """The text statements are read from: the spans ``blank`` (the JSON verdicts, read on
    their own), code and quoted passages blanked out; with, for each of its characters, its
    position in ``text`` (so statements of both kinds can be put in order)."""
    at = list(range(len(text) + 1))
    for start, end in sorted(blank, reverse=True):
        cut = "\n" if "\n" in text[start:end] else " "
        text = text[:start] + cut + text[end:]
        at[start:end] = [start]
    # a code block keeps a line break
    text, at = _sub_mapped(_CODE_RE, lambda m: "\n" if m.group(1) else " ", text, at)
    text, at = _sub_mapped(_QUOTE_RE, _blank_quote, text, at)
    return text.replace("\r\n", " \n"), at


def _sub_mapped(
    pattern: re.Pattern[str], repl: Callable[[re.Match[str]], str], text: str, at: list[int]
) -> tuple[str, list[int]]:
    """``pattern.sub(repl, text)``, carrying the original position of every character."""
    parts: list[str] = []
    where: list[int] = []
    last = 0
    for m in pattern.finditer(text):
        parts.append(text[last : m.start()])
        where.extend(at[last : m.start()])
        new = repl(m)
        parts.append(new)
        where.extend([at[m.start()]] * len(new))
        last = m.end()
    parts.append(text[last:])
    where.extend(at[last:])
    return "".join(parts), where


def _blank_quote(m: re.Match[str]) -> str:
    inner = m.group(0)[1:-1]
    return " " if any(c.isspace() for c in inner) and not _is_quoted_statement(inner) else m.group(0)


def _is_quoted_statement(inner: str) -> bool:
    """A quoted passage that is nothing but a statement (the judge quoting its own verdict:
    ``rated as follows: "Rating: [[9]]"``)."""
    return any(p.fullmatch(inner.strip()) for p in _QUOTED_STATEMENT_RES)


def _value_ok(m: re.Match[str], text: str, *, word: bool = False) -> bool:
    """Whether a matched value is a whole statement's value (see ``_WEAK_END_RE``)."""
    open_, close = m.group("open"), m.group("close")
    if (open_ == "[[") != (close == "]]"):
        return False
    value_at = m.start("word" if word else "num")
    if _DENOMINATOR_BEFORE_RE.search(text, max(0, value_at - 16), value_at):
        return False
    tail = text[m.end() :]
    if _BAD_TAIL_RE.match(tail):
        return False
    if "label" in m.re.groupindex and "\n" in text[m.end("label") : value_at]:
        return _LINE_END_RE.match(tail) is not None
    strong = close in ("]]", "**", "__", '"') or (not word and m.group("den") is not None)
    return strong or _WEAK_END_RE.match(tail) is not None


def _text_score(num: str, den: str | None, rubric: Rubric) -> tuple[float | None, tuple[str, ...]]:
    """A stated number on the rubric's scale (``N/D`` rescaled); None when outside the scale."""
    value = float(num)
    d = float(den) if den is not None else None
    if not math.isfinite(value) or (d is not None and (not math.isfinite(d) or d <= 0)):
        return None, ()
    flags: tuple[str, ...] = ()
    if d is not None and d != rubric.hi:
        value, flags = round(value / d * rubric.hi, 2), ("rescaled",)
    if not rubric.lo <= value <= rubric.hi:
        return None, ()
    return value, flags


def _collect(
    text: str,
    patterns: tuple[re.Pattern[str], ...],
    bracket: re.Pattern[str],
    read: Callable[[re.Match[str]], tuple[float | str | None, tuple[str, ...]]],
    *,
    word: bool,
) -> list[_Statement]:
    """Every statement matched by ``patterns`` or ``bracket``, once per value, in text order."""
    group = "word" if word else "num"
    found: dict[int, _Statement] = {}
    for pattern in patterns:
        for m in pattern.finditer(text):
            if _value_ok(m, text, word=word):
                value, flags = read(m)
                final = bool(_FINAL_RE.search(m.group("label")))
                found[m.start(group)] = _Statement(m.start(group), value, final, flags)
    for m in bracket.finditer(text):
        if m.start(group) not in found and _value_ok(m, text, word=word):
            value, flags = read(m)
            found[m.start(group)] = _Statement(m.start(group), value, False, flags)
    return [found[k] for k in sorted(found)]


def _score_statements(text: str, rubric: Rubric) -> list[_Statement]:
    def read(m: re.Match[str]) -> tuple[float | None, tuple[str, ...]]:
        return _text_score(m.group("num"), m.group("den"), rubric)

    bare = _BARE_SCORE_RE.fullmatch(text.strip())
    if bare:
        value, flags = read(bare)
        return [_Statement(0, value, flags=flags)]
    return _collect(text, _SCORE_STATEMENT_RES, _BRACKET_SCORE_RE, read, word=False)


def _verdict_statements(text: str) -> list[_Statement]:
    def read(m: re.Match[str]) -> tuple[str | None, tuple[str, ...]]:
        return _verdict_word(m.group("word")), ()

    bare = _BARE_VERDICT_RE.fullmatch(text.strip())
    if bare:
        value, flags = read(bare)
        return [_Statement(0, value, flags=flags)]
    return _collect(text, _VERDICT_STATEMENT_RES, _BRACKET_VERDICT_RE, read, word=True)


def _settle(statements: list[_Statement], pv: ParsedVerdict, subject: str) -> _Statement | None:
    """The statement that decides, or None (flagged) when the statements do not settle it.

    Statements that all state the same valid value agree.  Otherwise the last statement wins
    only when it is marked final and no other final statement disagrees with it.  An unsettled
    conflict is recorded as ``extra["conflicting"][subject]`` = the stated values, in order."""
    if not statements:
        return None
    values = [s.value for s in statements]
    last = statements[-1]
    if last.value is not None and all(v == last.value for v in values):
        chosen = statements
    elif last.final and last.value is not None and all(s.value == last.value for s in statements if s.final):
        chosen = [last]
    else:
        if None in values:
            pv.flag("out_of_scale")
        if len(set(values)) > 1:
            pv.flag("conflicting_scores")
            pv.extra.setdefault("conflicting", {})[subject] = values[:20]
        return None
    for s in chosen:
        for f in s.flags:
            pv.flag(f)
    return last


def _dimension_re(name: str) -> re.Pattern[str]:
    words = r"[ \t_-]+".join(map(re.escape, name.split("_")))
    return re.compile(
        r"(?:" + _START + r"|" + _COMMA_START + r")"  # "Accuracy: 9, Clarity: 8" on one line
        r"(?P<label>" + words + r")(?:[ \t]+(?:score|rating))?\b" + _DIM_SEP + _VALUE,
        re.I | re.M,
    )


def _pair_statements(text: str) -> list[_Statement]:
    bare = _BARE_PAIR_RE.fullmatch(text.strip())
    if bare:
        return [_Statement(0, _pair_word(bare.group("word")))]
    found: dict[int, _Statement] = {}
    for pattern in _PAIR_STATEMENT_RES:
        for m in pattern.finditer(text):
            label = m.groupdict().get("label") or ""
            next_line = label and "\n" in text[m.end("label") : m.start("word")]
            if next_line and not _LINE_END_RE.match(text, m.end()):
                continue  # "Verdict:" + newline + "A. The first ..." starts a list
            found[m.start("word")] = _Statement(
                m.start("word"), _pair_word(m.group("word")), bool(_FINAL_RE.search(label))
            )
    for m in _BRACKET_PAIR_RE.finditer(text):
        found.setdefault(m.start("word"), _Statement(m.start("word"), _pair_word(m.group("word"))))
    return [found[k] for k in sorted(found)]


Stated = dict[str, list[_Statement]]
"""Statements by subject: ``"score"`` (holistic), a dimension's name, or ``"verdict"``."""


def _text_statements(text: str, rubric: Rubric, blank: list[tuple[int, int]]) -> Stated:
    """The free text's explicit statements (``blank``: spans not to read, the JSON verdicts),
    at their positions in ``text``; see the module docstring."""
    prose, at = _prose(text, blank)
    stated: Stated = {}
    if rubric.is_pairwise:
        stated["verdict"] = _pair_statements(prose)
    elif rubric.is_pass_fail:
        stated["verdict"] = _verdict_statements(prose)
    else:
        for d in rubric.dimensions:
            dim: list[_Statement] = []
            for m in _dimension_re(d.name).finditer(prose):
                if _value_ok(m, prose):
                    value, flags = _text_score(m.group("num"), m.group("den"), rubric)
                    dim.append(_Statement(m.start("num"), value, False, flags))
            stated[d.name] = dim
        stated["score"] = _score_statements(prose, rubric)
    for statements in stated.values():
        for st in statements:
            st.pos = at[st.pos]
    return stated


def _json_statements(pos: int, obj: ParsedVerdict, rubric: Rubric) -> Stated:
    """What one JSON verdict states, as statements at its position (never marked final)."""
    flags = tuple(obj.flags)
    if rubric.is_pairwise or rubric.is_pass_fail:
        return {"verdict": [_Statement(pos, obj.verdict, False, flags)]} if obj.verdict else {}
    stated: Stated = {name: [_Statement(pos, v, False, flags)] for name, v in obj.scores.items()}
    if obj.holistic is not None:
        stated["score"] = [_Statement(pos, obj.holistic, False, flags)]
    return stated


def _decide(stated: Stated, rubric: Rubric, pv: ParsedVerdict) -> bool:
    """Settle every subject's statements (JSON and text together, in order) into ``pv``;
    True when a usable score or verdict is left."""
    for subject, statements in stated.items():
        chosen = _settle(sorted(statements, key=lambda st: st.pos), pv, subject)
        if chosen is None or chosen.value is None:
            continue
        if subject == "verdict":
            pv.verdict = str(chosen.value)
        elif subject == "score":
            pv.holistic = float(chosen.value)
        else:
            pv.scores[subject] = float(chosen.value)
    if rubric.is_pairwise or rubric.is_pass_fail:
        return pv.verdict is not None
    return pv.holistic is not None or bool(pv.scores)


def _complete(pv: ParsedVerdict, rubric: Rubric, text: str) -> ParsedVerdict:
    if rubric.is_pass_fail or rubric.is_pairwise or not rubric.dimensions:
        return pv
    missing = [d.name for d in rubric.dimensions if d.name not in pv.scores]
    if missing:
        if pv.holistic is None:
            pv.null_reason = "parse_error"
            pv.extra["missing_dimensions"] = missing
            pv.raw = _truncate(text)
            pv.scores = {}
            return pv
        for name in missing:
            pv.scores[name] = pv.holistic
        pv.flag("holistic_fallback")
    return pv


_VERDICTISH = frozenset(_HOLISTIC_KEYS + _VERDICT_KEYS + _SCORES_KEYS + _PAIR_KEYS)
_NOTES_KEYS_SET = frozenset((*_NOTES_KEYS, "strengths", "weaknesses", "summary"))
# Keys that say "this object is a verdict" whatever else it holds ({"score": 7, "issues": []});
# "total", "result", "label", "grade" are too common in the data a judge quotes to say so alone.
_STRONG_KEYS = frozenset(
    ("score", "overall_score", "final_score", "rating", "verdict", "winner", "preference", "preferred",
     "better_output", "scores", "dimension_scores", "ratings", "passed")
)  # fmt: skip
_KNOWN_KEYS = _VERDICTISH | _NOTES_KEYS_SET | {"key_facts_present", "key_facts_missing", "confidence"}
_FENCED_RE = re.compile(
    r"(?P<fence>```|~~~|`)(?:(?<=[`~]{3})[A-Za-z0-9]*)?[ \t]*\n?(?P<body>[\s\S]*?)\n?[ \t]*(?P=fence)"
)
"""A reply that is one fenced block (```json ... ```, on one line or several) or one inline span."""


# The reasoning of a format example the judge shows before its verdict ("for example:
# {"reasoning": "<why>", "score": 5}"): a template, not a statement.
_PLACEHOLDER_RE = re.compile(
    r"\.{2,}|…+|<[^<>\n]{1,80}>|\[[^\[\]\n]{1,80}\]|\{[^{}\n]{1,80}\}"
    r"|(?:an?[ \t]+|your[ \t]+)?(?:example|string|text|explanation|reasoning|rationale|notes?)"
    r"(?:[ \t]+here)?[.…]*",
    re.I,
)


def _is_template(obj: Mapping[str, Any]) -> bool:
    """Whether a JSON object is a format example: its reasoning is a placeholder."""
    keys = _lower_keys(obj)
    notes = [keys[k] for k in _NOTES_KEYS if isinstance(keys.get(k), str)]
    return bool(notes) and all(_PLACEHOLDER_RE.fullmatch(n.strip()) for n in notes)


def _is_whole_reply(text: str, start: int, end: int) -> bool:
    """Whether ``text[start:end]`` (a JSON object) is the whole reply, bare or fenced."""
    body = text.strip()
    if (m := _FENCED_RE.fullmatch(body)) is not None:
        body = m.group("body").strip()
    return body == text[start:end].strip()


def parse_verdict(
    rubric: Rubric,
    *,
    text: str = "",
    tool_input: Mapping[str, Any] | None = None,
    stop_reason: str | None = None,
) -> ParsedVerdict:
    """Parse a judge answer for ``rubric``. Never raises."""
    pv = ParsedVerdict()
    try:
        if stop_reason == "refusal":
            pv.null_reason, pv.raw = "refusal", _truncate(text)
            return pv
        source = json.dumps(tool_input) if tool_input is not None else text
        if tool_input is not None and _from_object(tool_input, rubric, pv):
            return _complete(pv, rubric, source)
        # JSON verdicts and the free text's explicit statements, settled together: agreeing
        # statements are fine, a conflict is null unless the last statement is marked final
        stated: Stated = {}
        spans: list[tuple[int, int]] = []
        unusable_verdict = json_verdict = False
        known = _KNOWN_KEYS | {d.name for d in rubric.dimensions}
        objects = _json_objects(text)
        whole = len(objects) == 1 and _is_whole_reply(text, *objects[0][:2])
        for start, end, obj in objects:
            keys = set(_lower_keys(obj))
            # a verdict: the whole reply, an object with reasoning, or one made only of verdict
            # keys; other JSON ({"total": 0, "items": []}) is data the judge quotes
            strong = keys & (_STRONG_KEYS | (known - _KNOWN_KEYS))  # a dimension's name too
            if not (whole or keys & _NOTES_KEYS_SET or strong or keys <= known):
                continue
            if not whole and _is_template(obj):
                continue
            spans.append((start, end))
            trial = ParsedVerdict()
            if _from_object(obj, rubric, trial):
                json_verdict = True
                for subject, statements in _json_statements(start, trial, rubric).items():
                    stated.setdefault(subject, []).extend(statements)
                pv.notes = trial.notes or pv.notes
                pv.extra.update(trial.extra)
            else:
                pv.notes = pv.notes or trial.notes
                # reasoning plus a score key whose value is unusable (null, "high")
                unusable_verdict = unusable_verdict or bool(
                    keys & _NOTES_KEYS_SET and keys & (_VERDICTISH | known - _KNOWN_KEYS)
                )
        # a JSON verdict whose score is unusable is not rescued by the text around it
        if not (unusable_verdict and not stated):
            for subject, statements in _text_statements(text, rubric, spans).items():
                stated.setdefault(subject, []).extend(statements)
        if _decide(stated, rubric, pv):
            if pv.notes is None and not json_verdict and text.strip():
                pv.notes = _truncate(text.strip())
            return _complete(pv, rubric, text)
        pv.null_reason = "refusal" if _REFUSAL_RE.search(text) else "parse_error"
        pv.raw = _truncate(text)
        pv.scores, pv.holistic, pv.verdict = {}, None, None
        return pv
    except Exception as exc:  # pragma: no cover - defensive: parsing must never raise
        return ParsedVerdict(null_reason="parse_error", raw=_truncate(f"{text}\n[parser: {exc!r}]"))

"""Parsing a judge's answer into scores.

Accepted, in order of preference:

1. a tool call's input (a dict), for older models and other providers;
2. JSON in the text: fenced blocks first, then bare objects anywhere in prose; with several
   objects, the last one that carries a score or verdict wins (judges put the final verdict
   last);
3. plain-text forms: ``grade: 8``, ``Score: 8/10``, ``Rating: [[8]]``, ``8 out of 10``,
   ``Verdict: PASS``; the last one wins.

Scores outside the scale are clamped (flag ``clamped``); ``N/D`` with ``D`` different from
the scale's top is rescaled (flag ``rescaled``); non-numeric values count as missing.
Missing dimension scores fall back to the holistic score when there is one (flag
``holistic_fallback``); a numeric verdict missing a dimension with no holistic score to fall
back on is unusable (``parse_error``): a weighted overall over the remaining dimensions
would silently change the rubric.  Nothing parseable gives ``parse_error`` (or ``refusal``
when the judge declined) with the raw text kept, truncated.  :func:`parse_verdict` never
raises.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ._rubric import Rubric

RAW_LIMIT = 2000

_HOLISTIC_KEYS = ("score", "overall", "overall_score", "final_score", "grade", "rating", "total")
_VERDICT_KEYS = ("verdict", "result", "decision", "outcome", "pass", "passed", "label", "grade")
_SCORES_KEYS = ("scores", "dimension_scores", "dimensions", "criteria", "ratings")
_NOTES_KEYS = ("reasoning", "notes", "rationale", "explanation", "justification", "comment")
_PASS_WORDS = {"pass", "passed", "yes", "true", "acceptable", "correct", "good"}
_FAIL_WORDS = {"fail", "failed", "no", "false", "unacceptable", "incorrect", "bad"}

_NUM = r"([-+]?\d+(?:\.\d+)?)"
_TEXT_SCORE_RES = (
    re.compile(r"\[\[\s*" + _NUM + r"\s*(?:/\s*(\d+(?:\.\d+)?))?\s*\]\]"),
    re.compile(
        r"\b(?:overall\s+score|final\s+score|overall|score|grade|rating|total)\b\**\s*(?:is|=|:|of)?\s*\**\s*"
        + _NUM
        + r"(?:\s*(?:/|out\s+of)\s*(\d+(?:\.\d+)?))?",
        re.I,
    ),
    re.compile(_NUM + r"\s*(?:/|out\s+of)\s*(\d+(?:\.\d+)?)\b", re.I),
)
_TEXT_VERDICT_RE = re.compile(
    r"(?:\b(?:final\s+)?(?:verdict|result|decision|grade|outcome)\b\**[ \t]*(?:is\b|=|:|\n)"
    r"[\s#*_]*\"?|\[\[\s*)"
    r"(pass(?:ed)?|fail(?:ed)?)\b",
    re.I,
)
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


def _json_objects(text: str) -> list[dict[str, Any]]:
    """Every top-level JSON object in the text, in order (fenced or bare alike)."""
    found: list[dict[str, Any]] = []
    i = text.find("{")
    while i != -1:
        try:
            obj, end = _DECODER.raw_decode(text, i)
        except ValueError:
            i = text.find("{", i + 1)
            continue
        if isinstance(obj, dict):
            found.append(obj)
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


def _dimension_re(name: str) -> re.Pattern[str]:
    words = r"[\s_-]+".join(map(re.escape, name.split("_")))
    return re.compile(
        r"\b"
        + words
        + r"\b(?:\s+score)?\**\s*[:=\-–]\s*\**\s*"
        + _NUM
        + r"(?:\s*(?:/|out\s+of)\s*(\d+(?:\.\d+)?))?",
        re.I,
    )


def _from_text(text: str, rubric: Rubric, pv: ParsedVerdict) -> bool:
    """Plain-text forms; per-dimension lines (``Accuracy: 8/10``) and a holistic score."""
    if rubric.is_pass_fail:
        matches = list(_TEXT_VERDICT_RE.finditer(text))
        if matches:
            pv.verdict = _verdict_word(matches[-1].group(1))
            return pv.verdict is not None
        return False
    dim_names = {d.name.replace("_", " ") for d in rubric.dimensions}
    for d in rubric.dimensions:
        matches = list(_dimension_re(d.name).finditer(text))
        if matches:
            m = matches[-1]
            value = _fit(
                float(m.group(1)), float(m.group(2)) if m.group(2) else None, rubric.lo, rubric.hi, pv
            )
            if value is not None:
                pv.scores[d.name] = value
    patterns = _TEXT_SCORE_RES if not pv.scores else _TEXT_SCORE_RES[:2]
    for pattern in patterns:
        for m in reversed(list(pattern.finditer(text))):
            before = text[max(0, m.start() - 30) : m.start()].lower().rstrip(" *_")
            if any(before.endswith(name) for name in dim_names):
                continue  # "Accuracy score: 9" is a dimension, not the overall
            denom = float(m.group(2)) if m.group(2) else None
            pv.holistic = _fit(float(m.group(1)), denom, rubric.lo, rubric.hi, pv)
            if pv.holistic is not None:
                return True
    return bool(pv.scores)


def _complete(pv: ParsedVerdict, rubric: Rubric, text: str) -> ParsedVerdict:
    if rubric.is_pass_fail or not rubric.dimensions:
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


_VERDICTISH = frozenset(_HOLISTIC_KEYS + _VERDICT_KEYS + _SCORES_KEYS)


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
        saw_verdict_object = False
        dim_keys = {d.name for d in rubric.dimensions}
        for obj in reversed(_json_objects(text)):
            trial = ParsedVerdict()
            if _from_object(obj, rubric, trial):
                return _complete(trial, rubric, text)
            pv.notes = pv.notes or trial.notes
            keys = set(_lower_keys(obj))
            # a verdict-shaped object (reasoning plus a score key), not JSON the judge quotes
            # from the candidate (e.g. {"label": "negative"})
            saw_verdict_object = saw_verdict_object or (
                bool(keys & set(_NOTES_KEYS)) and bool(keys & (_VERDICTISH | dim_keys))
            )
        # A JSON verdict whose score is unusable (null, "high") is not rescued by reading
        # numbers out of its own reasoning text.
        if not saw_verdict_object and _from_text(text, rubric, pv):
            if pv.notes is None and text.strip():
                pv.notes = _truncate(text.strip())
            return _complete(pv, rubric, text)
        pv.null_reason = "refusal" if _REFUSAL_RE.search(text) else "parse_error"
        pv.raw = _truncate(text)
        pv.scores, pv.holistic, pv.verdict = {}, None, None
        return pv
    except Exception as exc:  # pragma: no cover - defensive: parsing must never raise
        return ParsedVerdict(null_reason="parse_error", raw=_truncate(f"{text}\n[parser: {exc!r}]"))

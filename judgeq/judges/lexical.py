"""The ``lexical`` judge: deterministic, offline, no LLM. For demos, dry runs and CI.

It scores the candidate output by token overlap with the reference: the ``expected_answer``
when the job has one, else the ``context``, else the ``input``.  With reference tokens R
and candidate tokens C (lower-cased words, stop words dropped):

* recall = |R ∩ C| / |R|, precision = |R ∩ C| / |C|, F1 = their harmonic mean;
* a numeric score = ``lo + round(F1 x (hi - lo))`` for every dimension and overall;
* pass-fail: pass when F1 >= 0.5.

Pair jobs: each output's F1 with the reference (the expected answer, else the context, else
the input); the one with the higher F1 wins, equal F1 (within 0.01) is a tie, for the overall
verdict and every dimension.

Question jobs: the reference is the expected answer and the candidate is the retrieved
chunks' text (recall only: chunks are long).  The answer comes back in the same JSON shape
a real judge returns, so the whole pipeline (parsing included) runs unchanged.  It spends
no tokens and reports none: its replies carry 0 input and 0 output tokens.
"""

from __future__ import annotations

import json
import re
from typing import Any

from judgeq.grading.request import JudgeRequest
from judgeq.judges.base import JudgeBase, JudgeReply
from judgeq.judges.providers import JudgeSetup, Provider

__all__ = ["LexicalJudge", "overlap", "tokens"]

_WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")
_STOP = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "but",
        "by",
        "for",
        "from",
        "has",
        "have",
        "how",
        "i",
        "in",
        "is",
        "it",
        "its",
        "of",
        "on",
        "or",
        "that",
        "the",
        "this",
        "to",
        "was",
        "were",
        "what",
        "when",
        "where",
        "which",
        "who",
        "why",
        "will",
        "with",
        "you",
        "your",
    ]
)


def tokens(text: str | None) -> set[str]:
    return {w for w in _WORD.findall((text or "").lower()) if w not in _STOP}


def overlap(reference: str | None, candidate: str | None, *, recall_only: bool = False) -> float:
    ref, cand = tokens(reference), tokens(candidate)
    if not ref or not cand:
        return 0.0
    common = len(ref & cand)
    recall = common / len(ref)
    if recall_only:
        return recall
    precision = common / len(cand)
    return 0.0 if common == 0 else 2 * precision * recall / (precision + recall)


def _pair_fill(schema: dict[str, Any], verdict: str, notes: str) -> dict[str, Any]:
    return {name: notes if name == "reasoning" else verdict for name in schema.get("properties", {})}


def _fill(schema: dict[str, Any], score: int, verdict: str, notes: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, prop in schema.get("properties", {}).items():
        if name == "verdict":
            out[name] = verdict
        elif prop.get("type") == "object":
            out[name] = {k: score for k in prop.get("properties", {})}
        elif prop.get("type") in ("integer", "number"):
            out[name] = score
        elif prop.get("type") == "array":
            out[name] = []
        else:
            out[name] = notes
    return out


class LexicalJudge(JudgeBase):
    """A :class:`~judgeq.Judge` that scores by token overlap (see the module docstring)."""

    provider = "lexical"

    def __init__(self, model: str = "lexical-overlap-v1") -> None:
        self.model = model

    def complete(self, request: JudgeRequest, *, timeout: float) -> JudgeReply:
        f = request.fields
        if "output_a" in f:
            return self._pair(request)
        if "retrieved" in f:
            candidate = " ".join(c.text for c in f.get("retrieved") or ())
            f1 = overlap(f.get("expected_answer"), candidate, recall_only=True)
        else:
            reference = f.get("expected_answer") or f.get("context") or f.get("input")
            f1 = overlap(reference, f.get("output"))
        desc = json.dumps(request.output_schema.get("properties", {}).get("score", {}))
        m = re.search(r"from (\d+) to (\d+)", desc)
        lo, hi = (int(m.group(1)), int(m.group(2))) if m else (1, 10)
        score = lo + round(f1 * (hi - lo))
        notes = f"lexical overlap F1={f1:.3f} with the reference"
        verdict = json.dumps(_fill(request.output_schema, score, "pass" if f1 >= 0.5 else "fail", notes))
        # no model ran: no tokens were spent, so none are reported (the report's usage stays 0)
        return JudgeReply(
            text=verdict, stop_reason="end_turn", input_tokens=0, output_tokens=0, model=self.model
        )

    def _pair(self, request: JudgeRequest) -> JudgeReply:
        f = request.fields
        reference = f.get("expected_answer") or f.get("context") or f.get("input")
        f1_a, f1_b = overlap(reference, f.get("output_a")), overlap(reference, f.get("output_b"))
        verdict = "tie" if abs(f1_a - f1_b) < 0.01 else ("A" if f1_a > f1_b else "B")
        notes = f"lexical overlap F1 with the reference: A {f1_a:.3f}, B {f1_b:.3f}"
        text = json.dumps(_pair_fill(request.output_schema, verdict, notes))
        return JudgeReply(
            text=text, stop_reason="end_turn", input_tokens=0, output_tokens=0, model=self.model
        )


class LexicalProvider(Provider):
    """The offline lexical judge: no API, no key; named ``lexical`` alone."""

    name = "lexical"
    spec_form = "lexical"
    offline = True
    serves_text = "the offline lexical judge"
    plural = "the offline lexical judge"
    default_model = "lexical-overlap-v1"

    def parse_model(self, model: str) -> str:
        if model.strip():
            raise ValueError("'lexical' takes no model")
        return self.default_model

    def spec_text(self, model: str) -> str:
        return self.name

    def build(self, model: str, setup: JudgeSetup) -> LexicalJudge:
        return LexicalJudge(model)


PROVIDERS = (LexicalProvider(),)

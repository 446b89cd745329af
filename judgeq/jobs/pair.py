"""The pair kind: two outputs for one input, compared (``input``, ``output_a``, ``output_b``;
optional ``model_a``, ``model_b``, ``context``, ``expected_answer``), judged A, B or tie."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, NotRequired, TypedDict, cast

from pydantic import model_validator

from judgeq.figures import stats
from judgeq.figures.charts import dots, matrix, with_ci
from judgeq.figures.formatting import fmt, fmt_ci, fmt_count
from judgeq.figures.stats import pct
from judgeq.grading.result import Result
from judgeq.grading.verdict import ParsedVerdict
from judgeq.jobs.base import JobBase
from judgeq.jobs.grade import Graded, Scoring, Unit, council, majority, notes_of
from judgeq.jobs.kind import JobKind, narrowed
from judgeq.rubric.model import RetrievalConfig, Rubric

__all__ = [
    "PAIR",
    "PAIR_SCORE",
    "SWAP",
    "WINNER_SCORE",
    "PairJob",
    "PairResult",
    "PairwiseStats",
    "pairwise_markdown",
]

PAIR_SCORE = {"A": 1.0, "tie": 0.5, "B": 0.0}
"""Output A's score for a positional verdict."""
SWAP = {"A": "B", "B": "A", "tie": "tie"}
_ORDERS = {True: (Unit(), Unit(swapped=True)), False: (Unit(),)}
"""A pair's units: both orders when the run swaps, else A/B alone."""
WINNER_SCORE = {"a": 1.0, "tie": 0.5, "b": 0.0}
"""A result's score for output A by its ``winner``."""


class PairJob(JobBase):
    """Compare two outputs for one input (judged A, B or tie)."""

    kind: Literal["pair"] = "pair"
    input: str
    output_a: str
    output_b: str
    model_a: str | None = None
    model_b: str | None = None
    context: str | None = None
    expected_answer: str | None = None

    @model_validator(mode="after")
    def _no_model(self) -> PairJob:
        if self.model is not None:
            raise ValueError("model: a pair job names its systems with model_a and model_b")
        return self

    def render_fields(self, *, swapped: bool = False) -> dict[str, Any]:
        """The fields as shown to the judge; ``swapped``: output_b is shown first (as A)."""
        first, second = (self.output_b, self.output_a) if swapped else (self.output_a, self.output_b)
        return {
            "input": self.input,
            "output_a": first,
            "output_b": second,
            "context": self.context,
            "expected_answer": self.expected_answer,
        }

    def units(self, rubric: Rubric, *, swap: bool) -> tuple[Unit, ...]:
        """A/B, then B/A unless the run does not swap."""
        return _ORDERS[swap]

    def request_fields(self, unit: Unit, rubric: Rubric) -> dict[str, Any]:
        return self.render_fields(swapped=unit.swapped)

    def material(self) -> tuple[str, str | None]:
        return self.input, self.expected_answer

    def result_fields(self, rubric: Rubric | None, retrieval: RetrievalConfig) -> dict[str, object]:
        """Output A's model as ``model``, B's as ``model_b``, and the outputs' lengths."""
        return {
            "model": self.model_a,
            "model_b": self.model_b,
            "len_a": len(self.output_a),
            "len_b": len(self.output_b),
        }

    def systems(self) -> tuple[str, ...]:
        """Both outputs' systems."""
        return tuple(m for m in (self.model_a, self.model_b) if m)

    def grade(
        self, scoring: Scoring, graded: Sequence[Graded], fields: dict[str, object]
    ) -> dict[str, object]:
        """Per judge: the verdict of both orders when they agree (one that flips with the order
        is a tie, flagged ``position_inconsistent``); ``overall`` is the mean of the judges'
        scores for output A (1 A wins, 0.5 tie, 0 B wins), ``winner`` the majority."""
        flags: list[str] = []
        votes: list[str] = []
        per_judge: dict[str, float] = {}
        dims: dict[str, list[float]] = {}
        by_judge: dict[int, list[tuple[bool, ParsedVerdict]]] = {}
        models: dict[int, str] = {}
        members: list[str] = []  # each answering member's verdict (a, b, tie), both orders combined
        for g in graded:
            by_judge.setdefault(g.judge, []).append((g.unit.swapped, g.verdict))
            models[g.judge] = g.model
            votes.append(str(g.verdict.verdict))
        for j, calls in by_judge.items():
            seen = [SWAP[str(pv.verdict)] if swapped else str(pv.verdict) for swapped, pv in calls]
            verdict = seen[0] if len(set(seen)) == 1 else "tie"
            if len(set(seen)) > 1 and "position_inconsistent" not in flags:
                flags.append("position_inconsistent")
            per_judge[models[j]] = PAIR_SCORE[verdict]
            members.append({"A": "a", "B": "b"}.get(verdict, "tie"))
            for d in scoring.rubric.dimensions:
                said = [pv.extra.get("dimension_verdicts", {}).get(d.name) for _, pv in calls]
                if any(v is None for v in said):
                    continue
                mapped = [
                    SWAP[str(v)] if swapped else str(v) for (swapped, _), v in zip(calls, said, strict=True)
                ]
                dims.setdefault(d.name, []).append(PAIR_SCORE[mapped[0] if len(set(mapped)) == 1 else "tie"])
        if scoring.jury is not None:  # the panel's strict majority, the absent members counted
            won = majority(members, scoring.judges)
            if won is None and scoring.jury.no_majority == "null":
                return {"null_reason": "no_majority"}
            winner = won or "tie"
            overall = WINNER_SCORE[winner]
        else:
            overall = round(math.fsum(per_judge.values()) / len(per_judge), 4)
            winner = "a" if overall > 0.5 else "b" if overall < 0.5 else "tie"
        return {
            **council(scoring, per_judge, flags),
            "scores": {name: round(math.fsum(v) / len(v), 4) for name, v in dims.items()},
            "overall": overall,
            "passed": None,
            "flags": flags,
            "notes": notes_of(graded[0].verdict),
            "winner": winner,
            "votes": votes,
        }


class PairResult(Result):
    """A pair job's result: its winner and the verdicts of its calls (``model`` is output A's
    system, ``model_b`` output B's)."""

    kind: Literal["pair"] = "pair"  # type: ignore[assignment]
    model_b: str | None = None
    winner: Literal["a", "b", "tie"] | None = None
    votes: list[str] | None = None
    """The positional verdicts (A, B, tie) of the job's calls, in order: per judge, the A/B
    order then (when swapped) the B/A order."""
    len_a: int | None = None
    len_b: int | None = None

    def units(self, judges: int) -> int:
        return len(self.votes) // judges if self.votes else 1

    def verdict(self) -> str | None:
        return self.winner if self.status == "graded" and self.winner else super().verdict()


Interval = list[float] | None


class PairFigures(TypedDict):
    """One model pair's outcomes in the ``pairwise`` section (``model``'s wins)."""

    model: str
    opponent: str
    n: int
    wins: int
    ties: int
    losses: int
    win_rate: float
    win_rate_ci95: Interval
    win_rate_excluding_ties: float | None
    win_rate_excluding_ties_ci95: Interval
    win_rate_length_controlled: float | None
    win_rate_length_controlled_ci95: Interval


class Rating(TypedDict):
    model: str
    rating: float
    ci95: Interval


class PairwiseSection(TypedDict):
    """The ``pairwise`` section of report.json."""

    graded: int
    nulls: int
    same_model_pairs: int
    pairs: list[PairFigures]
    position_consistency: float | None
    position_consistency_ci95: Interval
    position_consistency_n: int
    first_position_preference: float | None
    first_position_preference_ci95: Interval
    first_position_preference_n: int
    longer_output_wins: float | None
    longer_output_wins_ci95: Interval
    longer_output_wins_n: int
    notes: dict[str, str]
    leaderboard: NotRequired[list[Rating]]
    """With three models or more: their Bradley-Terry ratings."""


def _section(section: Mapping[str, Any]) -> PairwiseSection:
    """A pairwise section as report.json holds it (its keys checked where it is read)."""
    return cast(PairwiseSection, section)


@dataclass(slots=True)
class _Stratum:
    n: int = 0
    score: float = 0.0
    sq: float = 0.0


@dataclass(slots=True)
class PairwiseStats:
    """Pair jobs' own section of a report (``pairwise``): wins, ties and losses per model pair
    with win rates and intervals, position consistency, first-position preference, length
    bias, a length-controlled win rate and (three models or more) a Bradley-Terry leaderboard.
    Rates are over **graded** pair jobs (a null pair has no winner; nulls are counted beside:
    ``nulls``). Models are oriented by name: for the pair (m1, m2) with m1 < m2, ``wins`` are
    m1's."""

    outcomes: dict[tuple[str, str], list[int]] = field(default_factory=dict)
    strata: dict[tuple[str, str], dict[str, _Stratum]] = field(default_factory=dict)
    graded: int = 0
    nulls: int = 0
    call_pairs: int = 0
    consistent: int = 0
    decisive_calls: int = 0
    first_chosen: int = 0
    length_decisive: int = 0
    longer_won: int = 0
    self_pairs: int = 0

    judges: int = 1
    swapped: bool = True
    """The run judges each pair in both orders."""

    def add(self, result: Result) -> None:
        r, judges, swapped = narrowed(result, PairResult), self.judges, self.swapped
        if r.status != "graded" or r.winner is None:
            self.nulls += 1
            return
        self.graded += 1
        votes = r.votes or []
        per_judge = 2 if swapped else 1
        for vote in votes:
            if vote in ("A", "B"):
                self.decisive_calls += 1
                self.first_chosen += vote == "A"
        if swapped:
            for j in range(min(judges, len(votes) // per_judge)):
                first, second = votes[2 * j], votes[2 * j + 1]
                self.call_pairs += 1
                self.consistent += first == SWAP.get(second)
        a, b = r.model or "output_a", r.model_b or "output_b"
        len_a, len_b = r.len_a or 0, r.len_b or 0
        if a == b:  # a model against itself says nothing of its strength (a position check only)
            self.self_pairs += 1
            return
        if r.winner != "tie" and len_a != len_b:
            self.length_decisive += 1
            self.longer_won += (r.winner == "a") == (len_a > len_b)
        key, flip = ((a, b), False) if a <= b else ((b, a), True)
        cells = self.outcomes.setdefault(key, [0, 0, 0])
        winner = {"a": "b", "b": "a", "tie": "tie"}[r.winner] if flip else r.winner
        cells[{"a": 0, "tie": 1, "b": 2}[winner]] += 1
        first_len, second_len = (len_b, len_a) if flip else (len_a, len_b)
        stratum = "equal" if first_len == second_len else ("longer" if first_len > second_len else "shorter")
        slot = self.strata.setdefault(key, {}).setdefault(stratum, _Stratum())
        slot.n += 1
        slot.score += WINNER_SCORE[winner]
        slot.sq += WINNER_SCORE[winner] ** 2

    def to_dict(self) -> PairwiseSection:
        pairs: list[PairFigures] = []
        for (m1, m2), (w, t, losses) in sorted(self.outcomes.items()):
            n = w + t + losses
            mean = (w + 0.5 * t) / n
            strata = self.strata.get((m1, m2), {})
            longer, shorter = strata.get("longer"), strata.get("shorter")
            both = [s for s in (longer, shorter) if s and s.n]
            controlled = round(100 * sum(s.score / s.n for s in both) / 2, 2) if len(both) == 2 else None
            controlled_ci = (
                stats.strata_mean_interval([(s.n, 100 * s.score, 1e4 * s.sq) for s in both])
                if len(both) == 2
                else None
            )
            pairs.append(
                {
                    "model": m1,
                    "opponent": m2,
                    "n": n,
                    "wins": w,
                    "ties": t,
                    "losses": losses,
                    "win_rate": round(100 * mean, 2),
                    "win_rate_ci95": stats.wilson(w + 0.5 * t, n),
                    "win_rate_excluding_ties": pct(w, w + losses),
                    "win_rate_excluding_ties_ci95": stats.wilson(w, w + losses),
                    "win_rate_length_controlled": controlled,
                    "win_rate_length_controlled_ci95": controlled_ci,
                }
            )
        models = sorted({m for key in self.outcomes for m in key})
        out: PairwiseSection = {
            "graded": self.graded,
            "nulls": self.nulls,
            "same_model_pairs": self.self_pairs,
            "pairs": pairs,
            "position_consistency": pct(self.consistent, self.call_pairs),
            "position_consistency_ci95": stats.wilson(self.consistent, self.call_pairs),
            "position_consistency_n": self.call_pairs,
            "first_position_preference": pct(self.first_chosen, self.decisive_calls),
            "first_position_preference_ci95": stats.wilson(self.first_chosen, self.decisive_calls),
            "first_position_preference_n": self.decisive_calls,
            "longer_output_wins": pct(self.longer_won, self.length_decisive),
            "longer_output_wins_ci95": stats.wilson(self.longer_won, self.length_decisive),
            "longer_output_wins_n": self.length_decisive,
            "notes": {
                "win_rate": "model's wins plus half its ties, over the pair's graded jobs (interval: Wilson, "
                "a tie counting half a win, rounded to a whole)",
                "same_model_pairs": "pairs of a model with itself: in the position figures, not in win rates",
                "position_consistency": "share of (judge, pair) verdicts that stayed the same when "
                "the outputs were swapped (None without swapping)",
                "first_position_preference": "share of decisive calls (not tie) that chose the "
                "output shown first; 50% is unbiased",
                "longer_output_wins": "share of decisive pairs of unequal length won by the longer output",
                "win_rate_length_controlled": "mean of the model's win rate when its output is the "
                "longer and when it is the shorter (None unless both happen)",
            },
        }
        if len(models) >= 3:
            cells = {key: (c[0], c[1], c[2]) for key, c in self.outcomes.items()}
            out["leaderboard"] = cast(list[Rating], stats.bradley_terry_leaderboard(cells))
        return out


def pairwise_markdown(section: Mapping[str, Any] | None) -> list[str]:
    """The pairwise section as Markdown lines (none without it)."""
    if not section:
        return []
    pw = _section(section)
    lines: list[str] = []
    lines += [
        "",
        f"## Pairwise ({pw['graded']} graded pairs, {pw['nulls']} null)",
        "",
        "| model | vs | n | wins | ties | losses | win rate (95% CI) | excluding ties | length-controlled |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for p in pw["pairs"]:
        lines.append(
            f"| {p['model']} | {p['opponent']} | {p['n']} | {p['wins']} | {p['ties']} | {p['losses']} | "
            f"{fmt_ci(p['win_rate'], p['win_rate_ci95'], '%')} | "
            f"{fmt_ci(p['win_rate_excluding_ties'], p['win_rate_excluding_ties_ci95'], '%')} | "
            f"{fmt_ci(p['win_rate_length_controlled'], p.get('win_rate_length_controlled_ci95'), '%')} |"
        )
    lines += [
        "",
        "- Position consistency: "
        + fmt_ci(pw["position_consistency"], pw["position_consistency_ci95"], "%")
        + " "
        f"of {pw['position_consistency_n']} verdicts kept when the outputs were swapped",
        "- First-position preference: "
        + fmt_ci(pw["first_position_preference"], pw["first_position_preference_ci95"], "%")
        + f" of {pw['first_position_preference_n']} decisive calls chose the output shown first "
        "(50% is unbiased)",
        f"- Longer output wins: {fmt_ci(pw['longer_output_wins'], pw['longer_output_wins_ci95'], '%')} "
        f"of {pw['longer_output_wins_n']} decisive pairs of unequal length",
    ]
    if pw.get("leaderboard"):
        lines += ["", "| rank | model | Bradley-Terry rating (95% CI) |", "|---:|---|---:|"]
        for rank, row in enumerate(pw["leaderboard"], 1):
            lines.append(f"| {rank} | {row['model']} | {fmt_ci(row['rating'], row['ci95'], nd=0)} |")
    return lines


def _cards(section: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The first three pairs' win rates (ties as half) and position consistency, with their
    intervals."""
    pw = _section(section)
    cards = [
        (
            f"{pair['model']} over {pair['opponent']} (ties as half)",
            with_ci(pair.get("win_rate"), pair.get("win_rate_ci95"), "%"),
        )
        for pair in (pw.get("pairs") or [])[:3]
    ]
    cards.append(
        (
            "position consistency",
            with_ci(pw.get("position_consistency"), pw.get("position_consistency_ci95"), "%"),
        )
    )
    return cards


def _charts(section: Mapping[str, Any]) -> list[str]:
    """The win matrix and, with three models or more, their Bradley-Terry ratings."""
    pw = _section(section)
    out = [matrix("Pairwise win rate (row vs column, ties half)", pw.get("pairs") or [])]
    board = pw.get("leaderboard") or []
    if board:
        ratings = [r["rating"] for r in board] + [c for r in board for c in (r.get("ci95") or [])]
        out.append(
            dots(
                "Bradley-Terry ratings with bootstrap 95% intervals",
                [(r["model"], r["rating"], r.get("ci95")) for r in board],
                lo=min(ratings) - 20,
                hi=max(ratings) + 20,
            )
        )
    return out


def _summary(section: Mapping[str, Any]) -> list[str]:
    """Each pair's win rates, then the position figures and the leader."""
    pw = _section(section)
    lines = [
        f"win rate of {pair['model']} over {pair['opponent']}: {fmt(pair['win_rate'], '%')} "
        f"(ties as half; {pair['wins']} wins, {pair['ties']} ties, {pair['losses']} losses), "
        f"{fmt(pair['win_rate_excluding_ties'], '%')} ties excluded"
        for pair in pw.get("pairs") or []
    ]
    top = pw.get("leaderboard") or []
    lines.append(
        f"pairwise: {fmt_count(pw['graded'])} pairs; position consistency "
        f"{fmt(pw['position_consistency'], '%')}, first-position preference "
        f"{fmt(pw['first_position_preference'], '%')}"
        + (f"; leader {top[0]['model']} ({top[0]['rating']})" if top else "")
    )
    return lines


def _texts(obj: Mapping[str, Any]) -> dict[str, str]:
    output = f"A: {obj.get('output_a', '')}\n\nB: {obj.get('output_b', '')}"
    return {"input": str(obj.get("input", "")), "output": output}


PAIR = JobKind(
    name="pair",
    model=PairJob,
    result=PairResult,
    grades=lambda rubric: rubric.is_pairwise,
    marks=("output_a",),
    rubric="pairwise",
    rubric_is="its scale is pairwise",
    rubric_with="with scale pairwise",
    sample={
        "id": "sample",
        "input": "What is the capital of France?",
        "output_a": "Paris.",
        "output_b": "The capital of France is Lyon.",
    },
    texts=_texts,
    markdown=pairwise_markdown,
    validity=True,
    section="pairwise",
    run_section=lambda shape: (
        PairwiseStats(judges=shape.judges, swapped=shape.swap) if shape.pairwise else None
    ),
    cards=_cards,
    summary=_summary,
    calibration=lambda pw: [
        "position consistency "
        + fmt_ci(_section(pw).get("position_consistency"), _section(pw).get("position_consistency_ci95"), "%")
    ],
    scored=False,
    charts=_charts,
    by_model=False,
    least_units=lambda swap: len(_ORDERS[swap]),
    shown_model=lambda r: f"{r.model or 'A'} vs {narrowed(r, PairResult).model_b or 'B'}",
    export_columns=("model_b", "winner"),
)

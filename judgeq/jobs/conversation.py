"""The conversation job: an agent's messages (with its tool calls and their results), the
tools it had, and what was expected of it.

A line of a batch::

    {"id": "c1", "kind": "conversation",
     "messages": [{"role": "user", "content": "Weather in Lisbon tomorrow?"},
                  {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1",
                   "type": "function", "function": {"name": "get_weather",
                   "arguments": "{\\"city\\": \\"Lisbon\\"}"}}]},
                  {"role": "tool", "tool_call_id": "call_1", "content": "{\\"rain\\": 0.7}"},
                  {"role": "assistant", "content": "Take an umbrella."}],
     "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {...}}}],
     "reference": {"tool_calls": [{"name": "get_weather", "arguments": {"city": "Lisbon"}}],
                   "final_answer": "umbrella"},
     "model": "agent-v2", "label": "pass"}

``kind`` may be left out: a line with ``messages`` is a conversation. The messages are
stored normalised (Anthropic-format blocks become OpenAI-form messages): see
:mod:`judgeq.transcripts.messages`.
"""

from __future__ import annotations

import heapq
import html
import json
import math
import weakref
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, NotRequired, TypedDict, cast

from pydantic import BaseModel, ConfigDict, PrivateAttr, field_serializer, model_validator

from judgeq.figures.formatting import fmt, fmt_ci
from judgeq.figures.stats import Histogram, histogram, pct, wilson
from judgeq.grading.result import Result
from judgeq.grading.score import Score
from judgeq.jobs.base import JobBase
from judgeq.jobs.grade import Graded, Scoring, Unit, council, notes_of, scored
from judgeq.jobs.kind import JobKind, narrowed
from judgeq.rubric.model import RetrievalConfig, Rubric
from judgeq.transcripts.checks import Check, CheckOutcome, ReferenceCall, final_answer, run_checks
from judgeq.transcripts.messages import Message, Tool, ToolCall, read_messages, read_tools
from judgeq.transcripts.render import cut_text, cuts, turn_window

__all__ = [
    "CONVERSATION",
    "WORST_KEPT",
    "ConversationJob",
    "ConversationResult",
    "ConversationStats",
    "Reference",
    "conversation_html",
    "conversation_markdown",
    "job_checks",
    "result_fields",
    "settled_by_checks",
]


class _Memo:
    """What a job worked out once (its checks' outcomes), kept on it; never part of what the job
    is: equal to any other memo and to none (a job makes its memo on first use), so two jobs
    of equal fields stay equal. One entry, replaced
    whole (threads reading it see an entry or none, never half of one): the job it was worked
    out for (a weak reference: a copy of the job shares the memo, and must not take the
    original's outcomes for its own), the rubric checks, and the outcomes."""

    __slots__ = ("entry",)

    def __init__(self) -> None:
        self.entry: tuple[weakref.ref[Any], object, tuple[CheckOutcome, ...]] | None = None

    def __eq__(self, other: object) -> bool:
        return other is None or isinstance(other, _Memo)

    __hash__ = None  # type: ignore[assignment]


class Reference(BaseModel):
    """What was expected of the agent: its tool calls, its final answer, its final state."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    tool_calls: list[ReferenceCall] | None = None
    final_answer: str | None = None
    final_state: Any = None
    """Free-form (e.g. a database's expected state): shown to the judge as the expected outcome."""

    def expected_text(self) -> str | None:
        """The reference as the judge's ``expected_answer``."""
        parts: list[str] = []
        if self.final_answer:
            parts.append(self.final_answer)
        if self.tool_calls:
            calls = "; ".join(
                f"{c.name}({json.dumps(c.arguments, ensure_ascii=False, sort_keys=True)})"
                if c.arguments is not None
                else c.name
                for c in self.tool_calls
            )
            parts.append(f"Expected tool calls: {calls}")
        if self.final_state is not None:
            parts.append(
                f"Expected final state: {json.dumps(self.final_state, ensure_ascii=False, sort_keys=True)}"
            )
        return "\n".join(parts) or None


class ConversationJob(JobBase):
    """Grade a multi-turn conversation or an agent's trajectory of tool calls."""

    kind: Literal["conversation"] = "conversation"
    messages: tuple[Message, ...]
    tools: tuple[Tool, ...] | None = None
    reference: Reference | None = None
    checks: tuple[Check, ...] | None = None
    """Checks of this job alone, beside the rubric's (see :mod:`judgeq.transcripts.checks`)."""
    _memo: _Memo | None = PrivateAttr(default=None)
    # made on first use: a default_factory would cost an inspect.signature per job parsed
    # (a tenth of a millisecond in pydantic 2.13), a default a deepcopy

    @model_validator(mode="before")
    @classmethod
    def _normalise(cls, data: Any) -> Any:
        if not isinstance(data, dict) or "messages" not in data:
            return data  # pydantic reports the missing field
        problems: list[str] = []
        tools = None
        if data.get("tools") is not None and not _is_tools(data["tools"]):
            tools, said = read_tools(data["tools"])
            problems += said
        elif data.get("tools") is not None:
            tools = list(data["tools"])
        messages = data["messages"]
        if not _is_messages(messages):
            messages, said = read_messages(messages, tools)
            problems += said
        if problems:
            raise ValueError("\n".join(problems))
        return {**data, "messages": tuple(messages), "tools": tuple(tools) if tools is not None else None}

    @field_serializer("messages")
    def _dump_messages(self, messages: tuple[Message, ...]) -> list[dict[str, Any]]:
        return [m.to_json() for m in messages]

    @field_serializer("tools")
    def _dump_tools(self, tools: tuple[Tool, ...] | None) -> list[dict[str, Any]] | None:
        return None if tools is None else [t.to_json() for t in tools]

    @property
    def tool_calls(self) -> list[ToolCall]:
        """Every tool call, in order."""
        return [c for m in self.messages if m.role == "assistant" for c in m.tool_calls]

    @property
    def final_answer(self) -> str:
        """The last assistant message's text ("" when it only called tools)."""
        return final_answer(self.messages)

    @property
    def first_input(self) -> str:
        """The first user message (the task): what results on the same task pair up by."""
        return next((m.content for m in self.messages if m.role == "user"), "")

    @property
    def turns(self) -> list[int]:
        """The indices of its assistant messages: the turns a turn-by-turn rubric grades."""
        return [i for i, m in enumerate(self.messages) if m.role == "assistant"]

    def turn_fields(self, turn: int, window: int | None = None) -> dict[str, Any]:
        """The fields shown to grade the assistant message at index ``turn``: the conversation
        up to it (its last ``window`` turns), that message marked as the one graded."""
        shown, graded = turn_window(self.messages, turn, window)
        message = self.messages[graded]
        return {
            **self.render_fields(),
            "output": message.content,
            "messages": tuple(self.messages[i] for i in shown),
            "numbers": tuple(i + 1 for i in shown),
            "graded": graded + 1,
        }

    def render_fields(self) -> dict[str, Any]:
        return {
            "input": self.first_input,
            "output": self.final_answer,
            "expected_answer": self.reference.expected_text() if self.reference else None,
            "messages": self.messages,
            "tools": self.tools or (),
        }

    # -- the job-kind protocol -----------------------------------------------------------------

    def outcomes(self, rubric_checks: Sequence[Check]) -> list[CheckOutcome]:
        """The outcomes of the rubric's checks and the job's own (worked out once per rubric)."""
        memo = self._memo
        if memo is None:
            memo = self._memo = _Memo()
        entry = memo.entry
        if entry is None or entry[0]() is not self or entry[1] is not rubric_checks:
            entry = (weakref.ref(self), rubric_checks, tuple(job_checks(rubric_checks, self)))
            memo.entry = entry
        return list(entry[2])

    def units(self, rubric: Rubric, *, swap: bool) -> tuple[Unit, ...]:
        """None when a hard check failed (settled without a judge); each assistant turn for a
        rubric that grades turn by turn; else the whole conversation."""
        if settled_by_checks(self.outcomes(rubric.checks)):
            return ()
        if rubric.turn_scope is not None:
            return tuple(Unit(turn=t) for t in self.turns)
        return (Unit(),)

    def request_fields(self, unit: Unit, rubric: Rubric) -> dict[str, Any]:
        if unit.turn is None:
            return self.render_fields()
        scope = rubric.turn_scope
        return self.turn_fields(unit.turn, scope.window if scope is not None else None)

    def material(self) -> tuple[str, str | None]:
        return self.first_input, self.reference.expected_text() if self.reference else None

    def result_fields(self, rubric: Rubric | None, retrieval: RetrievalConfig) -> dict[str, object]:
        return {"model": self.model, **result_fields(self.outcomes(rubric.checks if rubric else ()), self)}

    def candidate(self, unit: Unit) -> str | None:
        """The graded turn's text, or every assistant message's."""
        if unit.turn is not None:
            return self.messages[unit.turn].content
        return "\n".join(m.content for m in self.messages if m.role == "assistant")

    def grade(
        self, scoring: Scoring, graded: Sequence[Graded], fields: dict[str, object]
    ) -> dict[str, object]:
        """Settled by its checks (no verdict): failed, no score. Graded whole: the judges' score.
        Turn by turn: see :func:`_turn_grade`."""
        if not graded:
            return {"passed": False, "settled_by": "checks"}
        if scoring.rubric.turn_scope is None:
            return scored(scoring, graded, self.candidate(Unit()))
        return _turn_grade(self, scoring, graded)


def _is_messages(v: Any) -> bool:
    return isinstance(v, (list, tuple)) and bool(v) and all(isinstance(m, Message) for m in v)


def _is_tools(v: Any) -> bool:
    return isinstance(v, (list, tuple)) and all(isinstance(t, Tool) for t in v)


def job_checks(rubric_checks: Sequence[Check], job: ConversationJob) -> list[CheckOutcome]:
    """The outcomes of the rubric's checks and the job's own on ``job``."""
    reference = job.reference.tool_calls if job.reference is not None else None
    return run_checks([*rubric_checks, *(job.checks or ())], job.messages, job.tools or (), reference)


def settled_by_checks(outcomes: Sequence[CheckOutcome]) -> bool:
    """A hard check failed: the job is settled (failed) without a judge call."""
    return any(o.hard and not o.passed for o in outcomes)


def result_fields(outcomes: Sequence[CheckOutcome], job: ConversationJob) -> dict[str, object]:
    """What every result of a conversation job carries, graded or null: its checks' outcomes
    (and why those that failed did), the tools it called and the tool results cut for the judge."""
    fields: dict[str, object] = {"tools_called": [c.name for c in job.tool_calls]}
    if outcomes:
        fields["checks"] = {o.label: o.passed for o in outcomes}
        failed = {o.label: o.detail[:300] for o in outcomes if not o.passed}
        if failed:
            fields["check_failures"] = failed
    cut = cuts(job.messages)
    if cut:
        fields["cuts"] = [[c.message, c.chars, c.kept] for c in cut]
    return fields


def _turn_grade(job: ConversationJob, scoring: Scoring, graded: Sequence[Graded]) -> dict[str, object]:
    """A conversation graded turn by turn: each turn's score (the mean of the judges' on it),
    the job's the turns' aggregate (``turns.aggregate``: mean, min or last), the same for each
    dimension; the worst turn named (its message number) with its judge's reasoning. Pass-fail:
    each turn passes by its judges' majority, then all of them, the last, or most; an unsafe
    turn fails the job."""
    rubric = scoring.rubric
    scope = rubric.turn_scope
    assert scope is not None
    by_turn: dict[int, list[Score]] = {}
    by_judge: dict[str, list[float]] = {}
    notes_by_turn: dict[int, str | None] = {}
    for g in graded:
        assert g.unit.turn is not None
        score = scoring.score(g.verdict, job.candidate(g.unit))
        by_turn.setdefault(g.unit.turn, []).append(score)
        by_judge.setdefault(g.model, []).append(score.overall)
        notes_by_turn.setdefault(g.unit.turn, notes_of(g.verdict))
    turns = sorted(by_turn)
    per_turn = [round(math.fsum(s.overall for s in by_turn[t]) / len(by_turn[t]), 2) for t in turns]
    names = list(by_turn[turns[0]][0].scores)
    dims_per_turn = {
        n: [math.fsum(s.scores[n] for s in by_turn[t]) / len(by_turn[t]) for t in turns] for n in names
    }

    def aggregate(values: Sequence[float]) -> float:
        if scope.aggregate == "min":
            return min(values)
        if scope.aggregate == "last":
            return values[-1]
        return math.fsum(values) / len(values)

    overall = round(aggregate(per_turn), 2)
    worst = turns[min(range(len(turns)), key=lambda k: (per_turn[k], k))]
    categories = sorted({c for t in turns for s in by_turn[t] for c in s.safety_categories})
    flags: list[str] = []
    for t in turns:
        for s in by_turn[t]:
            flags += [f for f in s.flags if f not in flags]
    if rubric.is_pass_fail:
        passes = [v > 0.5 for v in per_turn]
        verdict = {"min": all(passes), "last": passes[-1], "mean": sum(passes) > len(passes) / 2}
        passed = verdict[scope.aggregate] and not categories
    else:
        passed = scoring.passes(overall, categories)
    judge_scores = {m: round(aggregate(v), 2) for m, v in by_judge.items()}  # each judge's own aggregate
    return {
        **council(scoring, judge_scores, flags),
        "scores": {n: round(aggregate(v), 2) for n, v in dims_per_turn.items()},
        "overall": overall,
        "passed": passed,
        "flags": flags,
        "safety_categories": categories,
        "notes": notes_by_turn[worst],
        "turn_scores": per_turn,
        "worst_turn": worst + 1,
    }


class ConversationResult(Result):
    """A conversation job's result: its trajectory checks beside the judge's grade, and, graded
    turn by turn, each turn's score."""

    kind: Literal["conversation"] = "conversation"  # type: ignore[assignment]
    tools_called: list[str] | None = None
    """The tools the agent called, in order."""
    checks: dict[str, bool] | None = None
    """The trajectory checks' outcomes (:mod:`judgeq.transcripts.checks`), by check."""
    check_failures: dict[str, str] | None = None
    """Why each failed check failed."""
    settled_by: Literal["checks"] | None = None
    """``checks``: a hard check failed and settled the job (failed) without a judge call: it
    has no judge's score (``overall`` is None) and counts as failed in the pass rates."""
    turn_scores: list[float] | None = None
    """A conversation graded turn by turn: each assistant turn's score, in order (its
    ``overall`` their aggregate)."""
    worst_turn: int | None = None
    """The number of the message of its lowest-scored turn (its ``notes`` are that turn's)."""
    cuts: list[list[int]] | None = None
    """Tool results cut for the judge: [message index, characters, characters kept] each."""

    _OMIT_NONE: ClassVar[tuple[str, ...]] = (
        *Result._OMIT_NONE,
        "tools_called",
        "checks",
        "check_failures",
        "settled_by",
        "turn_scores",
        "worst_turn",
        "cuts",
    )

    @property
    def settled(self) -> bool:
        return self.settled_by is not None

    @property
    def rescorable(self) -> bool:
        # graded turn by turn: the job's dimension scores aggregate its turns' (their min or last
        # under other weights is not the min or last of the weighted), which are not kept
        return self.turn_scores is None

    def units(self, judges: int) -> int:
        return len(self.turn_scores) if self.turn_scores else 1

    def reason(self) -> str | None:
        failures = (
            "; ".join(f"{k}: {v}" for k, v in self.check_failures.items()) if self.check_failures else None
        )
        return super().reason() or failures


# -- its section of a report: checks' pass rates, tools called, turns, the worst conversations --

WORST_KEPT = 10
"""How many of the worst conversations a report lists."""
POSITIONS = 10
"""Turns reported by position (1st, 2nd, ...); later ones together."""


class CheckFigures(TypedDict):
    jobs: int
    passed: int
    pass_rate: float | None
    pass_rate_ci95: list[float] | None


class ToolFigures(TypedDict):
    calls: int
    jobs: int
    jobs_passed: int
    pass_rate: float | None


class PositionFigures(TypedDict):
    turns: int
    mean: float


class TurnFigures(TypedDict):
    graded: int
    distribution: Histogram
    mean_by_position: dict[str, PositionFigures]


class Worst(TypedDict):
    """One of the worst conversations."""

    job_id: str
    model: str | None
    passed: bool | None
    overall: float | None
    settled_by: str | None
    failed_checks: list[str]
    worst_turn: int | None
    why: str | None


class ConversationSection(TypedDict):
    """The ``conversation`` section of report.json."""

    jobs: int
    settled_by_checks: int
    checks: dict[str, CheckFigures]
    tools: dict[str, ToolFigures]
    tool_calls_per_job: dict[str, int]
    turns: NotRequired[TurnFigures]
    """Conversations graded turn by turn."""
    worst: list[Worst]


def _section(section: Mapping[str, Any]) -> ConversationSection:
    """A conversation section as report.json holds it (its keys checked where it is read)."""
    return cast(ConversationSection, section)


@dataclass(slots=True)
class ConversationStats:
    """Checks, tools and the worst conversations, over conversation results."""

    lo: float = 0.0
    hi: float = 1.0
    jobs: int = 0
    settled: int = 0
    check_n: Counter[str] = field(default_factory=Counter)
    check_passed: Counter[str] = field(default_factory=Counter)
    tool_jobs: Counter[str] = field(default_factory=Counter)
    tool_passed: Counter[str] = field(default_factory=Counter)
    tool_calls: Counter[str] = field(default_factory=Counter)
    steps: Counter[int] = field(default_factory=Counter)
    turn_hist: Counter[float] = field(default_factory=Counter)
    """Every graded turn's score (conversations graded turn by turn)."""
    by_position: dict[int, list[float]] = field(default_factory=dict)
    """Per turn position (1, 2, ..., 10; 11: later ones): [turns, sum of scores]."""
    _worst: list[tuple[float, int, Worst]] = field(default_factory=list)

    def add(self, result: Result) -> None:
        r = narrowed(result, ConversationResult)
        self.jobs += 1
        if r.settled_by == "checks":
            self.settled += 1
        for name, ok in (r.checks or {}).items():
            self.check_n[name] += 1
            self.check_passed[name] += ok
        called = r.tools_called or []
        self.steps[len(called)] += 1
        for tool in called:
            self.tool_calls[tool] += 1
        for tool in set(called):
            self.tool_jobs[tool] += 1
            self.tool_passed[tool] += bool(r.passed)
        if r.status != "graded":
            return  # a null is no verdict on the conversation: counted in the nulls, not here
        for k, score in enumerate(r.turn_scores or (), 1):
            self.turn_hist[score] += 1
            row = self.by_position.setdefault(min(k, POSITIONS + 1), [0, 0.0])
            row[0] += 1
            row[1] += score
        # worst first: settled by a check, then failed, then by score (lowest first)
        badness = (2.0 if r.settled_by else 1.0 if not r.passed else 0.0) - (
            (r.overall - self.lo) / 1000.0 if r.overall is not None else 0.0
        )
        entry: Worst = {
            "job_id": r.job_id,
            "model": r.model,
            "passed": r.passed,
            "overall": r.overall,
            "settled_by": r.settled_by,
            "failed_checks": sorted(k for k, ok in (r.checks or {}).items() if not ok),
            "worst_turn": r.worst_turn,
            "why": next(iter((r.check_failures or {}).values()), None) or r.notes,
        }
        item = (badness, -r.index, entry)
        if len(self._worst) < WORST_KEPT:
            heapq.heappush(self._worst, item)
        elif item[:2] > self._worst[0][:2]:
            heapq.heapreplace(self._worst, item)

    def to_dict(self) -> ConversationSection | None:
        """The ``conversation`` section of report.json (None: the run has no conversation)."""
        if not self.jobs:
            return None
        worst = [e for b, _, e in sorted(self._worst, key=lambda t: t[:2], reverse=True) if b > 0]
        out: ConversationSection = {
            "jobs": self.jobs,
            "settled_by_checks": self.settled,
            "checks": {
                name: {
                    "jobs": n,
                    "passed": self.check_passed[name],
                    "pass_rate": pct(self.check_passed[name], n),
                    "pass_rate_ci95": wilson(self.check_passed[name], n),
                }
                for name, n in sorted(self.check_n.items())
            },
            "tools": {
                tool: {
                    "calls": self.tool_calls[tool],
                    "jobs": n,
                    "jobs_passed": self.tool_passed[tool],
                    "pass_rate": pct(self.tool_passed[tool], n),
                }
                for tool, n in sorted(self.tool_jobs.items(), key=lambda kv: (-kv[1], kv[0]))
            },
            "tool_calls_per_job": {str(k): v for k, v in sorted(self.steps.items())},
            "worst": worst,
        }
        if self.turn_hist:  # before "worst", where report.json has always had it
            head = {k: v for k, v in out.items() if k != "worst"}
            out = cast(ConversationSection, head | {"turns": self._turns(), "worst": worst})
        return out

    def _turns(self) -> TurnFigures:
        """Conversations graded turn by turn: every turn's score's distribution, and the mean
        score of the first, second, ... turn."""
        return {
            "graded": sum(self.turn_hist.values()),
            "distribution": histogram(self.turn_hist, self.lo, self.hi),
            "mean_by_position": {
                (str(k) if k <= POSITIONS else f">{POSITIONS}"): {
                    "turns": int(n),
                    "mean": round(total / n, 4),
                }
                for k, (n, total) in sorted(self.by_position.items())
            },
        }


def _cell(text: Any) -> str:
    """A table cell: one line, no pipe, at most 120 characters."""
    s = " ".join(str(text).split()).replace("|", "\\|")
    return s if len(s) <= 120 else s[:119] + "…"


def conversation_markdown(found: Mapping[str, Any] | None) -> list[str]:
    """Checks, tools and the worst conversations, as Markdown lines (none without the section)."""
    if not found:
        return []
    section = _section(found)
    lines = ["", f"## Conversations ({section['jobs']})", ""]
    settled = section["settled_by_checks"]
    if settled:
        lines += [
            f"{settled} settled by a failed hard check, without a judge call: counted as failed in "
            "the pass rates, with no score in the score statistics.",
            "",
        ]
    if section["checks"]:
        lines += ["| check | jobs | passed | pass rate (95% CI) |", "|---|---:|---:|---:|"]
        for name, c in section["checks"].items():
            rate = fmt_ci(c["pass_rate"], c.get("pass_rate_ci95"), "%")
            lines.append(f"| `{_cell(name)}` | {c['jobs']} | {c['passed']} | {rate} |")
        lines.append("")
    if section["tools"]:
        lines += [
            "| tool | calls | conversations | of which passed |",
            "|---|---:|---:|---:|",
        ]
        for tool, t in section["tools"].items():
            passed = f"{t['jobs_passed']} ({fmt(t['pass_rate'], '%')})"
            lines.append(f"| `{_cell(tool)}` | {t['calls']} | {t['jobs']} | {passed} |")
        lines.append("")
    if "turns" in section:
        turns = section["turns"]
        means = ", ".join(
            f"{k}: {fmt(v['mean'])} ({v['turns']})" for k, v in turns["mean_by_position"].items()
        )
        lines += [f"{turns['graded']} turns graded one by one; mean score by turn (turns): {means}.", ""]
    per_job = ", ".join(f"{k}: {v}" for k, v in section["tool_calls_per_job"].items())
    lines += [f"Tool calls per conversation (calls: conversations): {per_job}.", ""]
    if section["worst"]:
        lines += ["Worst conversations:", "", "| job | model | outcome | why |", "|---|---|---|---|"]
        for w in section["worst"]:
            if w["settled_by"]:
                outcome = "failed a hard check"
            else:
                outcome = ("passed" if w["passed"] else "failed") + (
                    f", score {fmt(w['overall'])}" if w["overall"] is not None else ""
                )
                if w.get("worst_turn"):
                    outcome += f"; worst turn: message {w['worst_turn']}"
            why = w["why"] or (", ".join(w["failed_checks"]) if w["failed_checks"] else "")
            lines.append(
                f"| `{_cell(w['job_id'])}` | {_cell(w['model'] or '–')} | {outcome} | {_cell(why) or '–'} |"
            )
    return lines


# -- its part of report.html ----------------------------------------------------------------

TRANSCRIPT_TEXT = 2000
"""A message or tool result longer than this is shown cut (head and tail) in a transcript."""


def conversation_html(section: Mapping[str, Any] | None, texts: Mapping[str, Mapping[str, str]]) -> str:
    """The worst conversations (the section's ``worst``) as report.html shows them, readable transcripts:
    each message with its role, each tool call with its arguments, each result with its call;
    the graded turn that scored lowest marked. Empty when the run has none or their jobs file
    could not be read."""
    worst = _section(section).get("worst") or [] if section else []
    parts: list[str] = []
    for w in worst:
        raw = (texts.get(str(w["job_id"])) or {}).get("transcript")
        if not raw:
            continue
        outcome = (
            "failed a hard check" if w.get("settled_by") else ("passed" if w.get("passed") else "failed")
        )
        if w.get("overall") is not None:
            outcome += f", score {w['overall']:g}"
        why = w.get("why") or ", ".join(w.get("failed_checks") or [])
        head = f"<code>{_esc(w['job_id'])}</code> ({_esc(w.get('model') or 'no model')}): {_esc(outcome)}"
        items: list[str] = []
        names: dict[str, str] = {}
        for n, m in enumerate(json.loads(raw), 1):
            role = str(m.get("role"))
            cls = f"msg {role}" + (" worst" if n == w.get("worst_turn") else "")
            body = [f'<div class="role">{n}. {_esc(role)}</div>']
            if m.get("content"):
                body.append(
                    f'<div class="content">{_esc(cut_text(str(m["content"]), TRANSCRIPT_TEXT))}</div>'
                )
            for c in m.get("tool_calls") or []:
                fn = c.get("function") or {}
                names[str(c.get("id"))] = str(fn.get("name"))
                body.append(
                    f'<div class="call">call <b>{_esc(fn.get("name"))}</b>'
                    f"<code>{_esc(cut_text(str(fn.get('arguments')), TRANSCRIPT_TEXT))}</code></div>"
                )
            if role == "tool":
                status = " (error)" if m.get("is_error") else ""
                body[0] = (
                    f'<div class="role">{n}. result of {_esc(names.get(str(m.get("tool_call_id")), "?"))}'
                    f"{status}</div>"
                )
            items.append(f'<li class="{_esc(cls)}">{"".join(body)}</li>')
        note = f'<p class="note">{_esc(why)}</p>' if why else ""
        parts.append(
            f'<details><summary>{head}</summary>{note}<ol class="transcript">{"".join(items)}</ol></details>'
        )
    if not parts:
        return ""
    return (
        "<h2>Worst conversations</h2>"
        '<p class="note">Settled by a failed check first, then failed, then lowest score; the turn that '
        "scored lowest is marked.</p>" + "".join(parts)
    )


def _esc(x: Any) -> str:
    return html.escape(str(x), quote=True)


def _shown(section: Mapping[str, Any] | None) -> set[str]:
    """The jobs report.html shows the transcript of: the worst conversations."""
    return {str(w["job_id"]) for w in _section(section).get("worst", [])} if section else set()


def _texts(obj: Mapping[str, Any]) -> dict[str, str]:
    """The first user message and the final answer; the whole ``transcript`` (JSON) for the
    worst conversations' section of report.html."""
    messages, _ = read_messages(obj.get("messages"))
    return {
        "input": next((m.content for m in messages if m.role == "user"), ""),
        "output": final_answer(messages),
        "transcript": json.dumps([m.to_json() for m in messages], ensure_ascii=False),
    }


CONVERSATION = JobKind(
    name="conversation",
    model=ConversationJob,
    result=ConversationResult,
    grades=lambda rubric: rubric.job == "conversation",
    marks=("messages",),
    rubric="task-success",
    rubric_is="it says job: conversation",
    rubric_with="with job: conversation",
    sample={
        "id": "sample",
        "messages": [
            {"role": "user", "content": "What is the weather in Paris today?"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "call_1", "content": '{"condition": "sunny", "high_c": 24}'},
            {"role": "assistant", "content": "Sunny in Paris today, with a high of 24 °C."},
        ],
    },
    texts=_texts,
    section="conversation",
    run_section=lambda shape: ConversationStats(lo=shape.lo, hi=shape.hi),
    markdown=conversation_markdown,
    html=conversation_html,
    shown=_shown,
)

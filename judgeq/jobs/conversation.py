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

import json
import math
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, PrivateAttr, field_serializer, model_validator

from judgeq.grading.score import Score
from judgeq.jobs.base import JobBase
from judgeq.jobs.grade import Graded, Scoring, Unit, council, notes_of, scored
from judgeq.jobs.kind import JobKind
from judgeq.rubric.model import RetrievalConfig, Rubric
from judgeq.transcripts.checks import Check, CheckOutcome, ReferenceCall, final_answer, run_checks
from judgeq.transcripts.messages import Message, Tool, ToolCall, read_messages, read_tools
from judgeq.transcripts.render import cuts, turn_window

__all__ = [
    "CONVERSATION",
    "ConversationJob",
    "Reference",
    "job_checks",
    "result_fields",
    "settled_by_checks",
]


class _Memo:
    """What a job worked out once (its checks' outcomes), kept on it; never part of what the job
    is: equal to any other memo, so two jobs of equal fields stay equal."""

    __slots__ = ("checks", "outcomes", "owner")

    def __init__(self) -> None:
        self.owner: int | None = None
        self.checks: object = None
        self.outcomes: list[CheckOutcome] = []

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Memo)

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
        import json

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
    _memo: _Memo = PrivateAttr(default_factory=_Memo)

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
        if memo.owner != id(self) or memo.checks is not rubric_checks:  # a copy shares the memo
            memo.outcomes = job_checks(rubric_checks, self)
            memo.owner, memo.checks = id(self), rubric_checks
        return memo.outcomes

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
)

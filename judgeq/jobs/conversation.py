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
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, field_serializer, model_validator

from judgeq.jobs.base import JobBase
from judgeq.jobs.kind import JobKind
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

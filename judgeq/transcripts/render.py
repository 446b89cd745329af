"""A conversation rendered for the judge: every message, call and result in nonce-tagged
blocks whose attributes are JSON-quoted, so that nothing a candidate wrote can open or close a
turn, forge a tool result or pass for the judge's instructions (the nonce is chosen to occur
in no value of the request: :func:`judgeq.grading.request.render_user`).

Long tool results are cut by one stated policy: a result over ``max_tool_chars`` characters
keeps its first and last ``max_tool_chars // 2`` and says how many characters were cut
between them; :func:`cuts` lists what was cut, for the result's provenance.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from judgeq.transcripts.messages import Message, Tool, result_names

__all__ = [
    "DEFAULT_MAX_TOOL_CHARS",
    "Cut",
    "cut_text",
    "cuts",
    "render_transcript",
    "transcript_values",
    "turn_window",
]

DEFAULT_MAX_TOOL_CHARS = 4000
"""A tool result longer than this is cut to its head and tail (half each)."""


@dataclass(frozen=True, slots=True)
class Cut:
    """A tool result cut for the judge: the message's index, its length and what was kept."""

    message: int
    chars: int
    kept: int


def cut_text(text: str, limit: int) -> str:
    """``text`` whole, or its head and tail (``limit // 2`` each) around a stated cut."""
    if limit <= 0 or len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]}\n[... {len(text) - 2 * half:,} characters cut ...]\n{text[len(text) - half :]}"


def cuts(messages: Sequence[Message], limit: int = DEFAULT_MAX_TOOL_CHARS) -> list[Cut]:
    """The tool results :func:`render_transcript` cuts."""
    half = limit // 2
    return [
        Cut(i, len(m.content), 2 * half)
        for i, m in enumerate(messages)
        if m.role == "tool" and limit > 0 and len(m.content) > limit
    ]


def transcript_values(messages: Sequence[Message], tools: Sequence[Tool]) -> list[str]:
    """Every string the transcript shows (the request's nonce must occur in none of them)."""
    out: list[str] = []
    for m in messages:
        out.append(m.content)
        out += [v for c in m.tool_calls for v in (c.id, c.name, json.dumps(c.arguments, ensure_ascii=False))]
        if m.tool_call_id is not None:
            out.append(m.tool_call_id)
    for t in tools:
        out += [t.name, t.description, json.dumps(dict(t.parameters), ensure_ascii=False)]
    return out


def _spans(numbers: Sequence[int]) -> str:
    """``[2, 3, 4, 7]`` -> ``2-4, 7``."""
    runs: list[list[int]] = []
    for n in numbers:
        if runs and n == runs[-1][1] + 1:
            runs[-1][1] = n
        else:
            runs.append([n, n])
    return ", ".join(f"{a}-{b}" if a != b else str(a) for a, b in runs)


def _q(value: str) -> str:
    return json.dumps(value, ensure_ascii=False)


def turn_window(messages: Sequence[Message], turn: int, window: int | None) -> tuple[list[int], int]:
    """The messages a judge sees to grade the assistant message at index ``turn``: the
    conversation up to it, or with ``window`` K the system messages and its last K turns (a
    turn: the messages after the previous assistant message, up to and including its own; a
    tool result at its start is shown with the assistant message that made the call).
    Returns their indices and the index of the graded message."""
    upto = list(range(turn + 1))
    if window is None:
        return upto, turn
    assistants = [i for i in upto if messages[i].role == "assistant"]
    if len(assistants) <= window:
        return upto, turn
    start = assistants[-window - 1] + 1  # just after the assistant message before the window
    while start > 0 and messages[start].role == "tool":
        start -= 1  # a tool result is shown with the message that called it
    return [i for i in upto if i >= start or messages[i].role == "system"], turn


def render_transcript(
    messages: Sequence[Message],
    tools: Sequence[Tool],
    nonce: str,
    *,
    numbers: Sequence[int] | None = None,
    graded: int | None = None,
    max_tool_chars: int = DEFAULT_MAX_TOOL_CHARS,
) -> list[str]:
    """The lines of the transcript section (and of the tools offered, when given).
    ``numbers``: each message's number in the whole conversation (default 1, 2, ...: a window
    keeps the true numbers, and says how many messages it leaves out); ``graded``: the number of
    the message graded (a turn-by-turn rubric), marked ``graded=true``."""
    out: list[str] = []
    if tools:
        out += [
            "The tools the assistant could call (name, description, JSON Schema of arguments):",
            f"<tools-{nonce}>",
        ]
        for t in tools:
            out += [
                f"<tool-{nonce} name={_q(t.name)}>",
                t.description,
                json.dumps(dict(t.parameters), ensure_ascii=False, sort_keys=True),
                f"</tool-{nonce}>",
            ]
        out += [f"</tools-{nonce}>", ""]
    names = result_names(messages)
    numbers = list(numbers) if numbers is not None else list(range(1, len(messages) + 1))
    left_out = sorted(set(range(1, max(numbers, default=0) + 1)) - set(numbers))
    out.append(
        "The conversation to grade, message by message (tool calls and their results included):"
        if graded is None
        else "The conversation up to the message to grade (tool calls and their results included):"
    )
    if left_out:
        out.append(
            f"(Messages {_spans(left_out)} are left out: only the last turns before the graded one "
            "are shown.)"
        )
    out.append(f"<conversation-{nonce}>")
    for k, (n, m) in enumerate(zip(numbers, messages, strict=True)):
        if m.role == "tool":
            assert m.tool_call_id is not None
            status = " status=error" if m.is_error else ""
            tool = _q(names.get(k, "?"))
            head = f"<tool_result-{nonce} n={n} call_id={_q(m.tool_call_id)} tool={tool}{status}>"
            out += [head, cut_text(m.content, max_tool_chars), f"</tool_result-{nonce}>"]
            continue
        mark = " graded=true" if n == graded else ""
        out.append(f"<message-{nonce} n={n} role={m.role}{mark}>")
        if m.content:
            out.append(m.content)
        for c in m.tool_calls:
            out += [
                f"<tool_call-{nonce} id={_q(c.id)} tool={_q(c.name)}>",
                json.dumps(c.arguments, ensure_ascii=False, sort_keys=True),
                f"</tool_call-{nonce}>",
            ]
        out.append(f"</message-{nonce}>")
    out += [f"</conversation-{nonce}>", ""]
    return out

"""A conversation as judgeq reads it: messages in the OpenAI chat format, normalised.

A conversation job's ``messages`` are the OpenAI chat-completions messages
(https://platform.openai.com/docs/api-reference/chat/create): ``system`` (or ``developer``),
``user``, ``assistant`` (``content`` and/or ``tool_calls``, each a ``function`` with a
``name`` and JSON ``arguments`` as a string) and ``tool`` (``tool_call_id`` and
``content``). Anthropic's Messages format is accepted too
(https://docs.anthropic.com/en/docs/build-with-claude/tool-use): ``content`` as blocks of
``text``, ``tool_use`` (``id``, ``name``, ``input``) and ``tool_result`` (``tool_use_id``,
``content``, ``is_error``) in a user message; it is normalised to the OpenAI form (a
``tool_use`` becomes a tool call whose arguments are its input as JSON, a ``tool_result``
a ``tool`` message). ``tools`` are OpenAI function definitions (``{"type": "function",
"function": {"name", "description", "parameters"}}``) or Anthropic tool definitions
(``{"name", "description", "input_schema"}``).

:func:`read_messages` and :func:`read_tools` return every problem at once, one
``field: problem`` line each, so a user fixes a conversation in one pass.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = [
    "ROLES",
    "Message",
    "Tool",
    "ToolCall",
    "assistant_turns",
    "call_results",
    "read_messages",
    "read_tools",
    "result_names",
]

Role = Literal["system", "user", "assistant", "tool"]
ROLES: tuple[str, ...] = ("system", "developer", "user", "assistant", "tool")
"""The roles a message may have (``developer`` is OpenAI's newer name for ``system``)."""


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One call of a tool by the assistant."""

    id: str
    name: str
    arguments: Any
    """The arguments, decoded from their JSON."""


@dataclass(frozen=True, slots=True)
class Message:
    """One message, normalised: ``content`` is text ("" when there is none)."""

    role: Role
    content: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    """A ``tool`` message: the id of the call it answers."""
    is_error: bool = False
    """A ``tool`` message: the tool reported an error."""

    def to_json(self) -> dict[str, Any]:
        """The OpenAI chat form of the message (what a conversation job stores)."""
        out: dict[str, Any] = {"role": self.role, "content": self.content}
        if self.tool_calls:
            out["tool_calls"] = [
                {
                    "id": c.id,
                    "type": "function",
                    "function": {"name": c.name, "arguments": json.dumps(c.arguments, ensure_ascii=False)},
                }
                for c in self.tool_calls
            ]
        if self.tool_call_id is not None:
            out["tool_call_id"] = self.tool_call_id
        if self.is_error:
            out["is_error"] = True
        return out


@dataclass(frozen=True, slots=True)
class Tool:
    """A tool the assistant could call: its name, description and JSON Schema of arguments."""

    name: str
    description: str = ""
    parameters: Mapping[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": dict(self.parameters),
            },
        }


def _text_of(content: Any, where: str, say: list[str], *, allow_blocks: bool = True) -> str:
    """The text of a message's ``content``: a string, null, or a list of text parts."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list) and allow_blocks:
        texts: list[str] = []
        for i, part in enumerate(content):
            if isinstance(part, str):
                texts.append(part)
            elif isinstance(part, Mapping) and part.get("type") in ("text", "input_text", "output_text"):
                text = part.get("text")
                if not isinstance(text, str):
                    say.append(f"{where}.{i}.text: must be a string")
                    continue
                texts.append(text)
            elif isinstance(part, Mapping) and part.get("type") == "refusal":
                texts.append(str(part.get("refusal", "")))
            else:
                kind = part.get("type") if isinstance(part, Mapping) else type(part).__name__
                say.append(f"{where}.{i}: a content part of type {kind!r} is not text (only text is graded)")
        return "\n".join(texts)
    say.append(f"{where}: must be a string, null or a list of text parts")
    return ""


def _arguments(raw: Any, where: str, say: list[str]) -> Any:
    """A tool call's arguments: a JSON string (OpenAI), or already an object (Anthropic's input)."""
    if isinstance(raw, str):
        try:
            return json.loads(raw) if raw.strip() else {}
        except json.JSONDecodeError as exc:
            say.append(f"{where}: not JSON ({exc.msg} at column {exc.colno}): {raw[:60]!r}")
            return None
    if raw is None:
        return {}
    if isinstance(raw, (dict, list)):
        return raw
    say.append(f"{where}: must be a JSON string or an object, got {type(raw).__name__}")
    return None


def _openai_calls(calls: Any, where: str, say: list[str]) -> list[ToolCall]:
    if not isinstance(calls, list):
        say.append(f"{where}: must be a list")
        return []
    out: list[ToolCall] = []
    for i, call in enumerate(calls):
        here = f"{where}.{i}"
        if not isinstance(call, Mapping):
            say.append(f"{here}: must be an object")
            continue
        fn = call.get("function")
        if not isinstance(fn, Mapping):
            say.append(f"{here}.function: required (an object with name and arguments)")
            continue
        name, call_id = fn.get("name"), call.get("id")
        if not isinstance(name, str) or not name:
            say.append(f"{here}.function.name: required (the tool's name)")
            continue
        if not isinstance(call_id, str) or not call_id:
            say.append(f"{here}.id: required (tool results name their call by it)")
            continue
        out.append(
            ToolCall(call_id, name, _arguments(fn.get("arguments"), f"{here}.function.arguments", say))
        )
    return out


def _anthropic_blocks(role: str, blocks: list[Any], where: str, say: list[str]) -> list[Message]:
    """One Anthropic-format message (content blocks) as OpenAI-form messages."""
    texts: list[str] = []
    calls: list[ToolCall] = []
    results: list[Message] = []
    for i, block in enumerate(blocks):
        here = f"{where}.content.{i}"
        kind = block.get("type") if isinstance(block, Mapping) else None
        if isinstance(block, str):
            texts.append(block)
        elif kind == "text" and isinstance(block.get("text"), str):
            texts.append(block["text"])
        elif kind == "tool_use":
            if role != "assistant":
                say.append(f"{here}: a tool_use block belongs in an assistant message")
                continue
            name, call_id = block.get("name"), block.get("id")
            if not isinstance(name, str) or not name or not isinstance(call_id, str) or not call_id:
                say.append(f"{here}: a tool_use block needs an id and a name")
                continue
            calls.append(ToolCall(call_id, name, _arguments(block.get("input"), f"{here}.input", say)))
        elif kind == "tool_result":
            if role != "user":
                say.append(f"{here}: a tool_result block belongs in a user message")
                continue
            call_id = block.get("tool_use_id")
            if not isinstance(call_id, str) or not call_id:
                say.append(f"{here}.tool_use_id: required (the id of the tool_use it answers)")
                continue
            text = _text_of(block.get("content"), f"{here}.content", say)
            results.append(
                Message("tool", text, tool_call_id=call_id, is_error=block.get("is_error") is True)
            )
        elif kind in ("thinking", "redacted_thinking"):
            continue  # the model's reasoning: not part of what it said or did
        else:
            say.append(f"{here}: a content block of type {kind!r} is not text, tool_use or tool_result")
    out = list(results)
    if texts or calls or not results:
        out.append(Message(role, "\n".join(texts), tool_calls=tuple(calls)))  # type: ignore[arg-type]
    return out


def _is_anthropic(content: Any) -> bool:
    return isinstance(content, list) and any(
        isinstance(b, Mapping) and b.get("type") in ("tool_use", "tool_result") for b in content
    )


def read_messages(raw: Any, tools: Sequence[Tool] | None = None) -> tuple[list[Message], list[str]]:
    """The messages of a conversation, normalised, and every problem (``field: problem``).

    Checked: each message's role is known; a ``tool`` message answers a call made earlier
    in the conversation and not answered yet; each call's arguments are JSON; with ``tools``
    given, each call names one of them; the conversation has an assistant message.
    """
    say: list[str] = []
    if not isinstance(raw, list) or not raw:
        return [], ["messages: must be a non-empty list of messages"]
    messages: list[Message] = []
    origin: list[int] = []  # each normalised message's index in ``raw`` (problems name those)
    for i, m in enumerate(raw):
        origin += [i - 1] * (len(messages) - len(origin))
        where = f"messages.{i}"
        if not isinstance(m, Mapping):
            say.append(f"{where}: must be an object with a role")
            continue
        role = m.get("role")
        if role not in ROLES:
            say.append(f"{where}.role: unknown role {role!r} (use system, user, assistant or tool)")
            continue
        role = "system" if role == "developer" else role
        content = m.get("content")
        if isinstance(content, list) and _is_anthropic(content):
            messages += _anthropic_blocks(role, content, where, say)
            continue
        text = _text_of(content, f"{where}.content", say)
        if role == "assistant":
            calls = _openai_calls(m["tool_calls"], f"{where}.tool_calls", say) if m.get("tool_calls") else []
            messages.append(Message("assistant", text, tool_calls=tuple(calls)))
        elif role == "tool":
            call_id = m.get("tool_call_id")
            if not isinstance(call_id, str) or not call_id:
                say.append(f"{where}.tool_call_id: required (the id of the call this result answers)")
                continue
            messages.append(Message("tool", text, tool_call_id=call_id, is_error=m.get("is_error") is True))
        else:
            if m.get("tool_calls"):
                say.append(f"{where}.tool_calls: only an assistant message makes tool calls")
            messages.append(Message("user" if role == "user" else "system", text))
    origin += [len(raw) - 1] * (len(messages) - len(origin))
    say += _check_calls(messages, origin, tools)
    if messages and not any(m.role == "assistant" for m in messages) and not say:
        say.append("messages: has no assistant message (nothing to grade)")
    return messages, say


def _check_calls(
    messages: Sequence[Message], origin: Sequence[int], tools: Sequence[Tool] | None
) -> list[str]:
    """Tool results without their call, calls answered twice, a call id used again while its
    earlier call is unanswered (a result could not say which it answers), calls to unknown tools."""
    say: list[str] = []
    known = {t.name for t in tools} if tools is not None else None
    open_calls: dict[str, str] = {}
    seen: set[str] = set()
    for m, i in zip(messages, origin, strict=True):
        for c in m.tool_calls:
            if c.id in open_calls:  # (an id answered already may come again: real logs reuse them)
                say.append(
                    f"messages.{i}.tool_calls: the id {c.id!r} is used by an earlier call not answered yet"
                )
            seen.add(c.id)
            open_calls[c.id] = c.name
            if known is not None and c.name not in known:
                names = ", ".join(sorted(known)) or "none"
                say.append(f"messages.{i}.tool_calls: calls {c.name!r}, not one of the tools ({names})")
        if m.role == "tool":
            assert m.tool_call_id is not None
            if m.tool_call_id not in open_calls:
                why = "answered already" if m.tool_call_id in seen else "no earlier call has that id"
                say.append(f"messages.{i}.tool_call_id: {m.tool_call_id!r}: {why}")
            else:
                del open_calls[m.tool_call_id]
    return say


def read_tools(raw: Any) -> tuple[list[Tool], list[str]]:
    """The tool definitions (OpenAI or Anthropic form) and every problem."""
    if not isinstance(raw, list):
        return [], ["tools: must be a list of tool definitions"]
    tools: list[Tool] = []
    say: list[str] = []
    names: set[str] = set()
    for i, t in enumerate(raw):
        where = f"tools.{i}"
        if not isinstance(t, Mapping):
            say.append(f"{where}: must be an object")
            continue
        fn: Mapping[str, Any] = t["function"] if isinstance(t.get("function"), Mapping) else t
        name = fn.get("name")
        schema = fn.get("parameters", fn.get("input_schema", {}))
        if not isinstance(name, str) or not name:
            say.append(f"{where}.name: required")
            continue
        if name in names:
            say.append(f"{where}.name: {name!r} is defined twice")
        if not isinstance(schema, Mapping):
            say.append(f"{where}.parameters: must be a JSON Schema object")
            schema = {}
        description = fn.get("description") or ""
        names.add(name)
        tools.append(Tool(name, description if isinstance(description, str) else "", schema))
    return tools, say


def call_results(messages: Sequence[Message]) -> list[tuple[ToolCall, Message | None]]:
    """Every tool call, in order, with the result that answered it (None: unanswered). A
    result answers the open call of its id (an id answered already may come again: each use
    is its own call)."""
    pairs: list[tuple[ToolCall, Message | None]] = []
    open_calls: dict[str, int] = {}
    for m in messages:
        for c in m.tool_calls:
            open_calls[c.id] = len(pairs)
            pairs.append((c, None))
        if m.role == "tool" and m.tool_call_id in open_calls:
            k = open_calls.pop(m.tool_call_id)
            pairs[k] = (pairs[k][0], m)
    return pairs


def result_names(messages: Sequence[Message]) -> dict[int, str]:
    """The tool each ``tool`` message (by index) answers, from the call it answers."""
    names: dict[int, str] = {}
    open_calls: dict[str, str] = {}
    for i, m in enumerate(messages):
        for c in m.tool_calls:
            open_calls[c.id] = c.name
        if m.role == "tool" and m.tool_call_id in open_calls:
            names[i] = open_calls.pop(m.tool_call_id)
    return names


def assistant_turns(messages: Sequence[Message]) -> list[int]:
    """The indices of the assistant messages (the turns a per-turn rubric grades)."""
    return [i for i, m in enumerate(messages) if m.role == "assistant"]

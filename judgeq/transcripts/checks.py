"""Trajectory checks: deterministic tests of what an agent did, run before (and instead of)
the judge, at no cost.

A check is declared in a rubric's frontmatter (``checks:``) or in a job (``checks``), one
mapping each::

    checks:
      - {check: tool_used, tool: get_weather}
      - {check: tool_not_used, tool: send_email, hard: true}
      - {check: sequence, tools: [search_contacts, send_email], mode: in_order}
      - {check: arguments, tool: get_weather, arguments: {city: Lisbon}, match: subset}
      - {check: arguments, tool: get_weather, match: schema}
      - {check: max_steps, max: 6}
      - {check: final_answer_contains, text: "16 June"}
      - {check: reference_calls, mode: in_order, match: subset}

``sequence`` modes: ``exact`` (the calls are these tools, in this order, and no other),
``unordered`` (these tools and no other, in any order), ``in_order`` (these tools appear in
this order, other calls between allowed) and
``any_order`` (each appears, in any order). ``arguments`` matches: ``exact`` (equal),
``subset`` (every given key has the given value; nested objects alike) and ``schema``
(valid against the tool's JSON Schema from the job's ``tools``); the check passes when at
least one call of the tool matches. ``skip_failed: true`` leaves out the calls whose tool
result is an error (``is_error``: they changed nothing). ``max_steps`` bounds the number of tool calls.
``reference_calls`` compares the calls with the job's ``reference.tool_calls`` (names in
the given mode, each reference call's arguments by ``match``; with ``tools``, only the calls
of those tools on both sides, e.g. the ones that change state) and is skipped for a job
without them. A check whose ``hard`` is true and that fails settles the job without a judge
call (recorded as settled by the checks, never as a judge's score).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, model_validator

from judgeq.transcripts.messages import Message, Tool, ToolCall, call_results

__all__ = ["Check", "CheckOutcome", "ReferenceCall", "final_answer", "run_checks"]

CheckType = Literal[
    "tool_used",
    "tool_not_used",
    "sequence",
    "arguments",
    "max_steps",
    "final_answer_contains",
    "reference_calls",
]


class ReferenceCall(BaseModel):
    """An expected tool call: its tool's name and (optionally) its arguments."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    arguments: dict[str, Any] | None = None


class Check(BaseModel):
    """One declared check."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    check: CheckType
    name: str | None = None
    """How the check is reported (default: derived from its type and tool)."""
    tool: str | None = None
    tools: list[str] | None = None
    mode: Literal["exact", "unordered", "in_order", "any_order"] = "in_order"
    match: Literal["exact", "subset", "schema"] = "subset"
    arguments: dict[str, Any] | None = None
    max: int | None = None
    text: str | None = None
    case_sensitive: bool = False
    skip_failed: bool = False
    """Calls whose tool result is an error do not count (they changed nothing)."""
    hard: bool = False

    @model_validator(mode="after")
    def _needs(self) -> Check:
        need = {
            "tool_used": ("tool",),
            "tool_not_used": ("tool",),
            "sequence": ("tools",),
            "arguments": ("tool",),
            "max_steps": ("max",),
            "final_answer_contains": ("text",),
            "reference_calls": (),
        }[self.check]
        missing = [f for f in need if getattr(self, f) is None]
        if missing:
            raise ValueError(f"{missing[0]}: required for a {self.check} check")
        if self.check == "arguments" and self.match != "schema" and self.arguments is None:
            raise ValueError(f"arguments: required for an arguments check that matches {self.match!r}")
        if self.max is not None and self.max < 0:
            raise ValueError("max: must be 0 or more")
        return self

    @property
    def label(self) -> str:
        """The check's name in results and reports."""
        if self.name:
            return self.name
        target = self.tool or (">".join(self.tools) if self.tools else None)
        if self.check == "final_answer_contains":
            target = json.dumps(self.text, ensure_ascii=False)[:40]
        extra = {
            "sequence": f":{self.mode}",
            "arguments": f":{self.match}"
            + (json.dumps(self.arguments, ensure_ascii=False, sort_keys=True)[:60] if self.arguments else ""),
            "max_steps": f"<={self.max}",
            "reference_calls": f":{self.mode}:{self.match}",
        }.get(self.check, "")
        return f"{self.check}{'(' + target + ')' if target else ''}{extra}"


@dataclass(frozen=True, slots=True)
class CheckOutcome:
    """A check's result: passed, and why not."""

    label: str
    passed: bool
    hard: bool
    detail: str = ""


def _subset(expected: Any, actual: Any) -> bool:
    """Every key of ``expected`` is in ``actual`` with a matching value; lists match element by
    element (same length), objects inside them as subsets too."""
    if isinstance(expected, Mapping):
        return isinstance(actual, Mapping) and all(
            k in actual and _subset(v, actual[k]) for k, v in expected.items()
        )
    if isinstance(expected, list):
        return (
            isinstance(actual, list)
            and len(actual) == len(expected)
            and all(_subset(e, a) for e, a in zip(expected, actual, strict=True))
        )
    return bool(expected == actual)


def _args_match(expected: Mapping[str, Any], actual: Any, match: str) -> bool:
    return _subset(expected, actual) if match == "subset" else expected == actual


def _in_order(wanted: Sequence[str], names: Sequence[str]) -> bool:
    it = iter(names)
    return all(any(n == w for n in it) for w in wanted)


def _sequence(wanted: Sequence[str], names: Sequence[str], mode: str) -> bool:
    if mode == "exact":
        return list(wanted) == list(names)
    if mode == "unordered":
        return sorted(wanted) == sorted(names)
    if mode == "in_order":
        return _in_order(wanted, names)
    pool = list(names)
    for w in wanted:
        if w not in pool:
            return False
        pool.remove(w)
    return True


def _schema_problem(call: ToolCall, tools: Sequence[Tool]) -> str | None:
    import jsonschema  # 90 ms to import: only a schema check needs it, not every CLI start

    tool = next((t for t in tools if t.name == call.name), None)
    if tool is None:
        return f"no definition of {call.name!r} in the job's tools"
    try:
        jsonschema.validate(call.arguments, dict(tool.parameters))
    except jsonschema.ValidationError as exc:
        where = "/".join(str(p) for p in exc.absolute_path) or "arguments"
        return f"{where}: {exc.message}"
    except jsonschema.SchemaError as exc:
        return f"the tool's schema is invalid: {exc.message}"
    except Exception as exc:  # e.g. a $ref that cannot be resolved: the check fails, said why
        return f"the tool's schema cannot be used: {type(exc).__name__}: {str(exc)[:200]}"
    return None


def _short(names: Sequence[str]) -> str:
    return ", ".join(names[:8]) + (f" (+{len(names) - 8})" if len(names) > 8 else "") if names else "no calls"


def _one(
    check: Check,
    calls: Sequence[ToolCall],
    final: str,
    tools: Sequence[Tool],
    reference: Sequence[ReferenceCall] | None,
) -> CheckOutcome | None:
    names = [c.name for c in calls]

    def out(ok: bool, why: str = "") -> CheckOutcome:
        return CheckOutcome(check.label, ok, check.hard, "" if ok else why)

    match check.check:
        case "tool_used":
            return out(check.tool in names, f"{check.tool} was not called (calls: {_short(names)})")
        case "tool_not_used":
            n = names.count(check.tool or "")
            return out(n == 0, f"{check.tool} was called {n} time{'s' if n != 1 else ''}")
        case "sequence":
            assert check.tools is not None
            ok = _sequence(check.tools, names, check.mode)
            return out(ok, f"calls were {_short(names)}; wanted {', '.join(check.tools)} ({check.mode})")
        case "arguments":
            mine = [c for c in calls if c.name == check.tool]
            if not mine:
                return out(False, f"{check.tool} was not called")
            if check.match == "schema":
                problems = [_schema_problem(c, tools) for c in mine]
                return out(any(p is None for p in problems), next((p for p in problems if p), ""))
            assert check.arguments is not None
            ok = any(_args_match(check.arguments, c.arguments, check.match) for c in mine)
            return out(ok, f"no call of {check.tool} had arguments {check.match} {check.arguments}")
        case "max_steps":
            assert check.max is not None
            return out(len(calls) <= check.max, f"{len(calls)} tool calls, over {check.max}")
        case "final_answer_contains":
            assert check.text is not None
            hay, needle = (final, check.text) if check.case_sensitive else (final.lower(), check.text.lower())
            return out(needle in hay, f"the final answer does not contain {check.text!r}")
        case "reference_calls":
            if reference is None:
                return None  # the job has no reference calls: nothing to compare
            if check.tools is not None:  # only these tools count (e.g. those that change state)
                calls = [c for c in calls if c.name in check.tools]
                names = [c.name for c in calls]
                reference = [r for r in reference if r.name in check.tools]
            wanted = [r.name for r in reference]
            if not _sequence(wanted, names, check.mode):
                return out(
                    False, f"calls were {_short(names)}; the reference {_short(wanted)} ({check.mode})"
                )
            if check.match == "schema":
                problems = [_schema_problem(c, tools) for c in calls]
                bad = next((p for p in problems if p), None)
                return out(bad is None, bad or "")
            for r in reference:
                if r.arguments is None:
                    continue
                if not any(
                    c.name == r.name and _args_match(r.arguments, c.arguments, check.match) for c in calls
                ):
                    return out(False, f"no call of {r.name} had the reference's arguments ({check.match})")
            return out(True)
    raise AssertionError(check.check)  # pragma: no cover - the Literal covers every type


def run_checks(
    checks: Sequence[Check],
    messages: Sequence[Message],
    tools: Sequence[Tool] = (),
    reference: Sequence[ReferenceCall] | None = None,
) -> list[CheckOutcome]:
    """Every applicable check's outcome on a conversation (a ``reference_calls`` check is
    skipped for a job without reference calls)."""
    pairs = call_results(messages)
    calls = [c for c, _ in pairs]
    ok = [c for c, result in pairs if result is None or not result.is_error]
    final = final_answer(messages)
    outcomes = [_one(c, ok if c.skip_failed else calls, final, tools, reference) for c in checks]
    return _unique([o for o in outcomes if o is not None])


def _unique(outcomes: list[CheckOutcome]) -> list[CheckOutcome]:
    """Outcomes under distinct labels: a label that comes again gets ``#2``, ``#3``... (two
    checks of one kind would hide each other in the results and the report)."""
    seen: dict[str, int] = {}
    out = []
    for o in outcomes:
        seen[o.label] = seen.get(o.label, 0) + 1
        out.append(
            o
            if seen[o.label] == 1
            else CheckOutcome(f"{o.label}#{seen[o.label]}", o.passed, o.hard, o.detail)
        )
    return out


def final_answer(messages: Sequence[Message]) -> str:
    """The last assistant message's text ("" when it only called tools: the agent gave no answer)."""
    return next((m.content for m in reversed(messages) if m.role == "assistant"), "")

"""The conversation section of a report: the trajectory checks' pass rates, the tools called
and how the conversations that called each fared, and the worst conversations; report.json's
``conversation`` (:class:`ConversationStats`, streamed: one :meth:`~ConversationStats.add` per
result, the worst list bounded) and its Markdown (:func:`conversation_markdown`).
"""

from __future__ import annotations

import heapq
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from judgeq.grading.result import Result
from judgeq.report.formatting import fmt, fmt_ci
from judgeq.report.stats import histogram, pct, wilson

__all__ = ["WORST_KEPT", "ConversationStats", "conversation_markdown"]

WORST_KEPT = 10
"""How many of the worst conversations a report lists."""
POSITIONS = 10
"""Turns reported by position (1st, 2nd, ...); later ones together."""


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
    _worst: list[tuple[float, int, dict[str, Any]]] = field(default_factory=list)

    def add(self, r: Result) -> None:
        if r.kind != "conversation":
            return
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
        entry = {
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

    def to_dict(self) -> dict[str, Any] | None:
        """The ``conversation`` section of report.json (None: the run has no conversation)."""
        if not self.jobs:
            return None
        worst = [e for b, _, e in sorted(self._worst, key=lambda t: t[:2], reverse=True) if b > 0]
        return {
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
            **({"turns": self._turns()} if self.turn_hist else {}),
            "worst": worst,
        }

    def _turns(self) -> dict[str, Any]:
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


def conversation_markdown(section: dict[str, Any] | None) -> list[str]:
    """Checks, tools and the worst conversations, as Markdown lines (none without the section)."""
    if not section:
        return []
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
        t = section["turns"]
        means = ", ".join(f"{k}: {fmt(v['mean'])} ({v['turns']})" for k, v in t["mean_by_position"].items())
        lines += [f"{t['graded']} turns graded one by one; mean score by turn (turns): {means}.", ""]
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

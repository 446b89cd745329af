"""Conversation jobs through the distributed path (issue 30, point 4): real Redis, real Celery
workers, the real Anthropic SDK against the fake Messages API; graded turn by turn, settled by a
hard check, live and through the Message Batches lane."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from judgeq.testing.fake_anthropic import FakeMessagesAPI

from .harness import API_KEY, Worker, judgeq_cli, write_batch

pytestmark = pytest.mark.integration

LANE_ENV = {"JUDGEQ_BATCH_POLL_INTERVAL": "0.2", "JUDGEQ_BATCH_FLUSH_INTERVAL": "1"}
RUBRIC = """---
name: agent-turns
version: 1.0.0
scale: 1-10
job: conversation
scope: turn
turns: {aggregate: min, window: 2}
description: Each turn of a support agent.
checks:
  - {check: tool_not_used, tool: cancel_order, hard: true}
  - {check: tool_used, tool: get_order_status}
---
Grade the marked assistant message from 1 to 10.
"""


def call(cid: str, name: str, order: str) -> dict[str, Any]:
    return {
        "id": cid,
        "type": "function",
        "function": {"name": name, "arguments": json.dumps({"order_id": order})},
    }


def conversations(n: int) -> tuple[list[dict[str, Any]], int, set[int]]:
    """``n`` conversations of 1-3 exchanges (each: a question, a lookup, its result, an answer);
    every 5th cancels the order (a hard check settles it); job 3's last answer the judge cannot
    parse. Returns the rows, the judge calls the graded ones make (a turn each) and the settled."""
    rows, calls, settled = [], 0, set()
    for i in range(n):
        messages: list[dict[str, Any]] = [{"role": "system", "content": "You are a support agent."}]
        tool = "cancel_order" if i % 5 == 0 else "get_order_status"
        for k in range(i % 3 + 1):
            order, cid = f"{4000 + i}{k}", f"call_{i}_{k}"
            messages += [
                {"role": "user", "content": f"What about order {order}?"},
                {"role": "assistant", "content": None, "tool_calls": [call(cid, tool, order)]},
                {"role": "tool", "tool_call_id": cid, "content": '{"status": "shipped"}'},
                {"role": "assistant", "content": f"Order {order} has shipped."},
            ]
        if i == 3:
            messages[-1]["content"] += " [[fake:garbage]]"
        if i % 5 == 0:
            settled.add(i)
        else:
            calls += 2 * (i % 3 + 1)
        rows.append({"id": f"c{i:03d}", "messages": messages, "model": f"agent-{i % 2}"})
    return rows, calls, settled


def submit(tmp_path: Path, env: dict[str, str], *extra: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    rows, _, _ = conversations(20)
    batch = write_batch(tmp_path / "conv.jsonl", rows)
    rubric = tmp_path / "agent-turns.md"
    rubric.write_text(RUBRIC)
    out = tmp_path / "out"
    proc = judgeq_cli(
        "submit", str(batch), "--rubric", str(rubric), "--judge", "anthropic:claude-test", "--wait",
        "--out", str(out), *extra, env=env,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    run_id = proc.stdout.splitlines()[0]
    report = json.loads((out / run_id / "report.json").read_text())
    verdicts = [json.loads(line) for line in (out / run_id / "verdicts.jsonl").read_text().splitlines()]
    assert API_KEY not in (out / run_id / "report.json").read_text()
    return report, verdicts


def check(report: dict[str, Any], verdicts: list[dict[str, Any]]) -> None:
    rows, _, settled = conversations(20)
    c = report["counts"]
    assert (c["total"], c["null"], c["settled_by_checks"]) == (20, 1, len(settled))
    assert c["null_by_reason"] == {"parse_error": 1}
    by_id = {v["job_id"]: v for v in verdicts}
    assert len(by_id) == 20
    for i, row in enumerate(rows):
        v = by_id[row["id"]]
        if i in settled:
            assert v["settled_by"] == "checks" and v["passed"] is False and v["attempts"] == 0
        elif i == 3:
            assert v["status"] == "null"
        else:
            assert v["status"] == "graded" and len(v["turn_scores"]) == 2 * (i % 3 + 1)
            assert v["overall"] == min(v["turn_scores"])
    section = report["conversation"]
    assert section["checks"]["tool_not_used(cancel_order)"]["passed"] == 20 - len(settled)
    assert section["turns"]["graded"] == sum(len(v.get("turn_scores") or []) for v in verdicts)


def test_conversations_graded_turn_by_turn_by_real_workers(
    tmp_path: Path, env: dict[str, str], fake_api: FakeMessagesAPI, start_worker: Callable[..., Worker]
) -> None:
    start_worker("w1")
    start_worker("w2")
    report, verdicts = submit(tmp_path, env, "--no-cache")
    check(report, verdicts)
    _, calls, _ = conversations(20)
    assert fake_api.request_count == calls, "a call per turn, none for a settled job, none twice"


def test_conversations_through_the_message_batches_lane(
    tmp_path: Path, env: dict[str, str], fake_api: FakeMessagesAPI, start_worker: Callable[..., Worker]
) -> None:
    fake_api.batch_latency = 0.3
    start_worker("w1", env=LANE_ENV)
    report, verdicts = submit(tmp_path, {**env, **LANE_ENV}, "--batch-api", "--no-cache")
    check(report, verdicts)
    _, calls, _ = conversations(20)
    assert fake_api.batch_request_count == calls and fake_api.request_count == 0
    assert report["judge"]["lane"] == "batch"

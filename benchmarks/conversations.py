"""Conversation jobs through the distributed path, against response jobs (issue 30, point 9).

One redis-server, the fake Anthropic judge in its own process (``--latency`` seconds a call),
``--workers`` worker processes; in the same run, three ``judgeq submit --wait`` runs:

* ``responses``: ``--jobs`` response jobs, rubric ``quality`` (one call each);
* ``conversations``: ``--jobs`` conversations of 6-12 messages with tool calls and results,
  rubric ``task-success`` (the whole conversation in one call, with its reference check);
* ``turns``: ``--turn-jobs`` of those conversations, a rubric with ``scope: turn`` (a call per
  assistant message: 3-6 a job).

Printed for each: wall time (submit to report files), judge calls answered (the stand-in's
count), judge calls per second, and its ratio to the response run's. Required: every
conversation run >= 0.9x the response run's judge calls per second (a conversation's bigger
request and its checks cost little beside the call).

    python benchmarks/conversations.py [--jobs 10000] [--turn-jobs 2000] [--latency 0.2]
                                       [--concurrency 32] [--workers 2]
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from _harness import (
    Worker,
    cpu_seconds,
    env_for,
    fake_api,
    fake_stats,
    judgeq_cmd,
    redis_server,
    workdir,
    write_batch,
)

MODEL = "claude-bench"
TURN_RUBRIC = """---
name: turn-quality
version: 1.0.0
scale: 1-10
job: conversation
scope: turn
turns: {aggregate: min, window: 3}
description: Each assistant turn's helpfulness and correctness.
---
Grade the marked assistant message from 1 to 10 for helpfulness and correctness.
"""


def write_conversations(path: Path, n: int, seed: int = 0) -> Path:
    """``n`` support conversations of 6-12 messages: the user asks about orders, the agent
    looks each up (a tool call and its result) and answers."""
    rng = random.Random(seed)
    tool = {
        "type": "function",
        "function": {
            "name": "get_order_status",
            "description": "The status of an order.",
            "parameters": {
                "type": "object",
                "properties": {"order_id": {"type": "string"}},
                "required": ["order_id"],
            },
        },
    }
    with path.open("w") as f:
        for i in range(n):
            messages: list[dict[str, object]] = [{"role": "system", "content": "You are a support agent."}]
            orders = [str(10000 + rng.randrange(90000)) for _ in range(rng.randint(1, 3))]
            for k, order in enumerate(orders):
                messages.append({"role": "user", "content": f"Where is my order {order}?"})
                call_id = f"call_{i}_{k}"
                args = json.dumps({"order_id": order})
                messages.append(
                    {
                        "role": "assistant",
                        "content": None,
                        "tool_calls": [
                            {
                                "id": call_id,
                                "type": "function",
                                "function": {"name": "get_order_status", "arguments": args},
                            }
                        ],
                    }
                )
                messages.append(
                    {"role": "tool", "tool_call_id": call_id, "content": json.dumps({"status": "shipped"})}
                )
                messages.append({"role": "assistant", "content": f"Order {order} has shipped."})
            line = {
                "id": f"c{i:07d}",
                "messages": messages[: 12 if len(messages) > 12 else len(messages)],
                "tools": [tool],
                "reference": {
                    "tool_calls": [{"name": "get_order_status", "arguments": {"order_id": orders[0]}}]
                },
                "model": f"agent-{i % 3}",
            }
            f.write(json.dumps(line) + "\n")
    return path


CPU_PARTS = ("submit", "workers", "judge", "redis")


def cpu(pids: dict[str, list[int]]) -> dict[str, float]:
    """CPU seconds so far of each part: the ``judgeq submit`` children this process has
    waited for, and the live processes named in ``pids``."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return {"submit": usage.ru_utime + usage.ru_stime} | {
        part: sum(cpu_seconds(pid) for pid in ids) for part, ids in pids.items()
    }


def run(
    batch: Path,
    rubric: str,
    out: Path,
    env: dict[str, str],
    run_id: str,
    api: str,
    pids: dict[str, list[int]],
) -> tuple[float, int, dict[str, float]]:
    before = int(fake_stats(api)["request_count"])
    cpu_before = cpu(pids)
    start = time.perf_counter()
    judgeq_cmd(
        "submit", str(batch), "--rubric", rubric, "--judge", f"anthropic:{MODEL}", "--run-id", run_id,
        "--no-cache", "--wait", "--out", str(out), env=env,
    )  # fmt: skip
    wall = time.perf_counter() - start
    used = {part: s - cpu_before[part] for part, s in cpu(pids).items()}
    report = json.loads((out / run_id / "report.json").read_text())
    assert report["counts"]["null"] == 0, report["counts"]
    return wall, int(fake_stats(api)["request_count"]) - before, used


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--jobs", type=int, default=10000)
    ap.add_argument("--turn-jobs", type=int, default=2000)
    ap.add_argument("--latency", type=float, default=0.2)
    ap.add_argument("--concurrency", type=int, default=32)
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args()
    with (
        workdir("judgeq-conv-") as tmp,
        redis_server(tmp) as (redis_url, redis_proc, _),
        fake_api(args.latency, procs=(judge_procs := [])) as api,
    ):
        env = env_for(redis_url, api, JUDGEQ_LOG_LEVEL="WARNING")
        responses = write_batch(tmp / "responses.jsonl", args.jobs)
        conversations = write_conversations(tmp / "conversations.jsonl", args.jobs)
        turns = write_conversations(tmp / "turns.jsonl", args.turn_jobs, seed=1)
        (tmp / "turn.md").write_text(TURN_RUBRIC)
        workers = [Worker(env, tmp, f"w{i}", args.concurrency).start() for i in range(args.workers)]
        pids = {
            "workers": [w.proc.pid for w in workers if w.proc is not None],
            "judge": [p.pid for p in judge_procs],
            "redis": [redis_proc.pid],
        }
        try:
            rows = [
                ("responses", *run(responses, "quality", tmp / "out", env, "responses", api, pids)),
                (
                    "conversations",
                    *run(conversations, "task-success", tmp / "out", env, "conversations", api, pids),
                ),
                ("turns", *run(turns, str(tmp / "turn.md"), tmp / "out", env, "turns", api, pids)),
            ]
        finally:
            for w in workers:
                w.stop()
    base = rows[0][2] / rows[0][1]
    print(f"{args.workers} workers x {args.concurrency}, judge latency {args.latency}s")
    print(f"{'run':14} {'wall s':>8} {'calls':>8} {'calls/s':>9} {'vs responses':>13}")
    for name, wall, calls, _ in rows:
        rate = calls / wall
        print(f"{name:14} {wall:8.1f} {calls:8d} {rate:9.1f} {rate / base:12.2f}x")
    print("CPU ms per judge call (a 2-core machine's calls per second are bound by their sum):")
    print(f"{'run':14} " + " ".join(f"{part:>8}" for part in CPU_PARTS) + f" {'all':>8} {'vs responses':>13}")
    base_cpu = sum(rows[0][3].values()) / rows[0][2]
    for name, _, calls, used in rows:
        per = {part: used[part] / calls * 1000 for part in CPU_PARTS}
        total = sum(per.values())
        print(
            f"{name:14} " + " ".join(f"{per[part]:8.2f}" for part in CPU_PARTS)
            + f" {total:8.2f} {total / (base_cpu * 1000):12.2f}x"
        )  # fmt: skip
    worst = min(calls / wall / base for _, wall, calls, _ in rows[1:])
    print(
        f"required: every conversation run >= 0.90x; lowest {worst:.2f}x: "
        + ("ok" if worst >= 0.9 else "MISSED")
    )
    return 0 if worst >= 0.9 else 1


if __name__ == "__main__":
    sys.exit(main())

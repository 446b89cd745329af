"""A mixed fleet never bounces a job (issue 29, point 5).

A run on an OpenAI judge, graded twice in one invocation on one Redis and one OpenAI stand-in
(in this process, ``--latency`` seconds a call):

* ``alone``  -- one worker holding the OpenAI key;
* ``mixed``  -- the same worker, plus ``--keyless`` workers holding only an Anthropic key (a
  fleet where some machines cannot call this run's judge).

Printed: the wall time of each (``judgeq submit --wait``, enqueue to report), their ratio, the
jobs each worker graded, and the messages the keyless workers sent back to a queue ("its jobs
go back to the queue" in their logs). Required: 0 messages sent back, every job graded, the
mixed run within 1.2x the lone worker's wall time (messages are routed to the queue of the
judge's provider, which only the workers able to call it consume).

    python benchmarks/mixed_fleet.py [--jobs 3000] [--latency 0.05] [--concurrency 16] [--keyless 2]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from _harness import Worker, env_for, judgeq_cmd, redis_server, workdir, write_batch

from judgeq.testing.fake_openai import FakeChatAPI

MODEL = "gpt-bench"
KEY = "sk-openai-bench"
BOUNCE = "its jobs go back to the queue"


def graded_by(log: Path) -> int:
    """Grade messages a worker finished (its log at INFO: one 'succeeded' line each)."""
    return sum(
        1
        for line in log.read_text(errors="replace").splitlines()
        if "judgeq.grade[" in line and "succeeded" in line
    )


def run(batch: Path, out: Path, env: dict[str, str], run_id: str) -> tuple[float, dict[str, object]]:
    start = time.perf_counter()
    judgeq_cmd(
        "submit", str(batch), "--rubric", "quality", "--judge", f"openai:{MODEL}", "--run-id", run_id,
        "--no-cache", "--wait", "--out", str(out), env=env,
    )  # fmt: skip
    wall = time.perf_counter() - start
    return wall, json.loads((out / run_id / "report.json").read_text())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--jobs", type=int, default=3000)
    ap.add_argument("--latency", type=float, default=0.05)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--keyless", type=int, default=2)
    args = ap.parse_args()
    with (
        workdir("judgeq-mixed-") as tmp,
        redis_server(tmp) as (redis_url, _, _),
        FakeChatAPI(api_key=KEY, models=(MODEL,), latency=args.latency) as api,
    ):
        base = env_for(redis_url, "http://127.0.0.1:9", JUDGEQ_LOG_LEVEL="INFO")
        base.pop("ANTHROPIC_API_KEY", None)
        base.pop("ANTHROPIC_BASE_URL", None)
        openai_env = {**base, "OPENAI_API_KEY": KEY, "OPENAI_BASE_URL": api.base_url + "/v1"}
        keyless_env = {**base, "ANTHROPIC_API_KEY": "sk-ant-bench-other"}
        batch = write_batch(tmp / "batch.jsonl", args.jobs)
        served = Worker(openai_env, tmp, "openai", args.concurrency).start()
        try:
            alone, report_a = run(batch, tmp / "out", openai_env, "alone")
            keyless = [
                Worker(keyless_env, tmp, f"keyless{i}", args.concurrency).start() for i in range(args.keyless)
            ]
            try:
                mixed, report_b = run(batch, tmp / "out", openai_env, "mixed")
            finally:
                for w in keyless:
                    w.stop()
        finally:
            served.stop()
        bounced = sum(w.log.read_text(errors="replace").count(BOUNCE) for w in keyless)
        by_keyless = sum(graded_by(w.log) for w in keyless)
        by_served = graded_by(served.log)
    counts_a: dict[str, int] = report_a["counts"]  # type: ignore[assignment]
    counts_b: dict[str, int] = report_b["counts"]  # type: ignore[assignment]
    ratio = mixed / alone
    print(f"jobs {args.jobs}, latency {args.latency:g} s, concurrency {args.concurrency} a worker")
    print(f"alone: 1 OpenAI worker                  {alone:7.1f} s  graded {counts_a['graded']}")
    print(f"mixed: + {args.keyless} Anthropic-only worker(s)   {mixed:7.1f} s  graded {counts_b['graded']}")
    print(f"mixed / alone: {ratio:.2f}x (required <= 1.2x)")
    print(f"messages the keyless workers sent back to a queue: {bounced} (required 0)")
    print(
        f"grade messages run: by the OpenAI worker {by_served}, by the keyless ones {by_keyless} (required 0)"
    )
    ok = (
        bounced == 0
        and by_keyless == 0
        and by_served > 0
        and counts_a["graded"] == counts_b["graded"] == args.jobs
        and ratio <= 1.2
    )
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

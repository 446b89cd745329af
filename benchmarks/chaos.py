"""Chaos: the full pipeline under killed workers, a Redis restart and judge faults.

    python benchmarks/chaos.py --jobs 20000            # all three scenarios
    python benchmarks/chaos.py --jobs 2000 --scenario kill

Real redis-server (AOF, appendfsync always), real ``judgeq worker`` processes, the fake
Messages API in its own process. For each scenario it prints: jobs submitted, results
stored, duplicates (results stored twice: must be 0), lost (jobs without a result: must be
0), extra judge calls (re-grades of redelivered jobs; counted once), nulls by reason against
those injected, and wall time; and it checks the report of the disturbed run against an
undisturbed grading of the same batch.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import redis
from _harness import Worker, env_for, fake_api, fake_stats, judgeq_cmd, redis_server, submit_and_wait, workdir

from judgeq.testing.faults import expected_nulls, fault_plan, response_rows

KILL_EVERY = 6.0  # seconds between SIGKILLs of the victim worker
FAST = {"JUDGEQ_JUDGE_TIMEOUT": "1", "JUDGEQ_JUDGE_DEADLINE": "3", "JUDGEQ_VISIBILITY_TIMEOUT": "10"}


def write(path: Path, rows: list[dict]) -> Path:
    with path.open("w") as f:
        for row in rows:
            f.write(json.dumps(row) + "\n")
    return path


def done_count(url: str) -> int:
    client = redis.Redis.from_url(url, decode_responses=True)
    try:
        for key in client.scan_iter("judgeq:run:*:counters"):
            return int(float(client.hget(key, "done") or 0))
    except redis.ConnectionError:
        return -1
    return 0


def strip(report: dict) -> dict:
    out = json.loads(json.dumps(report))
    for key in ("run_id", "started_at", "finished_at", "wall_s", "latency_ms", "batch", "usage"):
        out.pop(key, None)
    return out


def scenario(name: str, n: int, latency: float, workers: int, concurrency: int) -> dict:
    plan = fault_plan(n, 0.3) if name == "faults" else {}
    with (
        workdir(f"judgeq-chaos-{name}-") as tmp,
        redis_server(tmp, aof=True) as (url, rproc, rargs),
        fake_api(latency, timeout_sleep=5.0) as api,
    ):
        batch = write(tmp / "batch.jsonl", response_rows(n, plan))
        env = env_for(url, api, **FAST)
        pool = [Worker(env, tmp, f"w{i}", concurrency).start() for i in range(workers)]
        events: list[str] = []
        stop = threading.Event()

        def disturb() -> None:
            if name == "kill":
                victim = pool[-1]
                while True:
                    if stop.wait(KILL_EVERY):
                        return
                    if 0 <= done_count(url) < n:
                        victim.kill()
                        events.append(f"SIGKILL {victim.name} at {done_count(url)} done")
                        time.sleep(1)
                        victim.start()
            elif name == "redis":
                while not stop.wait(0.5):
                    if done_count(url) >= n // 3:
                        rproc.terminate()
                        rproc.wait()
                        events.append(f"redis stopped at {n // 3}+ done")
                        time.sleep(3)
                        new = subprocess.Popen(rargs)
                        events.append("redis restarted (AOF)")
                        stop.wait()
                        new.terminate()
                        new.wait()
                        return

        chaos = threading.Thread(target=disturb, daemon=True)
        t0 = time.perf_counter()
        chaos.start()
        try:
            run_id, report = submit_and_wait(batch, tmp / "out", env, "anthropic:claude-chaos")
        finally:
            stop.set()
        wall = time.perf_counter() - t0
        chaos.join(timeout=30)
        for w in pool:
            w.stop()
        ids = [json.loads(x)["job_id"] for x in (tmp / "out" / run_id / "verdicts.jsonl").open()]
        calls = fake_stats(api)["request_count"]  # the preflight asks the Models API: not counted
        # the same batch, undisturbed, in-process against the same fake judge
        judgeq_cmd(
            "run",
            str(batch),
            "--rubric",
            "quality",
            "--judge",
            "anthropic:claude-chaos",
            "--out",
            str(tmp / "ref"),
            "-c",
            "64",
            env=env,
        )
        ref_report = json.loads(next((tmp / "ref").glob("*/report.json")).read_text())
    injected = expected_nulls(plan)
    return {
        "scenario": name,
        "events": events,
        "jobs submitted": n,
        "results stored": len(ids),
        "duplicates": len(ids) - len(set(ids)),
        "lost": n - len(set(ids)),
        "judge calls (incl. retries and re-grades)": calls,
        "nulls by reason": report["counts"]["null_by_reason"],
        "nulls injected": dict(sorted(injected.items())),
        "nulls as injected": report["counts"]["null_by_reason"] == dict(sorted(injected.items())),
        "report equals undisturbed run": strip(report) == strip(ref_report),
        "wall time s": round(wall, 1),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=20000)
    ap.add_argument("--latency", type=float, default=0.05)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--concurrency", type=int, default=32)
    ap.add_argument("--scenario", choices=["kill", "redis", "faults", "all"], default="all")
    args = ap.parse_args()
    names = ["kill", "redis", "faults"] if args.scenario == "all" else [args.scenario]
    ok = True
    for name in names:
        r = scenario(name, args.jobs, args.latency, args.workers, args.concurrency)
        print(f"== scenario {name}")
        for k, v in r.items():
            if k != "scenario":
                print(f"   {k:<44} {v}")
        ok &= r["duplicates"] == 0 and r["lost"] == 0 and r["nulls as injected"]
        ok &= r["report equals undisturbed run"]
        sys.stdout.flush()
    print("ALL SCENARIOS HELD" if ok else "A SCENARIO FAILED")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()

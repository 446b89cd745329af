"""Throughput of the full pipeline against a sequential baseline, in the same run.

    python benchmarks/throughput.py --jobs 5000 --latency 0.2 --workers 2 --concurrency 32

Real redis-server, real ``judgeq worker`` processes, the real anthropic SDK against the fake
Messages API (a separate process) with the given latency. Prints jobs/s, the ideal
(total concurrency / judge latency), their ratio, and a plain sequential loop over the same
judge (``grade_job`` one job after the other) as the baseline. The baseline grades
``--baseline-jobs`` jobs of the same batch (default 200; ``all`` for every job) and reports its
measured rate, from which the time for the whole batch is extrapolated.
"""

from __future__ import annotations

import argparse
import time

from _harness import (
    API_KEY,
    Worker,
    env_for,
    fake_api,
    fake_stats,
    redis_server,
    submit_and_wait,
    workdir,
    write_batch,
)


def sequential_baseline(batch_path: str, api_url: str, n: int) -> float:
    """Jobs/s of a plain loop: render, call the judge, parse, score — one job at a time."""
    from judgeq import GradingContext, ResponseJob, RetryPolicy, grade_job, load_rubric
    from judgeq.judges.anthropic import AnthropicJudge

    judge = AnthropicJudge("claude-bench", api_key=API_KEY, base_url=api_url)
    ctx = GradingContext(rubric=load_rubric("quality"), judge=judge, policy=RetryPolicy())
    jobs = []
    with open(batch_path) as f:
        for i, line in enumerate(f):
            if i >= n:
                break
            jobs.append(ResponseJob.model_validate_json(line))
    start = time.perf_counter()
    for i, job in enumerate(jobs):
        result = grade_job(ctx, job, i)
        assert result.status == "graded", result
    return len(jobs) / (time.perf_counter() - start)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=5000)
    ap.add_argument("--latency", type=float, default=0.2)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--concurrency", type=int, default=32)
    ap.add_argument("--baseline-jobs", default="200")
    ap.add_argument(
        "--env",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="extra environment for the workers and the producer (repeatable)",
    )
    args = ap.parse_args()
    base_n = args.jobs if args.baseline_jobs == "all" else min(int(args.baseline_jobs), args.jobs)

    with (
        workdir("judgeq-bench-") as tmp,
        redis_server(tmp) as (redis_url, _, _),
        fake_api(args.latency) as api,
    ):
        batch = write_batch(tmp / "batch.jsonl", args.jobs)
        env = env_for(redis_url, api, **dict(kv.split("=", 1) for kv in args.env))
        workers = [Worker(env, tmp, f"w{i}", args.concurrency).start() for i in range(args.workers)]
        try:
            t0 = time.perf_counter()
            _run_id, report = submit_and_wait(batch, tmp / "out", env, "anthropic:claude-bench")
            wall = time.perf_counter() - t0
        finally:
            for w in workers:
                w.stop()
        calls = fake_stats(api)["request_count"] - 1  # minus the preflight call
        base_rate = sequential_baseline(str(batch), api, base_n)

    total_conc = args.workers * args.concurrency
    rate = args.jobs / wall
    ideal = total_conc / args.latency
    print(
        f"jobs                 {args.jobs} ({report['counts']['graded']} graded, "
        f"{report['counts']['null']} null; {calls} judge calls)"
    )
    print(f"workers x concurrency {args.workers} x {args.concurrency} = {total_conc}")
    print(f"judge latency        {args.latency * 1000:.0f} ms")
    print(f"pipeline wall time   {wall:.1f} s (submit to report files, enqueue included)")
    print(f"pipeline throughput  {rate:.1f} jobs/s")
    print(f"ideal                {ideal:.1f} jobs/s (total concurrency / latency)")
    print(f"ratio to ideal       {rate / ideal:.2f}")
    print(
        f"sequential baseline  {base_rate:.2f} jobs/s (measured on {base_n} jobs; the whole batch "
        f"would take {args.jobs / base_rate:.0f} s)"
    )
    print(f"speed-up vs baseline {rate / base_rate:.1f}x")


if __name__ == "__main__":
    main()

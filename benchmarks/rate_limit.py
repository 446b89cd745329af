"""The shared judge budget against a judge stand-in that answers 429 beyond N requests a
minute: 4 worker processes x 8 threads, everything on loopback.

Three runs in one invocation, each on a fresh Redis and a fresh stand-in:

* ``given``    — ``--rpm N``: the budget knows the limit;
* ``learned``  — no limit given: the budget learns it from the stand-in's headers;
* ``adaptive`` — no limit given and a stand-in that sends no rate-limit headers
  (``--no-limit-headers``): the budget halves on 429s and grows slowly.

Printed per run: jobs, nulls by reason, judge requests, 429s (share of requests), and the
requests the stand-in admitted per minute in steady state (after the first minute, whose
full bucket allows a burst) as a share of N.  Required (issue 10): given: 0 ``rate_limited``
nulls, >= 95 % of N, <= 1 % 429s; learned (no limit given): >= 85 % of N, <= 5 % 429s.

``--models`` runs them against each of the stand-in's limit models in turn (``token_bucket``,
the default, ``sliding_window``, ``per_second``; see :mod:`judgeq.testing.fake_anthropic`).

    python benchmarks/rate_limit.py [--rpm 120] [--jobs 450] [--latency 0.2] [--models token_bucket]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from _harness import (
    Worker,
    env_for,
    fake_api,
    fake_stats,
    redis_server,
    submit_and_wait,
    workdir,
    write_batch,
)

from judgeq.testing.fake_anthropic import LIMIT_MODELS


def steady_share(times: list[float], rpm: int) -> float:
    """Admitted requests a minute after the first minute, as a share of ``rpm``."""
    times = sorted(times)
    if len(times) < 2:
        return 0.0
    start, end = times[0] + 60.0, times[-1]
    if end - start < 10:
        return float("nan")  # the run was too short for a steady state
    n = sum(1 for t in times if start <= t <= end)
    return n / ((end - start) / 60.0) / rpm


def scenario(
    name: str, rpm: int, jobs: int, latency: float, headers: bool, limit_model: str = "token_bucket"
) -> dict[str, object]:
    with (
        workdir("judgeq-rl-") as tmp,
        redis_server(tmp) as (redis_url, _, _),
        fake_api(latency, rpm=rpm, headers=headers, limit_model=limit_model) as api_url,
    ):
        extra = {"JUDGEQ_JUDGE_RPM": str(rpm)} if name == "given" else {}
        env = env_for(redis_url, api_url, **extra)
        workers = [Worker(env, tmp, f"w{i}", concurrency=8).start() for i in range(4)]
        try:
            batch = write_batch(tmp / "batch.jsonl", jobs)
            _, report = submit_and_wait(batch, tmp / "out", env, "anthropic:claude-bench")
        finally:
            for w in workers:
                w.stop()
        stats = fake_stats(api_url)
        times = fake_stats(api_url, "accepted")["times"]
    by_status = {int(k): v for k, v in stats["by_status"].items()}
    requests = sum(by_status.values())
    return {
        "run": name,
        "jobs": report["counts"]["total"],
        "graded": report["counts"]["graded"],
        "nulls": report["counts"]["null_by_reason"],
        "requests": requests,
        "429": by_status.get(429, 0),
        "429_share": by_status.get(429, 0) / requests if requests else 0.0,
        "steady_share": steady_share(times, rpm),
        "wall_s": report["wall_s"],
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rpm", type=int, default=120)
    ap.add_argument("--jobs", type=int, default=450)
    ap.add_argument("--latency", type=float, default=0.2)
    ap.add_argument("--runs", default="given,learned,adaptive")
    ap.add_argument(
        "--models",
        default="token_bucket",
        help="comma-separated limit models of the stand-in: token_bucket, sliding_window, per_second",
    )
    args = ap.parse_args()
    models = [m.strip() for m in args.models.split(",") if m.strip()]
    unknown = sorted(set(models) - set(LIMIT_MODELS))
    if unknown or not models:
        ap.error(
            f"--models: unknown {', '.join(unknown) or 'nothing given'}; known: {', '.join(LIMIT_MODELS)}"
        )
    print(f"stand-in limit N = {args.rpm}/min, {args.jobs} jobs per run, 4 workers x 8 threads", flush=True)
    header = (
        f"{'run':<9} {'jobs':>5} {'graded':>6} {'requests':>8} {'429s':>11} {'steady use of N':>15}  nulls"
    )
    ok = True
    for model in models:
        print(f"\nlimit model: {model}")
        print(header)
        for name in args.runs.split(","):
            r = scenario(
                name, args.rpm, args.jobs, args.latency, headers=name != "adaptive", limit_model=model
            )
            share, q = float(r["steady_share"]), float(r["429_share"])  # type: ignore[arg-type]
            print(
                f"{r['run']:<9} {r['jobs']:>5} {r['graded']:>6} {r['requests']:>8} "
                f"{r['429']:>5} ({100 * q:4.1f}%) {100 * share:>14.1f}%  {r['nulls'] or 'none'}",
                flush=True,
            )
            need = {"given": (0.95, 0.01), "learned": (0.85, 0.05)}.get(name)
            if need is not None:
                ok &= not r["nulls"] and share >= need[0] and q <= need[1]
    print("\nrequired: given >= 95% of N and <= 1% 429s; learned >= 85% and <= 5%; no null")
    print("OK" if ok else "NOT MET")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

"""The shared judge budget against every kind of server limit: 4 worker processes x 8 threads,
the judge stand-in in its own process, everything on loopback, a fresh Redis and stand-in per
row. One table.

Servers (the stand-in's ``--limit-model``), each allowing N requests a minute:

* ``sliding``   -- at most N in any sliding 60 s (a gateway: LiteLLM, Kong);
* ``persecond`` -- at most N/60 in any sliding second (a per-minute limit enforced per second,
  as providers document they may);
* ``bucket``    -- a token bucket of N refilled at N/60 a second (the Anthropic API's own).

Budgets:

* ``given``    -- ``JUDGEQ_JUDGE_RPM=N`` (the server also sends its headers);
* ``learned``  -- nothing given; the server sends ``anthropic-ratelimit-*`` headers;
* ``adaptive`` -- nothing given and no headers (a gateway or proxy): found from 429s.

A row ``.../...+refused`` also has 5 % of its jobs refused by the server for themselves (429,
``retry-after: 0``, on every call): each must end ``rate_limited`` after 10 calls without
holding the others back. Its 429s are counted without those calls (which are shown apart).

Printed per row: jobs graded, ``rate_limited`` nulls, requests, 429s (share of requests), and
the requests the server admitted per minute as a share of N, after the first minute and after
the first two. Beside them, the same row in the simulator (:mod:`judgeq.testing.budget_sim`:
the same budget and retry loop, the same server model, 4 workers x 8 callers, the same jobs,
on a virtual clock): its use of N after the first minute, its 429s and its ``rate_limited``
nulls, and whether the two agree within 10 points (issue 28, point 3: a figure that does not
agree is a bug in one of them). Required (issue 18): given, sliding and per-second: <= 2 % 429s, 0
``rate_limited``, >= 90 % of N after the first minute; adaptive, sliding: >= 85 % of N after
the first two minutes, <= 5 % 429s, 0 ``rate_limited``.

    python benchmarks/rate_limit.py [--rpm 300] [--jobs 450] [--adaptive-jobs 1200]
        [--latency 0.2] [--rows given/sliding,adaptive/sliding,...]
"""

from __future__ import annotations

import argparse
import math
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

from judgeq.testing.budget_sim import BENCHMARK_MODELS as MODELS
from judgeq.testing.budget_sim import benchmark_row, use_after

ROWS = (
    "given/sliding",
    "given/persecond",
    "learned/sliding",
    "learned/persecond",
    "learned/bucket",
    "adaptive/sliding",
    "adaptive/persecond",
    "adaptive/bucket",
    "adaptive/sliding+refused",
    "learned/bucket+refused",
)
REQUIRED = {
    # row: (share of N after, at least; most 429s)
    "given/sliding": (60.0, 0.90, 0.02),
    "given/persecond": (60.0, 0.90, 0.02),
    "adaptive/sliding": (120.0, 0.85, 0.05),
    "adaptive/sliding+refused": (120.0, 0.0, 0.05),
}
"""Row: (use of N measured after so many seconds, at least; 429s of the limit, at most). The
``+refused`` row is held to no use of N: the calls of its jobs refused for themselves take the
budget's requests (a server may count a refused request) but none of the server's window."""


def scenario(row: str, rpm: int, jobs: int, latency: float) -> dict[str, object]:
    budget, server = row.split("/")
    server, _, refused = server.partition("+")
    directives = {i: "429,retry_after=0" for i in range(0, jobs, 20)} if refused else {}
    with (
        workdir("judgeq-rl-") as tmp,
        redis_server(tmp) as (redis_url, _, _),
        fake_api(latency, rpm=rpm, headers=budget != "adaptive", limit_model=MODELS[server]) as api_url,
    ):
        extra = {"JUDGEQ_JUDGE_RPM": str(rpm)} if budget == "given" else {}
        env = env_for(redis_url, api_url, **extra)
        workers = [Worker(env, tmp, f"w{i}", concurrency=8).start() for i in range(4)]
        try:
            batch = write_batch(tmp / "batch.jsonl", jobs, directives)
            _, report = submit_and_wait(batch, tmp / "out", env, "anthropic:claude-bench")
        finally:
            for w in workers:
                w.stop()
        stats = fake_stats(api_url)
        times = fake_stats(api_url, "accepted")["times"]
    by_status = {int(k): v for k, v in stats["by_status"].items()}
    requests = sum(by_status.values()) - stats.get("injected_429", 0)
    limit_429 = by_status.get(429, 0) - stats.get("injected_429", 0)
    return {
        "row": row,
        "jobs": report["counts"]["total"],
        "graded": report["counts"]["graded"],
        "nulls": report["counts"]["null_by_reason"],
        "requests": requests,
        "429": limit_429,
        "429_share": limit_429 / requests if requests else 0.0,
        "refused_calls": stats.get("injected_429", 0),
        "refused_jobs": len(directives),
        "use60": use_after(times, rpm, 60.0),
        "use120": use_after(times, rpm, 120.0),
        "wall_s": report["wall_s"],
    }


def agree(real: float, sim: float) -> bool:
    """Within 10 points (both shares); a figure not measured (nan) agrees with nothing."""
    return not (math.isnan(real) or math.isnan(sim)) and abs(real - sim) <= 0.10


def refused_note(r: dict[str, object], rpm: int) -> str:
    calls = int(r["requests"]) + int(r["refused_calls"])  # type: ignore[call-overload]
    per_minute = calls / (float(r["wall_s"]) / 60)  # type: ignore[arg-type]
    return (
        f"  ({r['refused_jobs']} jobs refused for themselves: {r['refused_calls']} calls; "
        f"all calls {100 * per_minute / rpm:.0f}% of N over the run)"
    )


def pct(x: float) -> str:
    return "   –  " if math.isnan(x) else f"{100 * x:5.1f}%"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rpm", type=int, default=300)
    ap.add_argument("--jobs", type=int, default=450, help="jobs of a given/learned row")
    ap.add_argument("--adaptive-jobs", type=int, default=1200, help="jobs of an adaptive row")
    ap.add_argument("--latency", type=float, default=0.2)
    ap.add_argument("--rows", default=",".join(ROWS))
    args = ap.parse_args()
    judge_ms = args.latency * 1000
    print(f"server limit N = {args.rpm}/min, 4 workers x 8 threads, {judge_ms:.0f} ms judge", flush=True)
    print(
        f"{'budget/server':<19} {'jobs':>5} {'graded':>6} {'rate_limited':>12} {'requests':>8} "
        f"{'429s':>13} {'use>1min':>8} {'use>2min':>8} {'wall':>6}  verdict  "
        f"| simulated: {'use>1min':>8} {'429s':>6} {'rl':>3}  agree"
    )
    ok = True
    agreed = 0
    for row in args.rows.split(","):
        jobs = args.adaptive_jobs if row.startswith("adaptive") else args.jobs
        r = scenario(row, args.rpm, jobs, args.latency)
        limited = r["nulls"].get("rate_limited", 0) - r["refused_jobs"]  # type: ignore[union-attr,operator]
        q, u60, u120 = (float(r[k]) for k in ("429_share", "use60", "use120"))  # type: ignore[arg-type]
        verdict = "–"
        need = REQUIRED.get(row)
        if need is not None:
            use = u60 if need[0] == 60.0 else u120
            met = (
                limited == 0
                and r["graded"] == r["jobs"] - r["refused_jobs"]  # type: ignore[operator]
                and r["refused_calls"] == 10 * r["refused_jobs"]  # type: ignore[operator]
                and use >= need[1]
                and q <= need[2]
            )
            ok &= met
            verdict = "met" if met else "NOT MET"
        sim = benchmark_row(row, args.rpm, jobs, args.latency)
        sim_use = use_after(list(sim.admitted_at), args.rpm, 60.0)  # measured as the real run is
        same = agree(u60, sim_use) and agree(q, sim.refused_share)
        agreed += same
        print(
            f"{row:<19} {r['jobs']:>5} {r['graded']:>6} {limited:>12} {r['requests']:>8} "
            f"{r['429']:>6} ({100 * q:4.1f}%) {pct(u60):>8} {pct(u120):>8} "
            f"{float(r['wall_s']):>5.0f}s  {verdict:<7}  "  # type: ignore[arg-type]
            f"|            {pct(sim_use):>8} {pct(sim.refused_share):>6} {sim.rate_limited:>3}  "
            f"{'yes' if same else 'NO'}" + (refused_note(r, args.rpm) if r["refused_jobs"] else ""),
            flush=True,
        )
    print(
        "\nrequired: given (sliding, per-second): <= 2% 429s, no rate_limited, >= 90% of N after "
        "the first minute;\n          adaptive (sliding): <= 5% 429s, no rate_limited, >= 85% of N "
        "after the first two minutes\n          (+refused: <= 5% 429s of the limit, no other "
        "rate_limited, 10 calls per job refused for itself)"
    )
    rows = len(args.rows.split(","))
    print(
        "simulated and real agree within 10 points (use of N after the first minute, 429s): "
        f"{agreed} of {rows} rows"
    )
    print("OK" if ok else "NOT MET")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

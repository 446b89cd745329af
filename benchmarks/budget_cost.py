"""What the judge's rate limit costs per job, in one process and in Redis, in the same run.

    python benchmarks/budget_cost.py [--jobs 3000] [--threads 8]

The policy is written once, in Lua (``judgeq/ratelimit/lua``): a worker runs it in Redis
(:class:`RedisBudget`), ``judgeq run`` runs the same scripts in-process (:class:`MemoryBudget`,
fakeredis + lupa). Each job costs the budget what a served call costs it: ``acquire`` (granted:
the limit is set far above the load), ``observe`` (the answer's headers) and ``settle``.

Printed per backend: microseconds of wall time and of CPU per job, with one thread and with
``--threads`` threads sharing the budget, and the in-process budget's ratio to the Redis one
(a private redis-server on loopback; its CPU included). A judge call takes 100 ms and more: the
budget is required to stay under 1 % of that (1 ms per job) in either backend.
"""

from __future__ import annotations

import argparse
import resource
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import redis
from _harness import redis_server, workdir

from judgeq.ratelimit import Budget, Limits, MemoryBudget, Usage
from judgeq.ratelimit.redis import RedisBudget

HEADERS = {
    "anthropic-ratelimit-requests-limit": "4000000",
    "anthropic-ratelimit-requests-remaining": "3999999",
    "anthropic-ratelimit-input-tokens-limit": "400000000",
    "anthropic-ratelimit-output-tokens-limit": "80000000",
}
RESERVED, USED = Usage(800, 300), Usage(640, 120)


def one_job(budget: Budget) -> None:
    grant = budget.acquire(RESERVED.input_tokens, RESERVED.output_tokens)
    if grant.wait > 0:
        raise SystemExit(f"the budget held a call back ({grant.wait:.3f} s): the limit is too low")
    budget.observe(HEADERS)
    budget.settle(RESERVED, USED, ok=True, epoch=grant.epoch)


def cpu_seconds(pid: int | None = None) -> float:
    if pid is None:
        r = resource.getrusage(resource.RUSAGE_SELF)
        return r.ru_utime + r.ru_stime
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / 100  # utime + stime, clock ticks


def measure(budget: Budget, jobs: int, threads: int, server_pid: int | None) -> tuple[float, float]:
    """Microseconds of wall time and of CPU (this process + the redis-server) per job."""
    per_thread = jobs // threads

    def run() -> None:
        for _ in range(per_thread):
            one_job(budget)

    cpu0 = cpu_seconds() + (cpu_seconds(server_pid) if server_pid else 0.0)
    t0 = time.perf_counter()
    pool = [threading.Thread(target=run) for _ in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    wall = time.perf_counter() - t0
    cpu = cpu_seconds() + (cpu_seconds(server_pid) if server_pid else 0.0) - cpu0
    n = per_thread * threads
    return 1e6 * wall / n, 1e6 * cpu / n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--jobs", type=int, default=3000)
    ap.add_argument("--threads", type=int, default=8)
    args = ap.parse_args()

    with workdir("budget-cost") as tmp, redis_server(tmp) as (url, proc, _):
        client = redis.Redis.from_url(url, decode_responses=True)
        makers: dict[str, Callable[[str], Budget]] = {
            "in-process (MemoryBudget)": lambda name: MemoryBudget(name),
            "redis-server (RedisBudget)": lambda name: RedisBudget(client, name),
        }
        rows: dict[str, dict[int, tuple[float, float]]] = {}
        for label, make in makers.items():
            rows[label] = {}
            for threads in (1, args.threads):
                budget = make(f"bench:{threads}")
                budget.configure(Limits(rpm=4_000_000, itpm=400_000_000, otpm=80_000_000))
                for _ in range(50):  # warm up: scripts loaded, buckets made
                    one_job(budget)
                pid = proc.pid if label.startswith("redis") else None
                rows[label][threads] = measure(budget, args.jobs, threads, pid)

    print(f"judge budget cost per job (acquire + observe + settle), {args.jobs} jobs")
    print(f"{'backend':<28} {'threads':>7} {'wall us/job':>12} {'cpu us/job':>11}")
    for label, by_threads in rows.items():
        for threads, (wall, cpu) in by_threads.items():
            print(f"{label:<28} {threads:>7} {wall:>12.0f} {cpu:>11.0f}")
    mem, red = rows["in-process (MemoryBudget)"], rows["redis-server (RedisBudget)"]
    for threads in (1, args.threads):
        print(
            f"in-process / redis, {threads} thread(s): wall {mem[threads][0] / red[threads][0]:.2f}x, "
            f"cpu {mem[threads][1] / red[threads][1]:.2f}x"
        )
    worst = max(wall for by in rows.values() for wall, _ in by.values())
    verdict = "ok" if worst < 1000 else "TOO SLOW"
    print(f"worst wall time per job: {worst:.0f} us (required < 1000 us, 1 % of a 100 ms call): {verdict}")
    if worst >= 1000:
        sys.exit(1)


if __name__ == "__main__":
    main()

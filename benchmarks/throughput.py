"""judgeq against a hand-written asyncio grader, in the same run, on the same judge stand-in.

    python benchmarks/throughput.py --jobs 5000 --latency 0.2 --concurrency 64 [--workers 2]

Both graders do the same work per job, end to end: read the JSONL batch, validate the job,
render the same request (judgeq's ``render``), call the judge through the real anthropic SDK
(the fake Messages API in its own process, with the given latency), parse and score the reply
(judgeq's ``parse_verdict``/``score_verdict`` through ``combine``), aggregate the report and
write its files. The asyncio grader is one process, ``AsyncAnthropic`` and a semaphore of
``--concurrency`` calls in flight; judgeq is the real pipeline (``judgeq submit --wait``, a
redis-server, ``--workers`` worker processes sharing the same total concurrency).

Printed for each: wall time, jobs/s, CPU milliseconds per job (every process of the grader:
the asyncio process; judgeq's producer, workers and redis-server; never the judge stand-in),
and judgeq's ratio to the asyncio grader. judgeq runs twice: with no limit configured (the
stand-in's headers state a very high one) and with ``JUDGEQ_JUDGE_RPM`` set far above the load
(100x the ideal rate): what the rate limiter costs when it never has to hold a call back.
Required (issue 18): the limited run >= 0.95 of the unlimited one, judgeq >= 1.0x asyncio.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

from _harness import (
    API_KEY,
    Worker,
    env_for,
    fake_api,
    fake_stats,
    redis_server,
    workdir,
    write_batch,
)

MODEL = "claude-bench"


def cpu_of(pid: int) -> float:
    """CPU seconds (user + system) of a live process and its reaped children, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = sum(int(x) for x in fields[11:15])  # utime, stime, cutime, cstime
    return ticks / os.sysconf("SC_CLK_TCK")


def tree_cpu(pid: int) -> float:
    """CPU seconds of a process and every live descendant."""
    total = 0.0
    todo = [pid]
    while todo:
        p = todo.pop()
        try:
            total += cpu_of(p)
            children = Path(f"/proc/{p}/task/{p}/children").read_text().split()
        except OSError:
            continue
        todo += [int(c) for c in children]
    return total


async def asyncio_grader(batch: Path, api_url: str, concurrency: int, out: Path) -> dict[str, float]:
    """The hand-written baseline (see the module docstring): jobs/s and CPU seconds. Its
    clock starts before its imports, as judgeq's starts before its CLI starts."""
    usage0 = resource.getrusage(resource.RUSAGE_SELF)
    t0 = time.perf_counter()
    import anthropic

    from judgeq import ResponseJob, load_rubric
    from judgeq.judges.anthropic import AnthropicJudge, messages_kwargs, reply_from_message
    from judgeq.judges.base import CallOutcome
    from judgeq.pipeline.job import Call, CallResult, GradingContext, combine
    from judgeq.report.build import build_report, new_aggregator
    from judgeq.report.files import write_report_files
    from judgeq.rubric.model import read_rubric_text
    from judgeq.runspec import RunSpec, utcnow

    text, source = read_rubric_text("quality")
    spec = RunSpec(
        run_id="asyncio-baseline", rubric_text=text, rubric_source=source, judge_provider="anthropic",
        judge_model=MODEL,
    )  # fmt: skip
    judge = AnthropicJudge(MODEL, api_key=API_KEY, base_url=api_url)  # for its model name only
    ctx = GradingContext(rubric=load_rubric("quality"), judge=judge)
    client = anthropic.AsyncAnthropic(api_key=API_KEY, base_url=api_url, max_retries=0)
    gate = asyncio.Semaphore(concurrency)
    agg = new_aggregator(spec)
    results = []

    async def one(index: int, line: str) -> None:
        job = ResponseJob.model_validate_json(line)
        request = ctx.request_for(job)
        async with gate:
            start = time.monotonic()
            message = await client.messages.create(**messages_kwargs(request, MODEL), timeout=60)
        reply = reply_from_message(message, {})
        outcome = CallOutcome(reply, None, 1, time.monotonic() - start)
        result = combine(ctx, job, index, [CallResult(Call("0", 0, request), outcome)])
        agg.add(result)
        results.append(result)

    with batch.open() as f:
        await asyncio.gather(*(one(i, line) for i, line in enumerate(f)))
    await client.close()
    results.sort(key=lambda r: r.index)
    report = build_report(spec, agg, started_at=utcnow(), finished_at=utcnow(), wall_s=0.0)
    write_report_files(out, report, results, spec=spec)
    wall = time.perf_counter() - t0
    usage1 = resource.getrusage(resource.RUSAGE_SELF)
    cpu = (usage1.ru_utime - usage0.ru_utime) + (usage1.ru_stime - usage0.ru_stime)
    return {"wall": wall, "cpu": cpu, "graded": report["counts"]["graded"]}


def watch_run(url: str, t0: float, timeline: dict[str, float], stop: threading.Event) -> None:
    """When the run registered, stored its first and last result, and got its report."""
    import redis

    client = redis.Redis.from_url(url, decode_responses=True)
    while not stop.is_set():
        now = time.perf_counter() - t0
        spec = next(iter(client.scan_iter("judgeq:run:*:spec")), None)
        if spec is not None:
            timeline.setdefault("registered", now)
            prefix = spec.rsplit(":", 1)[0]
            done = int(float(client.hget(f"{prefix}:counters", "done") or 0))
            total = json.loads(client.get(spec) or "{}").get("total", 0)
            if done:
                timeline.setdefault("first result", now)
            if total and done >= total:
                timeline.setdefault("last result", now)
            if client.exists(f"{prefix}:report"):
                timeline.setdefault("report", now)
                return
        time.sleep(0.02)


def judgeq_pipeline(
    batch: Path,
    tmp: Path,
    api_url: str,
    workers: int,
    concurrency: int,
    env_extra: dict[str, str],
    *,
    worker_env: Callable[[int], dict[str, str]] | None = None,
    before_stop: Callable[[], None] | None = None,
) -> dict[str, float]:
    """``judgeq submit --wait`` with ``workers`` worker processes sharing ``concurrency``;
    ``worker_env(i)``: more environment for worker ``i``; ``before_stop``: called once the run is
    done, its workers still up."""
    with redis_server(tmp) as (redis_url, redis_proc, _):
        env = env_for(redis_url, api_url, **env_extra)
        per = max(1, concurrency // workers)
        procs = [
            Worker({**env, **(worker_env(i) if worker_env else {})}, tmp, f"w{i}", per).start()
            for i in range(workers)
        ]
        try:
            cpu0 = sum(tree_cpu(w.proc.pid) for w in procs if w.proc) + cpu_of(redis_proc.pid)
            children0 = resource.getrusage(resource.RUSAGE_CHILDREN)
            timeline: dict[str, float] = {}
            stop = threading.Event()
            t0 = time.perf_counter()
            if os.environ.get("BENCH_DETAIL"):
                threading.Thread(target=watch_run, args=(redis_url, t0, timeline, stop), daemon=True).start()
            proc = subprocess.run(
                [sys.executable, "-m", "judgeq", "submit", str(batch), "--rubric", "quality", "--judge",
                 f"anthropic:{MODEL}", "--wait", "--out", str(tmp / "out")],
                env=env, capture_output=True, text=True,
            )  # fmt: skip
            wall = time.perf_counter() - t0
            stop.set()
            if proc.returncode != 0:
                sys.exit(f"judgeq submit failed:\n{proc.stderr[-3000:]}")
            children1 = resource.getrusage(resource.RUSAGE_CHILDREN)
            producer = (children1.ru_utime - children0.ru_utime) + (children1.ru_stime - children0.ru_stime)
            cpu1 = sum(tree_cpu(w.proc.pid) for w in procs if w.proc) + cpu_of(redis_proc.pid)
            if os.environ.get("BENCH_DETAIL"):
                workers_cpu = [round(tree_cpu(w.proc.pid), 2) for w in procs if w.proc]
                print(
                    f"cpu s: workers {workers_cpu} redis {cpu_of(redis_proc.pid):.2f} producer {producer:.2f}"
                )
                marks = ", ".join(f"{k} {v:.2f}" for k, v in timeline.items())
                print(f"timeline s: {marks}, producer exit {wall:.2f}")
            if before_stop is not None:
                before_stop()
        finally:
            for w in procs:
                w.stop()
        run_id = proc.stdout.splitlines()[0].strip()
        report = json.loads((tmp / "out" / run_id / "report.json").read_text())
    return {"wall": wall, "cpu": cpu1 - cpu0 + producer, "graded": report["counts"]["graded"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=5000)
    ap.add_argument("--latency", type=float, default=0.2)
    ap.add_argument("--concurrency", type=int, default=64, help="total judge calls in flight (both graders)")
    ap.add_argument("--workers", type=int, default=2, help="judgeq worker processes (sharing --concurrency)")
    ap.add_argument(
        "--env", action="append", default=[], metavar="KEY=VALUE", help="extra environment for judgeq"
    )
    args = ap.parse_args()
    if args.concurrency % args.workers:
        ap.error(f"--concurrency {args.concurrency} must be a multiple of --workers {args.workers}: both "
                 "graders get the same total number of calls in flight")  # fmt: skip
    extra = dict(kv.split("=", 1) for kv in args.env)
    with workdir("judgeq-bench-") as tmp, fake_api(args.latency) as api:
        batch = write_batch(tmp / "batch.jsonl", args.jobs)
        base = asyncio.run(asyncio_grader(batch, api, args.concurrency, tmp / "baseline"))
        calls_base = fake_stats(api)["request_count"]
        (tmp / "jq").mkdir()
        ours = judgeq_pipeline(batch, tmp / "jq", api, args.workers, args.concurrency, extra)
        calls_ours = fake_stats(api)["request_count"] - calls_base  # the preflight: Models API, not here
        (tmp / "jq-limited").mkdir()
        far_above = int(100 * 60 * args.concurrency / args.latency)
        limited = judgeq_pipeline(
            batch, tmp / "jq-limited", api, args.workers, args.concurrency,
            {**extra, "JUDGEQ_JUDGE_RPM": str(far_above)},
        )  # fmt: skip
        calls_limited = fake_stats(api)["request_count"] - calls_base - calls_ours
    n = args.jobs
    print(
        f"jobs {n}, judge latency {args.latency * 1000:.0f} ms, {args.concurrency} calls in flight in total"
    )
    print(f"{'':24} {'wall s':>8} {'jobs/s':>8} {'CPU ms/job':>11} {'graded':>7} {'calls':>6}")
    for name, r, calls in (
        ("asyncio grader", base, calls_base),
        (f"judgeq ({args.workers} workers)", ours, calls_ours),
        (f"judgeq, {far_above:,} rpm", limited, calls_limited),
    ):
        rate, cpu_ms = n / r["wall"], 1000 * r["cpu"] / n
        print(f"{name:24} {r['wall']:8.1f} {rate:8.1f} {cpu_ms:11.2f} {int(r['graded']):7} {calls:6}")
    ratio = base["wall"] / ours["wall"]
    cost = ours["wall"] / limited["wall"]
    ideal = args.concurrency / args.latency
    print(f"judgeq / asyncio throughput ratio: {ratio:.2f} (required >= 1.0); ideal {ideal:.0f} jobs/s")
    print(f"judgeq with a limit far above the load / without: {cost:.2f} (required >= 0.95)")
    if base["graded"] != n or ours["graded"] != n or limited["graded"] != n:
        sys.exit(f"not every job graded (asyncio {base['graded']}, judgeq {ours['graded']}, limited "
                 f"{limited['graded']} of {n}): the figures compare unlike runs")  # fmt: skip
    if ratio < 1.0 or cost < 0.95:
        sys.exit("NOT MET")


if __name__ == "__main__":
    main()

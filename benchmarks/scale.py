"""A large batch through the whole pipeline: enqueue rate, flat memory, the reducer.

    python benchmarks/scale.py --jobs 1000000 [--workers 2] [--judge standin|lexical]

Everything real: a private redis-server, ``judgeq submit``, ``judgeq worker`` processes,
``judgeq wait``. The judge answers at once: ``standin`` (the default: the fake Messages API at
zero latency, in this process, through the anthropic SDK) or ``lexical`` (the offline judge,
in the worker: only judgeq's own cost per job, no SDK or HTTP). Phases, each with a baseline
measured in the same run:

1. enqueue — ``judgeq submit`` alone (no worker yet, the queue bound lifted): jobs/s from the
   JSONL file and the producer's peak RSS. Baseline: reading and ``json.loads``-ing the file.
2. pipeline — a fresh Redis, the workers up, ``judgeq submit`` with the default queue bound:
   jobs/s from the submit to the report, Redis's ``used_memory_peak`` (INFO) and what stays
   per stored result once the run is done.
3. reducer — the reduce again (it is idempotent), alone in a process of its own: seconds and
   peak RSS. Baseline: reading the same results from Redis without aggregating them.
4. files — ``judgeq wait`` writing report.json/md/html and verdicts.jsonl: seconds, peak RSS.
5. storage — results with real judges' reasoning (``../shared/data/external``: the first two
   sentences, and whole) stored as judgeq stores them, against the plain JSON hash judgeq
   used before: bytes per stored result in Redis; and a reply-cache entry holding the same
   reasoning (what a run with the cache on adds per job until the cache's TTL).

Targets (issue 13) are printed beside the figures; the reducer's is 60 s per million results.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from _harness import Worker, env_for, fake_api, redis_server, workdir, write_batch

EXTERNAL = Path(__file__).resolve().parent.parent.parent / "shared" / "data" / "external" / "judge-outputs"
MB = 1024 * 1024


def run_measured(
    cmd: list[str], env: dict[str, str]
) -> tuple[float, float, subprocess.CompletedProcess[str]]:
    """Run ``cmd``; (seconds, peak RSS in MB from wait4, the completed process)."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out_chunks: list[str] = []
    err_chunks: list[str] = []
    readers = [
        threading.Thread(target=lambda: out_chunks.append(proc.stdout.read()), daemon=True),  # type: ignore[union-attr]
        threading.Thread(target=lambda: err_chunks.append(proc.stderr.read()), daemon=True),  # type: ignore[union-attr]
    ]
    for r in readers:
        r.start()
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - t0
    for r in readers:
        r.join()
    proc.returncode = os.waitstatus_to_exitcode(status)
    done = subprocess.CompletedProcess(cmd, proc.returncode, "".join(out_chunks), "".join(err_chunks))
    if done.returncode != 0:
        sys.exit(f"{' '.join(cmd[:4])} failed:\n{done.stderr[-3000:]}")
    return seconds, usage.ru_maxrss / 1024, done


def judgeq(*args: str) -> list[str]:
    return [sys.executable, "-m", "judgeq", *args]


def parse_baseline(batch: Path) -> float:
    """Seconds to read the batch and json.loads every line (the floor of any JSONL reader)."""
    t0 = time.perf_counter()
    with batch.open("rb") as f:
        for line in f:
            json.loads(line)
    return time.perf_counter() - t0


def redis_memory(url: str) -> tuple[int, int]:
    """Redis's used_memory now and its peak since it started (INFO memory)."""
    import redis

    info = redis.Redis.from_url(url).info("memory")
    return int(info["used_memory"]), int(info["used_memory_peak"])


REDUCE = """
import sys, time
from judgeq.pipeline.stages import reduce_run
from judgeq.store.redis import RedisStore
from judgeq.redis_connect import connect
store = RedisStore(connect(sys.argv[1]))
t0 = time.perf_counter()
report = reduce_run(store, sys.argv[2])
print(time.perf_counter() - t0, report["counts"]["graded"], report["counts"]["total"])
"""

READ_ONLY = """
import sys, time
from judgeq.store.redis import RedisStore
from judgeq.redis_connect import connect
store = RedisStore(connect(sys.argv[1]))
spec = store.spec(sys.argv[2])
t0 = time.perf_counter()
n = sum(1 for r in store.results(sys.argv[2], spec.total) if r is not None)
print(time.perf_counter() - t0, n)
"""


def reasoning_texts(kind: str) -> list[str]:
    """Real judges' explanations (MT-bench single-answer grading by GPT-4): whole, or their
    first two sentences; the fake judge's sentences when the shared data is absent."""
    path = EXTERNAL / "mtbench_single.jsonl"
    if not path.is_file():
        return ["The response answers the question directly and is mostly accurate, with minor omissions."]
    texts = [json.loads(line)["raw_text"] for line in path.open(encoding="utf-8")]
    if kind == "brief":
        texts = [" ".join(re.split(r"(?<=[.!?])\s+", t.strip())[:2]) for t in texts]
    return texts


def cache_entry(i: int, texts: list[str]) -> tuple[str, Any]:
    """A reply-cache entry as a worker writes it: a judge reply holding one of ``texts``."""
    from judgeq.judges.base import JudgeReply

    reply = JudgeReply(
        text=json.dumps({"reasoning": texts[i % len(texts)], "score": 3 + i % 7}),
        stop_reason="end_turn",
        input_tokens=800 + i % 300,
        output_tokens=120 + i % 90,
        model="claude-sonnet-4-5-20250929",
        paid_by=f"r-20261125-{i % 97}:{i}",
    )
    return f"{(i * 0x9E3779B97F4A7C15) % 2**256:064x}", reply


def storage_phase(tmp: Path, n: int) -> list[tuple[str, float, float, float, float]]:
    """(reasoning, mean characters, bytes per result packed, bytes per result as plain JSON,
    bytes per reply-cache entry)."""
    import redis

    from judgeq.grading.result import Result
    from judgeq.rubric.model import read_rubric_text
    from judgeq.runspec import RunSpec
    from judgeq.store.redis import RedisStore
    from judgeq.store.redis_cache import RedisCache

    text, source = read_rubric_text("quality")
    dims = ["accuracy", "relevance", "completeness", "conciseness", "clarity"]
    rows = []
    for kind in ("brief", "whole"):
        texts = reasoning_texts(kind)
        (tmp / kind).mkdir()
        with redis_server(tmp / kind) as (url, _, _):
            client = redis.Redis.from_url(url, decode_responses=True)
            store = RedisStore(client)
            spec = RunSpec(
                run_id="storage", rubric_text=text, rubric_source=source, judge_provider="anthropic",
                judge_model="claude-sonnet-4-5", total=n,
            )  # fmt: skip
            store.register(spec)

            def result(i: int, texts: list[str] = texts) -> Result:
                score = float(3 + i % 7)
                return Result(
                    job_id=f"b{i:07d}", index=i, status="graded", scores=dict.fromkeys(dims, score),
                    overall=score, passed=score >= 7, notes=texts[i % len(texts)], holistic=score,
                    grading_latency_ms=round(180 + (i * 7919) % 400 / 10, 1), attempts=1,
                    input_tokens=800 + i % 300, output_tokens=120 + i % 90, rubric_name="quality",
                    rubric_version="1.0.0", judge_model="claude-sonnet-4-5", model=f"sys-{i % 3}",
                    input_key=f"{(i * 2654435761) % 2**64:016x}",
                )  # fmt: skip

            def used(client: redis.Redis = client) -> int:
                return int(client.info("memory")["used_memory"])

            # per result at steady state: what the second half of the results adds (the first
            # half pays for the script, the keys and the first allocations)
            half = n // 2
            before = 0
            for start in range(0, n, 1000):
                if start == half:
                    before = used()
                store.store_results("storage", [result(i) for i in range(start, min(start + 1000, n))])
            packed = (used() - before) / (n - half)
            for start in range(0, n, 1000):  # judgeq's earlier form: index -> Result JSON in one hash
                if start == half:
                    before = used()
                part = range(start, min(start + 1000, n))
                client.hset("plain", mapping={str(i): result(i).model_dump_json() for i in part})
            plain = (used() - before) / (n - half)
            cache = RedisCache(client, 86400)
            for start in range(0, n, 1000):  # the same reasoning as cached judge replies
                if start == half:
                    before = used()
                cache.put_many([cache_entry(i, texts) for i in range(start, min(start + 1000, n))])
            cached = (used() - before) / (n - half)
        mean_chars = sum(len(texts[i % len(texts)]) for i in range(n)) / n
        rows.append((kind, mean_chars, packed, plain, cached))
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=20000)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--concurrency", type=int, default=32, help="judge calls at once per worker")
    ap.add_argument("--judge", choices=["standin", "lexical"], default="standin")
    ap.add_argument(
        "--storage-results", type=int, default=100_000, help="results per storage test (rounded to 2000)"
    )
    args = ap.parse_args()
    n = args.jobs
    judge = "lexical" if args.judge == "lexical" else "anthropic:claude-bench"
    figures: dict[str, Any] = {"jobs": n, "judge": args.judge, "workers": args.workers}

    with workdir("judgeq-scale-") as tmp, fake_api(0.0) as api:
        t0 = time.perf_counter()
        batch = write_batch(tmp / "batch.jsonl", n)
        took = time.perf_counter() - t0
        print(f"batch: {n:,} jobs, {batch.stat().st_size / MB:.0f} MB (written in {took:.1f} s)")
        base_parse = parse_baseline(batch)

        # 1. enqueue, alone
        (tmp / "enqueue").mkdir()
        with redis_server(tmp / "enqueue") as (url, _, _):
            env = env_for(url, api, JUDGEQ_MAX_QUEUE_DEPTH=str(n + 1))
            seconds, rss, done = run_measured(
                judgeq("submit", str(batch), "--rubric", "quality", "--judge", judge, "--no-cache"), env
            )
        figures.update(enqueue_s=seconds, enqueue_rate=n / seconds, producer_rss_mb=rss, parse_s=base_parse)
        print(
            f"1. enqueue: {n / seconds:,.0f} jobs/s ({seconds:.1f} s; reading + json.loads alone: "
            f"{n / base_parse:,.0f} lines/s, ratio {base_parse / seconds:.2f}); "
            f"producer peak RSS {rss:.0f} MB"
        )

        # 2. the whole pipeline, workers up, default queue bound
        (tmp / "pipeline").mkdir()
        with redis_server(tmp / "pipeline") as (url, _, _):
            env = env_for(url, api)
            workers = [
                Worker(env, tmp / "pipeline", f"w{i}", args.concurrency).start() for i in range(args.workers)
            ]
            try:
                empty, _ = redis_memory(url)
                seconds, rss, done = run_measured(
                    judgeq(
                        "submit", str(batch), "--rubric", "quality", "--judge", judge, "--no-cache",
                        "--wait", "--out", str(tmp / "out"),
                    ),
                    env,
                )  # fmt: skip
                run_id = done.stdout.split()[0]
                after, peak = redis_memory(url)
                report = json.loads((tmp / "out" / run_id / "report.json").read_text())
                graded, total = report["counts"]["graded"], report["counts"]["total"]
                if total != n:
                    sys.exit(f"the report counts {total} jobs, not {n}")
                stored = (after - empty) / n
                figures.update(
                    pipeline_s=seconds, pipeline_rate=n / seconds, peak_redis_mb=peak / MB,
                    peak_per_job=(peak - empty) / n, stored_per_result=stored, graded=graded,
                    submit_wait_rss_mb=rss,
                )  # fmt: skip
                print(
                    f"2. pipeline: {n / seconds:,.0f} jobs/s end to end "
                    f"({seconds:.1f} s, {graded:,} graded); "
                    f"Redis peak {peak / MB:.0f} MB ({(peak - empty) / n:.0f} B/job), after the run "
                    f"{stored:.0f} B per stored result; 'submit --wait' peak RSS {rss:.0f} MB"
                )

                # 3. the reducer alone, and its baseline
                seconds, rss, done = run_measured([sys.executable, "-c", REDUCE, url, run_id], env)
                reduce_s = float(done.stdout.split()[0])
                _, _, base = run_measured([sys.executable, "-c", READ_ONLY, url, run_id], env)
                read_s = float(base.stdout.split()[0])
                figures.update(reduce_s=reduce_s, reducer_rss_mb=rss, read_results_s=read_s)
                print(
                    f"3. reducer: {reduce_s:.1f} s for {n:,} results "
                    f"({reduce_s * 1e6 / n:.0f} s per million; reading them alone {read_s:.1f} s, "
                    f"ratio {reduce_s / read_s:.2f}); peak RSS {rss:.0f} MB"
                )

                # 4. the files
                seconds, rss, _ = run_measured(judgeq("wait", run_id, "--out", str(tmp / "files")), env)
                figures.update(files_s=seconds, files_rss_mb=rss)
                print(
                    f"4. files: 'judgeq wait' wrote the report and verdicts in {seconds:.1f} s; "
                    f"peak RSS {rss:.0f} MB"
                )
            finally:
                for w in workers:
                    w.stop()

        # 5. stored size with real reasoning
        k = max(2000, args.storage_results // 2000 * 2000)
        rows = storage_phase(tmp, k)
        figures["storage"] = rows
        for kind, chars, packed, plain, cached in rows:
            print(
                f"5. storage ({kind} reasoning, {chars:.0f} characters on average, {k:,} results): "
                f"{packed:.0f} B per result (plain JSON hash: {plain:.0f} B, ratio {packed / plain:.2f}); "
                f"a reply-cache entry {cached:.0f} B"
            )

    per_million = figures["reduce_s"] * 1e6 / n
    brief, whole = rows[0][2], rows[1][2]
    checks = [
        ("enqueue >= 10,000 jobs/s", figures["enqueue_rate"] >= 10_000),
        ("producer peak RSS < 200 MB", figures["producer_rss_mb"] < 200),
        (f"<= 400 B per stored result ({rows[0][1]:.0f}-character reasoning)", brief <= 400),
        (f"<= 400 B per stored result ({rows[1][1]:.0f}-character reasoning)", whole <= 400),
        ("reducer <= 60 s per million results", per_million <= 60),
        ("reducer peak RSS <= 300 MB", figures["reducer_rss_mb"] <= 300),
    ]
    print("targets: " + "; ".join(f"{name}: {'yes' if ok else 'NO'}" for name, ok in checks))
    if os.environ.get("SCALE_JSON"):
        Path(os.environ["SCALE_JSON"]).write_text(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()

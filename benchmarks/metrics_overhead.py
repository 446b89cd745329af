"""What worker metrics and JSON logs cost, in the same run (issue 22.6), and how many series a
run makes.

    python benchmarks/metrics_overhead.py --jobs 4000 --latency 0.1 --concurrency 64 --pairs 3

The real pipeline of benchmarks/throughput.py (``judgeq submit --wait``, a redis-server, two
worker processes, the anthropic SDK against the stand-in judge in its own process), run in
rounds of three, so the machine's drift hits each alike: ``off`` (neither), ``metrics``
(``JUDGEQ_METRICS_PORT`` on each worker), ``metrics+json`` (and ``JUDGEQ_LOG_FORMAT=json``: a
log line per judge call and per stored job). Printed: each run's jobs/s and CPU ms per job;
the median ratio to ``off`` of throughput (metrics: required >= 0.97) and of CPU; the series
each worker exposes after the run, by family, and what that makes for a cluster (series do not
grow with the jobs of a run: they are per judge and per worker, and per active run in the
exporter).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import urllib.request

from _harness import fake_api, free_port, workdir, write_batch
from throughput import judgeq_pipeline


def series(port: int) -> dict[str, int]:
    """Series of a worker's /metrics, by family (samples of the exposition, comments left out)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        text = r.read().decode()
    out: dict[str, int] = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name = line.split("{", 1)[0].split(" ", 1)[0]
            for suffix in ("_bucket", "_count", "_sum", "_total", "_created"):
                if name.endswith(suffix):
                    name = name[: -len(suffix)]
                    break
            out[name] = out.get(name, 0) + 1
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=4000)
    ap.add_argument("--latency", type=float, default=0.1)
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    modes = ("off", "metrics", "metrics+json")
    runs: dict[str, list[dict[str, float]]] = {mode: [] for mode in modes}
    exposed: list[dict[str, int]] = []
    with workdir("judgeq-metrics-") as tmp, fake_api(args.latency) as api:
        batch = write_batch(tmp / "batch.jsonl", args.jobs)
        for i in range(args.rounds):
            for mode in modes:
                folder = tmp / f"{mode}{i}"
                folder.mkdir()
                ports = [free_port() for _ in range(args.workers)]
                extra = {"JUDGEQ_LOG_FORMAT": "json"} if mode == "metrics+json" else {}

                def scrape(ports: list[int] = ports, mode: str = mode) -> None:
                    if mode != "off":
                        exposed.extend(series(p) for p in ports)

                r = judgeq_pipeline(
                    batch, folder, api, args.workers, args.concurrency, extra,
                    worker_env=(lambda w, ports=ports: {"JUDGEQ_METRICS_PORT": str(ports[w])})
                    if mode != "off" else None,
                    before_stop=scrape,
                )  # fmt: skip
                if r["graded"] != args.jobs:
                    sys.exit(
                        f"{mode}: {int(r['graded'])} of {args.jobs} graded: the runs compare unlike work"
                    )
                runs[mode].append(r)
                print(f"{mode:>12} run {i + 1}: {args.jobs / r['wall']:7.1f} jobs/s, "
                      f"{1000 * r['cpu'] / args.jobs:6.2f} CPU ms/job")  # fmt: skip
    ratios = {}
    for mode in modes[1:]:
        pairs = list(zip(runs["off"], runs[mode], strict=True))
        rate = statistics.median(off["wall"] / on["wall"] for off, on in pairs)
        cpu = statistics.median(on["cpu"] / off["cpu"] for off, on in pairs)
        ratios[mode] = rate
        print(f"{mode} / off: throughput {rate:.3f}, CPU {cpu:.3f} (medians of {args.rounds} rounds)")
    print("required: metrics / off throughput >= 0.97")
    per_worker = max(sum(x.values()) for x in exposed)
    families = max(exposed, key=lambda x: sum(x.values()))
    print(f"series a worker exposes after a run of {args.jobs:,} jobs (one judge): {per_worker}")
    print("  by family: " + ", ".join(f"{k} {v}" for k, v in sorted(families.items())))
    print(
        "a 1,000,000-job run with one judge and 20 workers: about "
        f"{20 * per_worker + 60:,} series (20 x {per_worker} per worker, the exporter's ~60: a run's "
        "dozen, its null reasons, the budget's, the queue's); none grows with the jobs"
    )
    if ratios["metrics"] < 0.97:
        sys.exit("NOT MET")


if __name__ == "__main__":
    main()

"""A request the server refuses for itself is that job's problem (issue 18, point 2).

A server that sends no rate-limit headers and has no limit, 20 ms a call; some jobs are
answered 429 (``retry-after: 0``) on every attempt. Each case runs twice in one invocation, on
a fresh Redis and stand-in: without the faulty jobs (the baseline) and with them. Printed: the
wall time of both, their ratio, and the refused calls of each faulty job.

* ``distributed`` -- ``judgeq submit --wait``, 120 jobs (10 refused), 2 workers x 8 threads;
* ``embedded``    -- ``judgeq run``, the same batch, 16 threads;
* ``retrieval``   -- ``judgeq submit --wait``, 30 questions (3 refused), then the same batch
  again with the reply cache warm (only the refused questions call the judge).

Required: each faulty job ends ``rate_limited`` after at most 10 refused calls, every other job
is graded, and each run with the faulty jobs takes at most 2x its baseline.

    python benchmarks/refused.py [--cases distributed,embedded,retrieval]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from _harness import Worker, env_for, fake_api, fake_stats, judgeq_cmd, redis_server, workdir

from judgeq.testing.faults import response_rows

REFUSED = "429,retry_after=0"
EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "retrieval.jsonl"


def write(path: Path, rows: list[dict[str, object]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def question_rows(n: int, bad: set[int]) -> list[dict[str, object]]:
    base = [json.loads(line) for line in EXAMPLES.read_text().splitlines() if line.strip()]
    rows = []
    for i in range(n):
        row = dict(base[i % len(base)])
        row["id"] = f"q{i:03d}"
        row["question"] = f"{row['question']} (#{i})" + (f" [[fake:{REFUSED}]]" if i in bad else "")
        rows.append(row)
    return rows


def refused_calls(api_url: str) -> int:
    return int(fake_stats(api_url).get("injected_429", 0))


def timed(*args: str, env: dict[str, str], api_url: str) -> tuple[float, dict[str, object], int]:
    """Run the judgeq CLI; (wall seconds, the report, the calls refused meanwhile)."""
    out = Path(args[args.index("--out") + 1])
    before = refused_calls(api_url)
    start = time.monotonic()
    judgeq_cmd(*args, env=env)
    wall = time.monotonic() - start
    return wall, json.loads(next(out.glob("*/report.json")).read_text()), refused_calls(api_url) - before


def one(case: str, with_bad: bool, tmp: Path) -> dict[str, object]:
    judge = ["--judge", "anthropic:claude-bench"]
    with redis_server(tmp) as (redis_url, _, _), fake_api(0.02, headers=False) as api_url:
        env = env_for(redis_url, api_url, JUDGEQ_CACHE_DIR=str(tmp / "cache"))
        if case == "embedded":
            bad = set(range(0, 120, 12)) if with_bad else set()
            batch = write(tmp / "b.jsonl", response_rows(120, dict.fromkeys(bad, REFUSED)))
            wall, report, refused = timed(
                "run",
                str(batch),
                "--rubric",
                "quality",
                *judge,
                "--out",
                str(tmp / "o"),
                env=env,
                api_url=api_url,
            )
            walls, refusals = [wall], [refused]
        else:
            workers = [Worker(env, tmp, f"w{i}", concurrency=8).start() for i in range(2)]
            try:
                if case == "distributed":
                    bad = set(range(0, 120, 12)) if with_bad else set()
                    batch = write(tmp / "b.jsonl", response_rows(120, dict.fromkeys(bad, REFUSED)))
                    rubric = "quality"
                else:
                    bad = {0, 10, 20} if with_bad else set()
                    batch = write(tmp / "b.jsonl", question_rows(30, bad))
                    rubric = "retrieval-relevance"
                walls, refusals = [], []
                for i in range(2 if case == "retrieval" else 1):  # the second: a warm reply cache
                    out = tmp / f"o{i}"
                    wall, report, refused = timed(
                        "submit", str(batch), "--rubric", rubric, *judge, "--wait", "--out", str(out),
                        env=env, api_url=api_url,
                    )  # fmt: skip
                    walls.append(wall)
                    refusals.append(refused)
            finally:
                for w in workers:
                    w.stop()
    counts = report["counts"]
    return {
        "walls": walls,
        "graded": counts["graded"],  # type: ignore[index]
        "total": counts["total"],  # type: ignore[index]
        "nulls": counts["null_by_reason"],  # type: ignore[index]
        "bad": len(bad),
        "refused_calls": refusals,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", default="distributed,embedded,retrieval")
    args = ap.parse_args()
    print("no rate-limit headers, no limit, 20 ms judge; faulty jobs answered 429 (retry-after 0) every time")
    print(f"{'case':<22} {'baseline':>9} {'with faulty':>11} {'ratio':>6}  graded  nulls; refused calls")
    ok = True
    for case in args.cases.split(","):
        with workdir("judgeq-refused-") as a, workdir("judgeq-refused-") as b:
            base, faulty = one(case, False, a), one(case, True, b)
        for i, (w0, w1) in enumerate(zip(base["walls"], faulty["walls"], strict=True)):  # type: ignore[call-overload]
            name = case + (" (cache warm)" if i else "")
            ratio = w1 / w0
            per_job = faulty["refused_calls"][i] / max(1, int(faulty["bad"]))  # type: ignore[index,call-overload]
            met = (
                ratio <= 2.0
                and faulty["nulls"] == ({"rate_limited": faulty["bad"]} if faulty["bad"] else {})
                and faulty["graded"] == int(faulty["total"]) - int(faulty["bad"])  # type: ignore[call-overload]
                and per_job <= 10
            )
            ok &= met
            print(
                f"{name:<22} {w0:>8.1f}s {w1:>10.1f}s {ratio:>6.2f}  {faulty['graded']}/{faulty['total']}"
                f"  {faulty['nulls']}; {per_job:.0f} per faulty job{'' if met else '  NOT MET'}",
                flush=True,
            )
    print("\nrequired: <= 2x the baseline, each faulty job rate_limited after <= 10 refused calls")
    print("OK" if ok else "NOT MET")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

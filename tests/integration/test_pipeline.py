"""The distributed pipeline end to end: real redis-server, real `judgeq worker` processes,
the real anthropic SDK against the fake Messages API, the real CLI."""

from __future__ import annotations

import json
import re
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest
import redis

from judgeq.store.redis import RedisStore
from judgeq.testing.fake_anthropic import FakeMessagesAPI

from .harness import (
    API_KEY,
    SUBMIT,
    RedisServer,
    Worker,
    judgeq_cli,
    response_rows,
    strip_volatile,
    write_batch,
)

pytestmark = pytest.mark.integration


def grading_calls(fake: FakeMessagesAPI) -> int:
    """Judge calls that graded a job (every Messages call asks for a verdict's output_config)."""
    return sum(1 for body in fake.requests if isinstance(body, dict) and "output_config" in body)


def judged_jobs(fake: FakeMessagesAPI) -> Counter[int]:
    """Judge calls per job index (its output reads "Answer number I."); a job retried after a
    timeout is called more than once, and its result still counts once."""
    found: Counter[int] = Counter()
    for body in fake.requests:
        if isinstance(body, dict) and "output_config" in body:
            m = re.search(r"Answer number (\d+)\.", json.dumps(body["messages"]))
            assert m, body["messages"]
            found[int(m.group(1))] += 1
    return found


def submit(batch: Path, env: dict[str, str], out: Path, *extra: str) -> tuple[str, dict]:
    proc = judgeq_cli(
        "submit",
        str(batch),
        *SUBMIT,
        "--wait",
        "--out",
        str(out),
        *extra,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    run_id = proc.stdout.splitlines()[0].strip()
    report = json.loads((out / run_id / "report.json").read_text())
    return run_id, report


def test_500_jobs_across_two_workers(
    tmp_path: Path, env: dict[str, str], fake_api: FakeMessagesAPI, start_worker: Callable[..., Worker]
) -> None:
    fake_api.latency = 0.01
    start_worker("w1")
    start_worker("w2")
    batch = write_batch(tmp_path / "b.jsonl", response_rows(500))
    run_id, report = submit(batch, env, tmp_path / "out")
    counts = report["counts"]
    assert counts == {"total": 500, "graded": 500, "null": 0, "null_by_reason": {}, "rejected": 0}
    assert report["overall"]["n"] == 500 and set(report["by_model"]) == {"sys-a", "sys-b"}
    assert report["by_model"]["sys-a"]["counts"]["total"] == 250
    verdicts = [
        json.loads(x) for x in (tmp_path / "out" / run_id / "verdicts.jsonl").read_text().splitlines()
    ]
    assert [v["job_id"] for v in verdicts] == [f"j{i:05d}" for i in range(500)]
    assert set(judged_jobs(fake_api)) == set(range(500))  # every job judged; each counted once above
    # both workers took part
    logs = [p.read_text() for p in tmp_path.glob("w*.log")]
    assert all("judgeq.grade" in log and "succeeded" in log for log in logs)
    # the same batch graded in-process gives the same report (apart from timings and ids)
    embedded = judgeq_cli(
        "run",
        str(batch),
        *SUBMIT,
        "--out",
        str(tmp_path / "emb"),
        env=env,
    )
    assert embedded.returncode == 0, embedded.stderr[-2000:]
    (emb_dir,) = (tmp_path / "emb").iterdir()
    emb = json.loads((emb_dir / "report.json").read_text())
    assert strip_volatile(emb) == strip_volatile(report)


FAULTS = {
    0: "429",
    1: "529",
    2: "500",
    3: "slow",
    4: "garbage",
    5: "refusal",
    6: "401",
    7: "400",
    8: "truncated",
    9: "429*2",
    10: "529*1",
    11: "500*2",
    12: "score=15",
    13: "slow*1",
}
EXPECTED_NULLS = {
    "rate_limited": 1,
    "overloaded": 1,
    "api_error": 1,
    "timeout": 1,
    "parse_error": 2,
    "refusal": 1,
    "auth_error": 1,
    "invalid_request": 1,
}


def test_every_fault_kind_lands_as_the_right_null(
    tmp_path: Path, env: dict[str, str], fake_api: FakeMessagesAPI, start_worker: Callable[..., Worker]
) -> None:
    env = {**env, "JUDGEQ_JUDGE_DEADLINE": "3.5"}
    start_worker("w1", env={"JUDGEQ_JUDGE_DEADLINE": "3.5"}, concurrency=16)
    batch = write_batch(tmp_path / "b.jsonl", response_rows(20, directive=FAULTS))
    run_id, report = submit(batch, env, tmp_path / "out")
    assert report["counts"]["null_by_reason"] == EXPECTED_NULLS
    assert report["counts"]["graded"] == 20 - sum(EXPECTED_NULLS.values())
    verdicts = {
        v["job_id"]: v for v in map(json.loads, (tmp_path / "out" / run_id / "verdicts.jsonl").open())
    }
    # at least the injected failures plus the answer (a timeout on a slow machine adds one)
    assert verdicts["j00009"]["status"] == "graded" and verdicts["j00009"]["attempts"] >= 3
    assert verdicts["j00011"]["attempts"] >= 3 and verdicts["j00013"]["attempts"] >= 2
    assert "clamped" in verdicts["j00012"]["flags"] and verdicts["j00012"]["overall"] == 10.0
    assert verdicts["j00004"]["raw"].startswith("I think this is pretty good")
    assert verdicts["j00000"]["attempts"] > 1  # retried until the deadline
    assert verdicts["j00006"]["attempts"] == 1  # auth errors are not retried
    for v in verdicts.values():
        # the deadline bounds every job: at most deadline + one attempt's timeout, + 5 s of slack
        assert v["grading_latency_ms"] < (3.5 + float(env["JUDGEQ_JUDGE_TIMEOUT"]) + 5) * 1000


def test_resubmission_grades_nothing_twice(
    tmp_path: Path, env: dict[str, str], fake_api: FakeMessagesAPI, start_worker: Callable[..., Worker]
) -> None:
    start_worker("w1")
    batch = write_batch(tmp_path / "b.jsonl", response_rows(60))
    _, first = submit(batch, env, tmp_path / "o1", "--run-id", "rerun-1")
    assert set(judged_jobs(fake_api)) == set(range(60))
    assert first["counts"]["total"] == first["counts"]["graded"] == 60
    calls = grading_calls(fake_api)
    proc = judgeq_cli(
        "submit",
        str(batch),
        *SUBMIT,
        "--run-id",
        "rerun-1",
        "--wait",
        "--out",
        str(tmp_path / "o2"),
        env=env,
    )
    assert proc.returncode == 0, proc.stderr
    assert "60 job(s) already graded in run rerun-1: skipped" in proc.stderr
    assert grading_calls(fake_api) == calls  # the second submit called the judge for nothing
    second = json.loads((tmp_path / "o2" / "rerun-1" / "report.json").read_text())
    assert strip_volatile(second) == strip_volatile(first)
    # a different batch under the same run id is refused, with nothing enqueued
    other = write_batch(tmp_path / "c.jsonl", response_rows(61))
    proc = judgeq_cli(
        "submit",
        str(other),
        *SUBMIT,
        "--run-id",
        "rerun-1",
        env=env,
    )
    assert proc.returncode == 2 and "already exists with total 60 (now 61)" in proc.stderr
    # one line: no "enqueuing 61 jobs" before it (issue 29)
    assert proc.stderr.strip().splitlines() == [proc.stderr.strip()] and "enqueuing" not in proc.stderr
    # the same size but other content is refused too
    rows = response_rows(60)
    rows[5]["output"] = "edited"
    edited = write_batch(tmp_path / "d.jsonl", rows)
    proc = judgeq_cli(
        "submit",
        str(edited),
        *SUBMIT,
        "--run-id",
        "rerun-1",
        env=env,
    )
    assert proc.returncode == 2 and "batch_fingerprint" in proc.stderr


def test_pickled_message_is_refused(
    tmp_path: Path, env: dict[str, str], redis_server: RedisServer, start_worker: Callable[..., Worker]
) -> None:
    import os

    from celery import Celery

    w = start_worker("w1")
    app = Celery(broker=env["JUDGEQ_REDIS_URL"])
    app.conf.accept_content = ["json", "pickle"]
    marker = tmp_path / "pwned"

    class Evil:
        def __reduce__(self) -> tuple:
            return (os.system, (f"touch {marker}",))

    app.send_task("judgeq.grade", args=[Evil(), [0], ["x"]], serializer="pickle", queue="judgeq")
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and "untrusted content" not in w.log.read_text():
        time.sleep(0.1)
    assert "Refusing to deserialize untrusted content of type pickle" in w.log.read_text()
    assert not marker.exists()


def test_invalid_batch_enqueues_nothing(
    tmp_path: Path, env: dict[str, str], redis_server: RedisServer
) -> None:
    rows = response_rows(5)
    batch = tmp_path / "bad.jsonl"
    batch.write_text("\n".join(json.dumps(r) for r in rows) + "\n{not json}\n")
    proc = judgeq_cli("submit", str(batch), "--rubric", "quality", env=env)
    assert proc.returncode == 2
    assert f"{batch}:6: line: invalid JSON" in proc.stderr and "Traceback" not in proc.stderr
    assert redis_server.client().dbsize() == 0


def test_api_key_never_reaches_redis_logs_or_reports(
    tmp_path: Path, env: dict[str, str], redis_server: RedisServer, start_worker: Callable[..., Worker]
) -> None:
    w = start_worker("w1", loglevel="DEBUG")
    batch = write_batch(tmp_path / "b.jsonl", response_rows(10, directive={3: "401", 4: "garbage"}))
    run_id, _ = submit(batch, env, tmp_path / "out")
    client = redis.Redis.from_url(redis_server.url)  # bytes: results are stored packed
    secret = API_KEY.encode()
    for key in client.scan_iter("*"):
        assert secret not in key
        kind = client.type(key).decode()
        dump = {
            "string": lambda k: [client.get(k) or b""],
            "hash": lambda k: [b for kv in client.hgetall(k).items() for b in kv],
            "list": lambda k: client.lrange(k, 0, -1),
            "zset": lambda k: client.zrange(k, 0, -1),
            "set": lambda k: list(client.smembers(k)),
        }[kind](key)
        assert not any(secret in item for item in dump), key
    store = RedisStore(client=redis_server.client())
    results = [r for r in store.results(run_id, 10) if r is not None]
    assert len(results) == 10  # unpacked: the stored results themselves hold no key
    assert not any(API_KEY in r.model_dump_json() for r in results)
    assert API_KEY not in w.log.read_text()
    for f in (tmp_path / "out" / run_id).iterdir():
        assert API_KEY not in f.read_text()

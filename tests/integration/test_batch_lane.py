"""The Message Batches lane with real workers, real Redis and the real SDK against the fake API:
a whole run, a worker killed while its batch is in flight, and ``judgeq run --batch-api``."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from judgeq.testing.fake_anthropic import FakeMessagesAPI

from .harness import API_KEY, SUBMIT, RedisServer, Worker, judgeq_cli, response_rows, wait_for, write_batch

pytestmark = pytest.mark.integration

LANE_ENV = {"JUDGEQ_BATCH_POLL_INTERVAL": "0.2", "JUDGEQ_BATCH_FLUSH_INTERVAL": "1"}
SLOW = 120.0  # seconds: a fake latency for the whole batch no test waits for


def records(redis_server: RedisServer, run_id: str) -> list[dict]:
    raw = redis_server.client().hvals(f"judgeq:run:{{{run_id}}}:batches")
    return [json.loads(r) for r in raw]


def test_a_batch_lane_run_from_submit_to_report(
    tmp_path: Path, env: dict[str, str], fake_api: FakeMessagesAPI, start_worker: Callable[..., Worker]
) -> None:
    fake_api.batch_latency = 0.3
    n = 40
    directive = {3: "500", 7: "batch=expire", 11: "garbage"}
    batch = write_batch(tmp_path / "b.jsonl", response_rows(n, directive=directive))
    start_worker("w1", env=LANE_ENV)
    start_worker("w2", env=LANE_ENV)
    out = tmp_path / "out"
    proc = judgeq_cli(
        "submit", str(batch), *SUBMIT, "--batch-api", "--wait", "--out", str(out), env={**env, **LANE_ENV}
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    run_id = proc.stdout.splitlines()[0]
    report = json.loads((out / run_id / "report.json").read_text())
    c = report["counts"]
    assert (c["total"], c["graded"], c["null"]) == (n, n - 3, 3)
    assert c["null_by_reason"] == {"api_error": 1, "timeout": 1, "parse_error": 1}
    assert report["judge"]["lane"] == "batch"
    assert report["usage"]["batch_api"]["jobs"] == n
    verdicts = [json.loads(line) for line in (out / run_id / "verdicts.jsonl").read_text().splitlines()]
    assert len(verdicts) == n and len({v["index"] for v in verdicts}) == n
    assert all(v["batch"] for v in verdicts)
    assert fake_api.batch_request_count == n, "every job was sent in a batch exactly once"
    assert fake_api.request_count == 0, "no live call: every job went through the batch"
    assert API_KEY not in (out / run_id / "report.json").read_text()


def test_a_worker_killed_with_its_batch_in_flight_is_not_sent_again(
    tmp_path: Path,
    env: dict[str, str],
    fake_api: FakeMessagesAPI,
    start_worker: Callable[..., Worker],
    redis_server: RedisServer,
) -> None:
    fake_api.batch_latency = SLOW  # the batch ends only when the test says so
    n = 24
    batch = write_batch(tmp_path / "b.jsonl", response_rows(n))
    w1 = start_worker("w1", env=LANE_ENV)
    proc = judgeq_cli(
        "submit", str(batch), *SUBMIT, "--batch-api", "--run-id", "killed", env={**env, **LANE_ENV}
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    wait_for(
        lambda: any(r["state"] == "in_progress" and r["id"] for r in records(redis_server, "killed")),
        120,
        "the batch to be sent and recorded",
    )
    w1.kill()
    status = judgeq_cli("status", "killed", env=env)
    assert status.returncode == 0, status.stderr
    assert f"batches  1 in_progress ({n} requests)" in status.stdout, status.stdout

    w2 = start_worker("w2", env=LANE_ENV)
    wait_for(lambda: "judgeq worker ready" in w2.output(), 60, "w2 ready")
    assert fake_api.finish_batches() == 1
    out = tmp_path / "out"
    wait_for(lambda: redis_server.client().exists("judgeq:run:{killed}:report") == 1, 120, "the report")
    waited = judgeq_cli("report", "killed", "--out", str(out), env=env)
    assert waited.returncode == 0, waited.stderr
    report = json.loads((out / "killed" / "report.json").read_text())
    assert report["counts"]["graded"] == n and report["counts"]["total"] == n
    assert len(fake_api.batches()) == 1, "the batch sent by the killed worker was polled, not sent again"
    assert fake_api.batch_request_count == n


def test_embedded_run_with_the_batch_api(tmp_path: Path, fake_api: FakeMessagesAPI) -> None:
    fake_api.batch_latency = 0.2
    n = 12
    batch = write_batch(tmp_path / "b.jsonl", response_rows(n, directive={2: "batch=expire"}))
    run_env = {
        "ANTHROPIC_API_KEY": API_KEY,
        "ANTHROPIC_BASE_URL": fake_api.base_url,
        "JUDGEQ_CACHE_DIR": str(tmp_path / "cache"),
        **LANE_ENV,
    }
    base = {k: v for k, v in os.environ.items() if not k.startswith(("JUDGEQ_", "ANTHROPIC_"))}
    proc = judgeq_cli(
        "run", str(batch), *SUBMIT, "--batch-api", "--out", str(tmp_path / "out"), env={**base, **run_env}
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Message Batches lane: 12 jobs" in proc.stdout
    (report_path,) = (tmp_path / "out").glob("*/report.json")
    report = json.loads(report_path.read_text())
    assert report["counts"]["null_by_reason"] == {"timeout": 1}
    assert report["usage"]["cost_usd"] is None or report["usage"]["batch_api"]["jobs"] == n
    assert fake_api.batch_request_count == n

    # the lexical judge cannot take batches: one clear error, nothing graded
    lexical = judgeq_cli(
        "run", str(batch), "--rubric", "quality", "--judge", "lexical", "--batch-api", env=base
    )
    assert lexical.returncode == 2 and "--batch-api" in lexical.stderr and "Traceback" not in lexical.stderr


def test_under_a_cost_limit_the_batches_never_pass_it(
    tmp_path: Path,
    env: dict[str, str],
    fake_api: FakeMessagesAPI,
    start_worker: Callable[..., Worker],
    redis_server: RedisServer,
) -> None:
    """Issue 18.6: with --batch-api the spend passed a $0.05 limit 15 times, because batches
    kept being sent while earlier ones were in flight. Now each batch reserves its cost bound in
    Redis before it is sent: two workers, real Redis, the limit holds, and the run pauses when
    the next batch could pass it. The workers never see the producer's prices file."""
    fake_api.batch_latency = 0.2
    n, limit = 24, 0.25  # a job reserves ~$0.08 and really costs ~$0.012 at these prices
    batch = write_batch(tmp_path / "b.jsonl", response_rows(n))
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"claude-test": {"input": 10.0, "output": 50.0}}))
    start_worker("w1", env=LANE_ENV)
    start_worker("w2", env=LANE_ENV)
    args = ("submit", str(batch), *SUBMIT, "--batch-api", "--run-id", "capped", "--max-cost", str(limit))
    refused = judgeq_cli(*args, env={**env, **LANE_ENV})
    assert refused.returncode == 2 and "no price for model 'claude-test'" in refused.stderr
    assert not redis_server.client().exists("judgeq:run:{capped}:spec"), "nothing registered"
    proc = judgeq_cli(*args, env={**env, **LANE_ENV, "JUDGEQ_PRICES": str(prices)})
    assert proc.returncode == 0, proc.stderr[-3000:]
    r = redis_server.client()
    wait_for(lambda: r.hget("judgeq:run:{capped}:state", "state") == "paused", 180, "the cost pause")
    reason = r.hget("judgeq:run:{capped}:state", "pause_reason") or ""
    assert reason.startswith("max_cost: $") and "the next Message Batch could cost up to $" in reason
    spent = float(r.hget("judgeq:run:{capped}:counters", "cost_usd") or 0)
    done = int(r.hget("judgeq:run:{capped}:counters", "done") or 0)
    assert 0 < spent <= limit, spent
    assert 0 < done < n
    sent = [b for b in records(redis_server, "capped") if b.get("id")]
    assert len(sent) >= 2, "batches went on being sent as earlier ones gave back what they did not spend"
    assert sum(b["reserved_usd"] for b in sent) > spent, "each batch reserved more than it spent"
    assert fake_api.batch_request_count == done == sum(b["requests"] for b in sent)
    assert not r.exists("judgeq:run:{capped}:reserved"), "every reservation was given back"
    status = judgeq_cli("status", "capped", env=env)
    assert "PAUSED: max_cost: $" in status.stdout and "judgeq resume capped --max-cost" in status.stdout

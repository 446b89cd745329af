"""The distributed pipeline with an OpenAI judge (issue 21, point 7): a real redis-server, a
real worker process and the real openai SDK against the Chat Completions stand-in, with
faults; every job counted once, each fault its null reason."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from judgeq.testing.fake_openai import FakeChatAPI

from .harness import RedisServer, Worker, judgeq_cli, response_rows, wait_for, write_batch

pytestmark = pytest.mark.integration


def test_submit_and_workers_grade_with_an_openai_judge(
    tmp_path: Path, env: dict[str, str], redis_server: RedisServer, start_worker: Callable[..., Worker]
) -> None:
    with FakeChatAPI(api_key="sk-oa", models=("gpt-test",), structured=False) as fake:
        openai_env = {"OPENAI_API_KEY": "sk-oa", "OPENAI_BASE_URL": fake.base_url + "/v1"}
        start_worker("w1", env=openai_env)
        rows = response_rows(24, directive={3: "429*1", 5: "500", 7: "garbage", 9: "score=9"})
        out = tmp_path / "out"
        proc = judgeq_cli(
            "submit", str(write_batch(tmp_path / "b.jsonl", rows)), "--rubric", "quality",
            "--judge", "openai:gpt-test", "--run-id", "oa", "--wait", "--out", str(out),
            env={**env, **openai_env},
        )  # fmt: skip
        sent = fake.request_count
    assert proc.returncode == 0, proc.stderr
    report = json.loads((out / "oa" / "report.json").read_text())
    assert report["judge"]["provider"] == "openai" and report["counts"]["total"] == 24
    assert report["counts"]["null_by_reason"] == {"api_error": 1, "parse_error": 1}
    assert report["counts"]["graded"] == 22
    verdicts = [json.loads(x) for x in (out / "oa" / "verdicts.jsonl").read_text().splitlines()]
    assert sorted(v["job_id"] for v in verdicts) == sorted(r["id"] for r in rows)  # each once
    assert next(v for v in verdicts if v["job_id"] == rows[9]["id"])["overall"] == pytest.approx(9.0)
    assert sent >= 24 and "sk-oa" not in json.dumps(report)


LANE_ENV = {"JUDGEQ_BATCH_POLL_INTERVAL": "0.2", "JUDGEQ_BATCH_FLUSH_INTERVAL": "1"}


def test_an_openai_batch_in_flight_survives_its_worker_being_killed(
    tmp_path: Path, env: dict[str, str], redis_server: RedisServer, start_worker: Callable[..., Worker]
) -> None:
    """Issue 21.5: --batch-api with an OpenAI judge goes through the Batch API (file upload,
    /v1/batches, results by custom_id); a worker killed while its batch is in flight leaves the
    batch to the next worker, which polls it and reads its results: nothing is sent twice and
    every job is counted once."""
    with FakeChatAPI(api_key="sk-oa", models=("gpt-test",), batch_latency=600) as fake:
        openai_env = {"OPENAI_API_KEY": "sk-oa", "OPENAI_BASE_URL": fake.base_url + "/v1", **LANE_ENV}
        n = 20
        rows = response_rows(n, directive={4: "batch=expire", 6: "500"})
        w1 = start_worker("w1", env=openai_env)
        proc = judgeq_cli(
            "submit", str(write_batch(tmp_path / "b.jsonl", rows)), "--rubric", "quality",
            "--judge", "openai:gpt-test", "--batch-api", "--run-id", "obk", env={**env, **openai_env},
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr[-3000:]
        r = redis_server.client()

        def sent() -> bool:
            records = [json.loads(x) for x in r.hvals("judgeq:run:{obk}:batches")]
            return any(b["state"] == "in_progress" and b["id"] for b in records)

        wait_for(sent, 120, "the OpenAI batch to be sent and recorded")
        w1.kill()
        w2 = start_worker("w2", env=openai_env)
        wait_for(lambda: "judgeq worker ready" in w2.output(), 60, "w2 ready")
        assert fake.finish_batches() == 1
        wait_for(lambda: r.exists("judgeq:run:{obk}:report") == 1, 120, "the report")
        out = tmp_path / "out"
        got = judgeq_cli("report", "obk", "--out", str(out), env=env)
        batches, batched, live = fake.batches(), fake.batch_request_count, fake.request_count
    assert got.returncode == 0, got.stderr
    report = json.loads((out / "obk" / "report.json").read_text())
    assert report["counts"]["total"] == n and report["counts"]["graded"] == n - 2
    assert report["counts"]["null_by_reason"] == {"timeout": 1, "api_error": 1}
    assert len(batches) == 1 and batched == n and live == 0, "the batch was polled, not sent again"
    verdicts = [json.loads(x) for x in (out / "obk" / "verdicts.jsonl").read_text().splitlines()]
    assert sorted(v["job_id"] for v in verdicts) == sorted(x["id"] for x in rows)
    assert all(v["batch"] for v in verdicts) and "sk-oa" not in json.dumps(report)


def test_submit_and_workers_grade_with_an_openai_compatible_server_without_headers(
    tmp_path: Path, env: dict[str, str], redis_server: RedisServer, start_worker: Callable[..., Worker]
) -> None:
    """The distributed pipeline once more for openai-compatible:MODEL@URL: a server that needs no
    key, serves JSON mode but no structured output and sends no rate-limit headers (as many
    self-hosted servers): every job counted once, the format found by asking and recorded, the
    worker allowed to call the server by JUDGEQ_JUDGE_URLS."""
    with FakeChatAPI(api_key=None, models=("qwen",), structured=False, limit_headers=False) as fake:
        url, host = fake.base_url + "/v1", fake.base_url.split("://")[1]
        allow = {"JUDGEQ_JUDGE_URLS": fake.base_url}
        start_worker("w1", env=allow)
        rows = response_rows(16, directive={2: "garbage", 5: "500"})
        out = tmp_path / "out"
        proc = judgeq_cli(
            "submit", str(write_batch(tmp_path / "b.jsonl", rows)), "--rubric", "quality",
            "--judge", f"openai-compatible:qwen@{url}", "--run-id", "oc", "--wait", "--out", str(out),
            env={**env, **allow},
        )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    report = json.loads((out / "oc" / "report.json").read_text())
    assert report["counts"]["total"] == 16 and report["counts"]["graded"] == 14
    assert report["counts"]["null_by_reason"] == {"api_error": 1, "parse_error": 1}
    verdicts = [json.loads(x) for x in (out / "oc" / "verdicts.jsonl").read_text().splitlines()]
    assert sorted(v["job_id"] for v in verdicts) == sorted(r["id"] for r in rows)
    formats = {s["response_format"] for s in report["judge"]["served"]}
    assert formats == {"json_object"}, report["judge"]["served"]
    assert {s["endpoint"] for s in report["judge"]["served"]} == {host}


def test_a_mixed_fleet_routes_each_run_to_the_workers_that_can_grade_it(
    tmp_path: Path, env: dict[str, str], start_worker: Callable[..., Worker]
) -> None:
    # (issue 29: 2 Anthropic-only workers and 1 OpenAI worker; an OpenAI run's jobs bounced
    # between the keyless workers, 2,121 times, and stuck at 'done 2984/3000' for 2 minutes)
    with FakeChatAPI(api_key="sk-oa", models=("gpt-test",), structured=False) as fake:
        openai_env = {"OPENAI_API_KEY": "sk-oa", "OPENAI_BASE_URL": fake.base_url + "/v1"}
        anthropic_only = [start_worker(name) for name in ("a1", "a2")]
        openai_only = start_worker("o1", env={**openai_env, "ANTHROPIC_API_KEY": ""})
        ready = [line for line in openai_only.output().splitlines() if "worker ready" in line]
        assert ready and "consuming judgeq, judgeq.openai)" in ready[0], ready
        ready = [line for line in anthropic_only[0].output().splitlines() if "worker ready" in line]
        assert ready and "consuming judgeq, judgeq.anthropic)" in ready[0], ready
        out = tmp_path / "out"
        for run_id, judge, n in (("oa", "openai:gpt-test", 60), ("an", "anthropic:claude-test", 30)):
            proc = judgeq_cli(
                "submit", str(write_batch(tmp_path / f"{run_id}.jsonl", response_rows(n))), "--rubric",
                "quality", "--judge", judge, "--run-id", run_id, "--wait", "--out", str(out),
                env={**env, **openai_env}, timeout=300,
            )  # fmt: skip
            assert proc.returncode == 0, proc.stderr[-3000:]
            report = json.loads((out / run_id / "report.json").read_text())
            assert report["counts"]["graded"] == n
        calls = fake.request_count
    assert 60 <= calls <= 61  # each job once (and the worker's one probe of the response format)
    for w in (*anthropic_only, openai_only):
        assert "go back to the queue" not in w.output(), w.name  # no message bounced

"""The distributed pipeline with an OpenAI judge (issue 21, point 7): a real redis-server, a
real worker process and the real openai SDK against the Chat Completions stand-in, with
faults; every job counted once, each fault its null reason."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from judgeq.testing.fake_openai import FakeChatAPI

from .harness import RedisServer, Worker, judgeq_cli, response_rows, write_batch

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

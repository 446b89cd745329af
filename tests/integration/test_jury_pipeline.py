"""A three-family jury through the distributed pipeline (issue 31, point 4): a real
redis-server, two worker processes and three SDKs (anthropic, openai, google-genai) against
their stand-ins; each member's budget one in Redis, shared by both workers; every job counted
once; a job no member gave a verdict for is a null ``no_majority``, a fault every member meets
is its null reason, one each member meets once is retried."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from judgeq.ratelimit.redis import budget_names
from judgeq.testing.fake_anthropic import FakeMessagesAPI
from judgeq.testing.fake_gemini import FakeGeminiAPI
from judgeq.testing.fake_openai import FakeChatAPI

from .harness import RedisServer, Worker, judgeq_cli, response_rows, write_batch

pytestmark = pytest.mark.integration


def test_a_three_family_jury_grades_distributed_with_shared_budgets(
    tmp_path: Path, env: dict[str, str], redis_server: RedisServer, start_worker: Callable[..., Worker]
) -> None:
    with (
        FakeMessagesAPI(api_key="sk-a", models=("claude-jury",)) as claude,
        FakeChatAPI(api_key="sk-o", models=("gpt-jury",)) as gpt,
        FakeGeminiAPI(api_keys=("sk-g",), models=("gemini-2.5-flash",)) as gemini,
    ):
        keys = {
            "ANTHROPIC_API_KEY": "sk-a", "ANTHROPIC_BASE_URL": claude.base_url,
            "OPENAI_API_KEY": "sk-o", "OPENAI_BASE_URL": gpt.base_url + "/v1",
            "GEMINI_API_KEY": "sk-g", "GOOGLE_GEMINI_BASE_URL": gemini.base_url,
        }  # fmt: skip
        workers = {**keys, "JUDGEQ_JUDGE": "anthropic:claude-jury"}  # (a worker checks its own judge)
        start_worker("w1", env=workers)
        start_worker("w2", env=workers)
        rows = response_rows(30, directive={3: "garbage", 5: "500", 7: "429*1", 9: "score=9"})
        out = tmp_path / "out"
        proc = judgeq_cli(
            "submit", str(write_batch(tmp_path / "b.jsonl", rows)), "--rubric", "quality",
            "--judge", "anthropic:claude-jury", "--judge", "openai:gpt-jury",
            "--judge", "gemini:gemini-2.5-flash", "--jury", "median", "--run-id", "jury", "--wait",
            "--out", str(out), env={**env, **keys},
        )  # fmt: skip
        names = budget_names(redis_server.client())
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads((out / "jury" / "report.json").read_text())
    assert report["counts"]["total"] == 30
    assert report["counts"]["null_by_reason"] == {"no_majority": 1, "api_error": 1}
    verdicts = [json.loads(x) for x in (out / "jury" / "verdicts.jsonl").read_text().splitlines()]
    assert sorted(v["job_id"] for v in verdicts) == sorted(r["id"] for r in rows)  # each once
    garbage = next(v for v in verdicts if v["job_id"] == rows[3]["id"])
    assert garbage["judges_absent"] == dict.fromkeys(
        ("claude-jury", "gpt-jury", "gemini-2.5-flash"), "parse_error"
    )
    nine = next(v for v in verdicts if v["job_id"] == rows[9]["id"])
    assert nine["overall"] == pytest.approx(9.0) and len(nine["judge_scores"]) == 3
    assert report["council"]["combined"]["method"] == "jury-median"
    # one budget per member (provider, model, key), in Redis: both workers paced by it
    assert {n.split(":")[0] for n in names} >= {"anthropic", "openai", "gemini"}
    assert not any(k in json.dumps(report) for k in ("sk-a", "sk-o", "sk-g"))

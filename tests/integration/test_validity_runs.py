"""Judge validity through the real pipeline: pair jobs on workers, a council with `judgeq run`,
labels refused with file, line and field before anything is enqueued."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from judgeq.testing.fake_anthropic import FakeMessagesAPI

from .harness import API_KEY, RedisServer, Worker, judgeq_cli, write_batch

pytestmark = pytest.mark.integration


def pair_rows(n: int) -> list[dict[str, object]]:
    models = ("alpha", "beta", "gamma")
    return [
        {
            "id": f"p{i:03d}",
            "input": f"Question {i}?",
            "output_a": f"Answer {i}" + " in detail" * (i % 3),
            "output_b": f"Reply {i}",
            "model_a": models[i % 3],
            "model_b": models[(i + 1) % 3],
            "label": ("a", "b", "tie")[i % 3],
        }
        for i in range(n)
    ]


def test_pair_jobs_on_workers(
    tmp_path: Path, env: dict[str, str], fake_api: FakeMessagesAPI, start_worker: Callable[..., Worker]
) -> None:
    n = 30
    batch = write_batch(tmp_path / "pairs.jsonl", pair_rows(n))
    start_worker("w1")
    out = tmp_path / "out"
    proc = judgeq_cli(
        "submit", str(batch), "--rubric", "pairwise", "--judge", "anthropic:claude-test", "--wait",
        "--out", str(out), env=env,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    run_id = proc.stdout.splitlines()[0]
    report = json.loads((out / run_id / "report.json").read_text())
    assert report["counts"]["total"] == n and report["counts"]["graded"] == n
    pw = report["pairwise"]
    assert pw["graded"] == n and sum(p["n"] for p in pw["pairs"]) == n
    assert pw["position_consistency_n"] == n and pw["first_position_preference_n"] <= 2 * n
    assert [row["model"] for row in pw["leaderboard"]] and len(pw["leaderboard"]) == 3
    assert report["agreement"]["pairs"]["n"] == n
    assert fake_api.request_count == 2 * n, "two calls per pair (the preflight asks the Models API)"
    verdicts = [json.loads(x) for x in (out / run_id / "verdicts.jsonl").read_text().splitlines()]
    assert {v["winner"] for v in verdicts} <= {"a", "b", "tie"} and all(
        len(v["votes"]) == 2 for v in verdicts
    )
    assert "## Pairwise" in (out / run_id / "report.md").read_text()
    assert "pairwise:" in proc.stdout


def test_a_council_with_judgeq_run(tmp_path: Path, fake_api: FakeMessagesAPI) -> None:
    rows = [
        {
            "id": f"r{i}",
            "input": f"Q{i}",
            "output": f"A{i}",
            "model": ("m1", "m2")[i % 2],
            "label": 1 + i % 10,
        }
        for i in range(20)
    ]
    batch = write_batch(tmp_path / "b.jsonl", rows)
    base = {k: v for k, v in os.environ.items() if not k.startswith(("JUDGEQ_", "ANTHROPIC_"))}
    env = {
        **base,
        "ANTHROPIC_API_KEY": API_KEY,
        "ANTHROPIC_BASE_URL": fake_api.base_url,
        "JUDGEQ_CACHE_DIR": str(tmp_path / "cache"),
    }
    proc = judgeq_cli(
        "run", str(batch), "--rubric", "quality", "--judge", "anthropic:claude-haiku-4-5",
        "--judge", "anthropic:claude-sonnet-4-5", "--council", "z", "--out", str(tmp_path / "out"), env=env,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    (path,) = (tmp_path / "out").glob("*/report.json")
    report = json.loads(path.read_text())
    co = report["council"]
    assert co["judges"] == ["claude-haiku-4-5", "claude-sonnet-4-5"]
    assert all(row["n"] == 20 for row in co["per_judge"].values())
    assert co["combined"]["method"] == "z" and set(co["combined"]["by_model"]) == {"m1", "m2"}
    assert "krippendorff_alpha" in co
    by_judge = report["usage"]["by_judge"]
    assert set(by_judge) == {"claude-haiku-4-5", "claude-sonnet-4-5"}
    assert report["usage"]["cost_usd"]["total"] == pytest.approx(
        sum(j["cost_usd"] for j in by_judge.values()), abs=1e-5
    )
    assert fake_api.request_count == 2 * 20, "each judge grades every job once"
    assert fake_api.model_checks >= 2, "each judge's key and model proven first (the Models API)"
    assert report["counts"]["total"] == 20 and report["agreement"]["numeric"]["n"] == 20
    assert "council of 2 judges" in proc.stdout


@pytest.mark.parametrize(
    ("rubric", "label", "message"),
    [
        ("quality", 11, "b.jsonl:2: label: 11 is outside the rubric's scale 1-10"),
        ("quality", "a", "b.jsonl:2: label: 'a' is a pair label"),
        ("quality", "great", "b.jsonl:2: label: must be a number, pass, fail, a, b or tie; got 'great'"),
    ],
)
def test_a_bad_label_is_refused_before_anything_is_enqueued(
    tmp_path: Path, env: dict[str, str], redis_server: RedisServer, rubric: str, label: object, message: str
) -> None:
    rows = [
        {"id": "r0", "input": "q", "output": "a"},
        {"id": "r1", "input": "q", "output": "a", "label": label},
    ]
    batch = write_batch(tmp_path / "b.jsonl", rows)
    proc = judgeq_cli("submit", str(batch), "--rubric", rubric, "--judge", "anthropic:claude-test", env=env)
    assert proc.returncode == 2, proc.stderr
    assert message in proc.stderr and "Traceback" not in proc.stderr
    assert redis_server.client().zcard("judgeq:runs") == 0, "nothing registered, nothing enqueued"

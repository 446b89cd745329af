"""--max-cost: the stored result that reaches the limit pauses the run (both stores), resume
raises the limit, cached replies cost nothing; in the live lane the spend passes the limit by
at most the jobs already in hand (the Message Batches lane's bound: tests/core/test_lane.py)."""

from __future__ import annotations

import fakeredis
import pytest

from judgeq import Result
from judgeq.rubric.model import read_rubric_text
from judgeq.runspec import RunSpec
from judgeq.store.base import MemoryStore, Store, result_cost
from judgeq.store.redis import RedisStore

MODEL = "claude-sonnet-4-5"  # $3 / $15 per million tokens


@pytest.fixture(params=["memory", "redis"])
def store(request: pytest.FixtureRequest) -> Store:
    s: Store = (
        MemoryStore() if request.param == "memory" else RedisStore(fakeredis.FakeRedis(decode_responses=True))
    )
    text, source = read_rubric_text("quality")
    s.register(
        RunSpec(
            run_id="r",
            rubric_text=text,
            rubric_source=source,
            judge_provider="anthropic",
            judge_model=MODEL,
            total=10,
        )
    )
    s.set_state("r", state="running", max_cost_usd=0.05)
    return s


def result(i: int, *, cached: bool = False) -> Result:
    # 10,000 in + 1,000 out = $0.03 + $0.015 = $0.045
    return Result(
        job_id=f"j{i}",
        index=i,
        status="graded",
        overall=7.0,
        input_tokens=10_000,
        output_tokens=1_000,
        rubric_name="quality",
        rubric_version="1.0.0",
        judge_model=MODEL,
        cached=cached,
    )


def test_a_result_costs_its_tokens_and_a_cached_one_nothing() -> None:
    assert result_cost(result(0)) == pytest.approx(0.045)
    assert result_cost(result(0, cached=True)) == 0.0


def test_the_result_that_reaches_the_limit_pauses_the_run(store: Store) -> None:
    store.store_result("r", result(0))
    assert store.state("r")["state"] == "running"
    store.store_result("r", result(1, cached=True))  # free
    assert store.state("r")["state"] == "running"
    store.store_result("r", result(2))  # $0.09 >= $0.05
    state = store.state("r")
    assert state["state"] == "paused"
    assert state["pause_reason"].startswith("max_cost: $0.0900 spent of the $0.0500 allowed")
    assert store.counters("r")["cost_usd"] == pytest.approx(0.09)
    store.set_state("r", max_cost_usd=1.0)
    assert store.resume("r") and store.state("r")["state"] == "running"
    store.store_result("r", result(3))
    assert store.state("r")["state"] == "running"


def test_judgeq_run_stops_at_its_cost_limit(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    from judgeq.testing.fake_anthropic import FakeMessagesAPI

    batch = Path(__file__).parent.parent.parent / "examples" / "responses.jsonl"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JUDGEQ_", "ANTHROPIC_"))}
    with FakeMessagesAPI(api_key="k") as fake:
        env.update(ANTHROPIC_API_KEY="k", ANTHROPIC_BASE_URL=fake.base_url)
        args = [sys.executable, "-m", "judgeq", "run", str(batch), "--rubric", "quality", "--no-cache"]
        args += ["--judge", "anthropic:claude-sonnet-4-5", "--out", str(tmp_path), "-c", "1"]
        proc = subprocess.run(
            [*args, "--max-cost", "0.01"], capture_output=True, text=True, env=env, timeout=120
        )
        # its own exit code, one line: why, what was spent in all, where the partial report is
        assert proc.returncode == 3, proc.stderr
        line = proc.stderr.strip().splitlines()[-1]
        assert "stopped: max_cost: $0.01" in line and "higher --max-cost" in line, line
        assert "spent in all" in line and "reply cache" not in line  # (--no-cache: no such promise)
        assert "Traceback" not in proc.stderr
        sent = fake.request_count
        assert sent < 30  # it stopped sending judge calls
        run_id = line.split("run ", 1)[1].split()[0]
        partial = json.loads((tmp_path / run_id / "report.json").read_text())
        c = partial["counts"]
        assert c["graded"] == sent and c["null_by_reason"] == {"canceled": 30 - sent}
        assert f"${partial['usage']['estimated_cost_usd']:.4f} spent in all" in line
        # the same command with --run-id and no limit grades the rest, never the finished again
        ok = subprocess.run([*args, "--run-id", run_id], capture_output=True, text=True, env=env, timeout=120)
        assert ok.returncode == 0, ok.stderr
        assert fake.request_count == 30
        report = json.loads((tmp_path / run_id / "report.json").read_text())
        assert report["counts"]["graded"] == 30
        assert report["usage"]["cost_usd"]["total"] == report["usage"]["estimated_cost_usd"] > 0.01


class InHandJudge:
    """A live judge that answers its first ``together`` calls only once they are all in flight:
    that many jobs are in hand when the first result reaches the limit."""

    provider, model = "anthropic", MODEL

    def __init__(self, together: int) -> None:
        import threading

        self.together = together
        self.barrier = threading.Barrier(together, timeout=60)
        self.lock = threading.Lock()
        self.calls = 0

    def complete(self, request, *, timeout: float):  # type: ignore[no-untyped-def]
        import json

        from judgeq import JudgeReply
        from judgeq.testing.mock_messages import verdict_for_schema

        with self.lock:
            self.calls += 1
            first_round = self.calls <= self.together
        if first_round:
            self.barrier.wait()
        text = json.dumps(verdict_for_schema(request.output_schema, 7))
        return JudgeReply(text=text, input_tokens=10_000, output_tokens=1_000)  # $0.045


def test_the_live_lane_passes_the_limit_by_at_most_the_jobs_in_hand(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The live lane's bound (README, Budget and cost): the result that reaches the limit pauses
    the run; jobs already in hand (here the 4 of ``judgeq run -c 4``) finish, nothing more is sent."""
    import time
    from pathlib import Path

    from judgeq.producer.embedded import EmbeddedRunner
    from judgeq.producer.plan import make_plan
    from judgeq.settings import load_settings

    c, limit, job_cost = 4, 0.01, 0.045
    settings = load_settings(max_cost=limit, concurrency=c, cache=False, results_dir=tmp_path)
    plan = make_plan(
        jobs_path=Path(__file__).parent.parent.parent / "examples" / "responses.jsonl",
        jobs_name="responses.jsonl",
        rubric_ref="quality",
        settings=settings,
        judge=("anthropic:claude-sonnet-4-5",),
    )
    judge = InHandJudge(c)
    with EmbeddedRunner(lambda provider, model: judge, c, settings) as runner:
        run_id = runner.submit(plan, settings)
        deadline = time.monotonic() + 60
        while runner.store.counters(run_id).get("done", 0) < c and time.monotonic() < deadline:
            time.sleep(0.05)
        assert runner.store.state(run_id)["state"] == "paused"
        runner.stop()
    spent = runner.store.counters(run_id)["cost_usd"]
    assert judge.calls == c, "no job was sent after the pause"
    assert spent == pytest.approx(c * job_cost)
    assert spent <= limit + c * job_cost, "the bound: the limit plus the jobs in hand"
    assert runner.store.state(run_id)["pause_reason"].startswith("max_cost: $0.0450 spent of the $0.0100")
